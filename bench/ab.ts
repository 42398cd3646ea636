// Measures a proposed change against the current code in the same run:
// builds the services twice (as they are, and with some source files
// replaced), starts a login stack on each (directory, nodeassign, login in
// their own processes, on SQLite or MongoDB) and loads them in alternating rounds. Besides
// req/s, which a busy machine blurs, it reports CPU time per request of each
// service, which the machine's other load hardly moves.
//
//   npx tsx bench/ab.ts [--seconds 5] [--rounds 3] services/login/assertion.ts=/tmp/assertion.ts [...]
//   npx tsx bench/ab.ts --gateway [--seconds 10] services/node-gateway/auth.ts=/tmp/auth.ts [...]
//   npx tsx bench/ab.ts --login-flags-b="--max-old-space-size=4096"
//   npx tsx bench/ab.ts --scheme both services/login/jwks.ts=/tmp/jwks.ts
//   npx tsx bench/ab.ts --store both services/directory/service.ts=/tmp/service.ts
//   npx tsx bench/ab.ts --login-workers 2 --scheme both services/login/assertion.ts=/tmp/assertion.ts
//   npx tsx bench/ab.ts --login-workers 2 --scheme both --b-ref 4195530
// --b-ref: B is another commit's services (its lib/, services/ and proto/, from git archive) rather than
// replaced files: how much a branch changed the cost against an older main, on the same machine at once.
// --login-flags-b: B runs login with these node flags after the production ones (lib/node-flags.ts), which they override.
// --scheme: the logins measured: assertion (the default: fresh ES256 assertions), bearer (fresh RS256 access
// tokens, one RSA-2048 OAuth key, distinct accounts), or both, each round of each on each build in turn.
// --login-workers N: both logins with LOGIN_WORKERS=N (default 1: one process); CPU counts all its processes.
// --store: sqlite (the default), mongodb (MONGODB_URL, else the compatible server started for the run; a
// database per build) or both, one after the other.
// With --gateway: both gateway builds and the bare proxy under bench/gateway.ts's load instead.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { BUILD_DIR, buildServices, ROOT, SERVICE_SOURCES } from './build.js';
import { measureGateways } from './gateway.js';
import { schemeRound as round, startLoginStack, type LoginStack, type Scheme, type SchemeRound } from './login.js';
import { mongoServer, withDatabase } from './mongo-server.js';
import { median, runLoad } from './proc.js';

export type Store = 'sqlite' | 'mongodb';
export type AbRound = SchemeRound;
type MeasuredStack = LoginStack & { lastRate?: Partial<Record<Scheme, number>> };

/** Builds B into `variantDir`: this checkout with `replace`, or the services of commit `ref`. */
export function buildVariant(variantDir: string, replace: Record<string, string>, ref?: string): void {
  if (ref === undefined) {
    buildServices(variantDir, replace);
    return;
  }
  const tree = mkdtempSync(path.join(tmpdir(), 'bench-ref-'));
  try {
    // The services alone: an older commit may lack a baseline of today's bench/.
    const archive = execFileSync('git', ['-C', ROOT, 'archive', ref, '--', 'proto', ...SERVICE_SOURCES], { maxBuffer: 256 * 1024 * 1024 });
    execFileSync('tar', ['-x', '-C', tree], { input: archive });
    buildServices(variantDir, replace, SERVICE_SOURCES, tree);
  } finally {
    rmSync(tree, { recursive: true, force: true });
  }
}

export async function compare(
  replace: Record<string, string>,
  o: { seconds: number; rounds: number; users: number; loginFlagsB?: string[]; schemes?: readonly Scheme[]; store?: Store; loginWorkers?: number; bRef?: string },
): Promise<Record<string, AbRound[]>> {
  const schemes = o.schemes ?? ['assertion'];
  const bearer = schemes.includes('bearer');
  const variantDir = path.join(ROOT, 'dist', 'bench-variant');
  buildServices();
  buildVariant(variantDir, replace, o.bRef);
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-ab-'));
  const stacks: LoginStack[] = [];
  const mongo = o.store === 'mongodb' ? mongoServer() : undefined;
  if (mongo && 'skip' in mongo) throw new Error(mongo.skip);
  const storeUrl = (build: string) => (mongo ? withDatabase(mongo.url, `ab_${build}_${process.pid}_${Date.now()}`) : `sqlite:${path.join(dir, `${build}.db`)}`);
  try {
    const loginEnv = o.loginWorkers ? { LOGIN_WORKERS: String(o.loginWorkers) } : undefined;
    stacks.push(await startLoginStack(storeUrl('a'), { users: o.users, buildDir: BUILD_DIR, bearer, loginEnv }));
    stacks.push(await startLoginStack(storeUrl('b'), { users: o.users, buildDir: variantDir, loginNodeArgs: o.loginFlagsB, bearer, loginEnv }));
    for (const scheme of schemes) for (const s of stacks) await round(s, 2, scheme);
    // Rows "A" and "B" with one scheme; "A bearer", "B assertion", … with both.
    const label = (build: string, scheme: Scheme) => (schemes.length === 1 ? build : `${build} ${scheme}`);
    const out: Record<string, AbRound[]> = {};
    for (let i = 0; i < o.rounds; i++) {
      for (const scheme of schemes) {
        for (const [build, stack] of [['A', stacks[0]], ['B', stacks[1]]] as const) (out[label(build, scheme)] ??= []).push(await round(stack, o.seconds, scheme));
      }
    }
    return out;
  } finally {
    for (const s of stacks) await s.close();
    mongo?.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(variantDir, { recursive: true, force: true });
  }
}

