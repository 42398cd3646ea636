// Instructions per login: login run under valgrind's callgrind, counting only
// while a window of fresh-credential logins runs (after a warm-up), all its
// threads together (V8's GC helpers and libuv's pool too). Unlike CPU time, the
// count hardly moves with what else the machine is doing, so two builds
// compare on a busy machine. Builds A (as is) and B (with source files
// replaced, as bench/ab.ts) in alternating rounds; login is one process.
//
//   npx tsx bench/instructions.ts [--requests 400] [--rounds 2] [--scheme both] services/login/server.ts=/tmp/server.ts
// Needs valgrind (callgrind_control); ~20× slower than native while counting.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { BUILD_DIR, buildServices, ROOT } from './build.js';
import { startLoginStack, type LoginStack, type Scheme } from './login.js';
import { median, runLoad } from './proc.js';

/** Logins before counting starts: V8 has compiled the hot paths by then. */
const WARM_UP = 1500;

function callgrind(pid: number, ...args: string[]): void {
  execFileSync('callgrind_control', [...args, String(pid)], { stdio: 'ignore' });
}

/** Instructions counted in a callgrind output file: its `totals:` line (its `summary:` one says 0 in a dump). */
function totalInstructions(file: string): number {
  const m = /^totals: (\d+)/m.exec(readFileSync(file, 'utf8'));
  return m ? Number(m[1]) : 0;
}

async function requestsFile(stack: LoginStack, scheme: Scheme, count: number): Promise<string> {
  return scheme === 'bearer' ? stack.freshBearerRequests!(count) : stack.freshRequests(count);
}

/** One counted window of `count` logins of `scheme` on a fresh login process of `buildDir`: instructions per login. */
async function countOnce(buildDir: string, scheme: Scheme, count: number, dir: string, tag: string): Promise<number> {
  const out = path.join(dir, `callgrind.${tag}.out`);
  const stack = await startLoginStack(`sqlite:${path.join(dir, `${tag}.db`)}`, {
    users: 200,
    buildDir,
    bearer: scheme === 'bearer',
    // Under valgrind the first calls run ~50× slower than the default deadline allows for.
    loginEnv: { GRPC_DEADLINE_MS: '60000' },
    loginWrap: ['valgrind', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}`],
  });
  try {
    const url = stack.url;
    const warm = await runLoad({ mode: 'probe', url, requestsFile: await requestsFile(stack, scheme, WARM_UP), count: WARM_UP, concurrency: 8 });
    if (warm.statuses['200'] !== WARM_UP) throw new Error(`warm-up: ${JSON.stringify(warm.statuses)}`);
    const file = await requestsFile(stack, scheme, count);
    const pid = stack.login.child.pid!;
    callgrind(pid, '-i', 'on');
    const r = await runLoad({ mode: 'probe', url, requestsFile: file, count, concurrency: 8 });
    callgrind(pid, '-i', 'off');
    // A dump now: login's exit under valgrind may outlast the stop's grace period.
    callgrind(pid, '-d');
    if (r.statuses['200'] !== count) throw new Error(`counted window: ${JSON.stringify(r.statuses)}`);
  } finally {
    await stack.close();
  }
  const dumps = readdirSync(dir).filter((f) => f.startsWith(path.basename(out)));
  return Math.max(...dumps.map((f) => totalInstructions(path.join(dir, f)))) / count;
}

export async function compareInstructions(replace: Record<string, string>, o: { requests: number; rounds: number; schemes: Scheme[] }): Promise<Record<string, number[]>> {
  if (spawnSync('callgrind_control', ['--version']).status !== 0) throw new Error('valgrind (callgrind_control) is not installed');
  const variantDir = path.join(ROOT, 'dist', 'bench-variant-instr');
  buildServices();
  buildServices(variantDir, replace);
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-instr-'));
  const out: Record<string, number[]> = {};
  try {
    for (let i = 0; i < o.rounds; i++) {
      for (const scheme of o.schemes) {
        for (const [build, buildDir] of [['A', BUILD_DIR], ['B', variantDir]] as const) {
          const n = await countOnce(buildDir, scheme, o.requests, dir, `${build}-${scheme}-${i}`);
          console.log(`[instructions] round ${i + 1} ${build} ${scheme}: ${Math.round(n / 1000)}k instructions per login`);
          (out[`${build} ${scheme}`] ??= []).push(n);
        }
      }
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(variantDir, { recursive: true, force: true });
  }
}

const isMain = process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname);
if (isMain) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { requests: { type: 'string', default: '400' }, rounds: { type: 'string', default: '2' }, scheme: { type: 'string', default: 'both' } },
  });
  const replace: Record<string, string> = {};
  for (const p of positionals) {
    const [from, to] = p.split('=');
    if (!from || !to) throw new Error(`expected source=replacement, got ${p}`);
    replace[from] = path.resolve(to);
  }
  const schemes: Scheme[] = values.scheme === 'both' ? ['bearer', 'assertion'] : values.scheme === 'bearer' || values.scheme === 'assertion' ? [values.scheme] : [];
  if (schemes.length === 0) throw new Error(`--scheme must be assertion, bearer or both, got ${values.scheme}`);
  const r = await compareInstructions(replace, { requests: Number(values.requests), rounds: Number(values.rounds), schemes });
  const table: Record<string, Record<string, number>> = {};
  for (const scheme of schemes) {
    const [a, b] = [median(r[`A ${scheme}`]), median(r[`B ${scheme}`])];
    table[scheme] = { 'A k instr/login': Math.round(a / 1000), 'B k instr/login': Math.round(b / 1000), 'B / A': Math.round((1000 * b) / a) / 1000, 'A spread %': spread(r[`A ${scheme}`]), 'B spread %': spread(r[`B ${scheme}`]) };
  }
  console.table(table);
}

function spread(xs: number[]): number {
  return Math.round((1000 * (Math.max(...xs) - Math.min(...xs))) / median(xs)) / 10;
}