/** Gateway A (as it is) and B (replaced, or commit `bRef`'s) beside the bare proxy, in rotating one-second slices. */
async function compareGateways(replace: Record<string, string>, seconds: number, bRef?: string): Promise<void> {
  const variantDir = path.join(ROOT, 'dist', 'bench-variant');
  buildServices();
  buildVariant(variantDir, replace, bRef);
  try {
    const r = await measureGateways({ 'A (current)': undefined, [bRef === undefined ? 'B (replaced)' : `B (${bRef})`]: variantDir }, seconds);
    const rows = Object.fromEntries(
      Object.entries(r.load).map(([name, l]) => [
        name,
        {
          'req/s': Math.round(l.requestsPerSecond),
          'vs bare': Math.round((1000 * l.requestsPerSecond) / r.load.bare.requestsPerSecond) / 1000,
          'CPU µs/req': Math.round(r.cpuUs[name] * 10) / 10,
          'peak RSS MB': Math.round(r.stats[name].peakRss / 1024 / 1024),
          'non-2xx + errors': l.non2xx + l.errors,
        },
      ]),
    );
    console.table(rows);
  } finally {
    rmSync(variantDir, { recursive: true, force: true });
  }
}

const isMain = process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname);
if (isMain) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      seconds: { type: 'string', default: '5' },
      rounds: { type: 'string', default: '3' },
      gateway: { type: 'boolean', default: false },
      'login-flags-b': { type: 'string' },
      scheme: { type: 'string', default: 'assertion' },
      store: { type: 'string', default: 'sqlite' },
      'login-workers': { type: 'string' },
      'b-ref': { type: 'string' },
    },
  });
  const replace: Record<string, string> = {};
  for (const p of positionals) {
    const [from, to] = p.split('=');
    if (!from || !to) throw new Error(`expected source=replacement, got ${p}`);
    replace[from] = path.resolve(to);
  }
  if (values.gateway) {
    await compareGateways(replace, Number(values.seconds), values['b-ref']);
    process.exit(0);
  }
  const loginFlagsB = values['login-flags-b']?.split(/\s+/).filter((f) => f !== '');
  const schemes: Scheme[] = values.scheme === 'both' ? ['bearer', 'assertion'] : values.scheme === 'bearer' || values.scheme === 'assertion' ? [values.scheme] : [];
  if (schemes.length === 0) throw new Error(`--scheme must be assertion, bearer or both, got ${values.scheme}`);
  const stores: Store[] = values.store === 'both' ? ['sqlite', 'mongodb'] : values.store === 'sqlite' || values.store === 'mongodb' ? [values.store] : [];
  if (stores.length === 0) throw new Error(`--store must be sqlite, mongodb or both, got ${values.store}`);
  const summary = (rounds: AbRound[]) => ({
    'req/s (median)': Math.round(median(rounds.map((x) => x.requestsPerSecond))),
    ...Object.fromEntries(Object.keys(rounds[0].cpuMsPerRequest).map((k) => [`${k} CPU ms/req`, Math.round(1000 * median(rounds.map((x) => x.cpuMsPerRequest[k]))) / 1000])),
    ...Object.fromEntries(Object.keys(rounds[0].peakRssMb).map((k) => [`${k} peak RSS MB`, Math.round(Math.max(...rounds.map((x) => x.peakRssMb[k])))])),
  });
  const bRef = values['b-ref'];
  const name = (row: string, store: Store) => `${row.replace(/^A/, 'A (current)').replace(/^B/, bRef === undefined ? 'B (replaced)' : `B (${bRef})`)}${stores.length > 1 ? ` ${store}` : ''}`;
  const table: Record<string, ReturnType<typeof summary>> = {};
  for (const store of stores) {
    const loginWorkers = values['login-workers'] === undefined ? undefined : Number(values['login-workers']);
    const r = await compare(replace, { seconds: Number(values.seconds), rounds: Number(values.rounds), users: 1000, loginFlagsB, schemes, store, loginWorkers, bRef });
    for (const [row, rounds] of Object.entries(r)) table[name(row, store)] = summary(rounds);
  }
  console.table(table);
}
