// Login through `npm start`: the embedded stack as a user starts it
// (scripts/start.ts, every service in its own process), on SQLite, with the
// login benchmark's users and assertions (bench/fixtures.ts), next to the bare
// Koa hello-world measured in the same run. CPU per login and peak RSS are
// read for each process of the stack from /proc.
//
//   npx tsx bench/start.ts [seconds]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loginFixture } from './fixtures.js';
import type { BenchResult, BenchRow } from './gateway.js';
import { CONNECTIONS, measureBareKoa, RSS_TARGET_MB, type BareKoa } from './login.js';
import { cpuSeconds, runLoad, vmHwm } from './proc.js';
import { ROOT } from './build.js';

const RATIO_TARGET = 0.15;

/** The stack's processes by name: scripts/stack-part.ts titles each child after its service. */
function stackProcesses(parent: number): Record<string, number> {
  const out: Record<string, number> = { 'npm start (parent)': parent };
  const children = readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  for (const pid of children.map(Number)) {
    const title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0];
    out[title] = pid;
  }
  return out;
}

/** scripts/start.ts until its banner; returns the login URL. */
function startStack(env: Record<string, string | undefined>): Promise<{ child: ChildProcess; loginUrl: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer): void => {
      out += d;
      const login = /login:\s+(http:\/\/\S+?)\/1\.0\//.exec(out);
      if (login && out.includes('Ctrl-C stops everything')) {
        child.stdout!.off('data', onData);
        // From here on drained unread, as a log collector would.
        child.stdout!.resume();
        resolve({ child, loginUrl: login[1] });
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`npm start exited (${code}) before its banner:\n${out.slice(-2000)}`)));
  });
}

export async function benchStart(o: { seconds: number; users: number; koa?: BareKoa }): Promise<BenchResult> {
  const koa = o.koa ?? (await measureBareKoa(o.seconds));
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-start-'));
  let stack: ChildProcess | undefined;
  try {
    const fixture = await loginFixture(dir, o.users);
    const started = await startStack({
      ...fixture.env,
      DATA_DIR: path.join(dir, 'data'),
      LOG_LEVEL: 'info',
      LOGIN_PORT: '0',
      GATEWAY_PORT: '0',
      DIRECTORY_PORT: '0',
      NODEASSIGN_PORT: '0',
      DEMO_APP_PORT: '0',
    });
    stack = started.child;
    const url = started.loginUrl;
    const created = await runLoad({ mode: 'probe', url, requestsFile: fixture.freshRequests(o.users), count: o.users, concurrency: 8 });
    if (created.statuses['200'] !== o.users) throw new Error(`creating users: ${JSON.stringify(created.statuses)}, ${created.errors} errors`);
    // Every login presents a fresh assertion (bench/fixtures.ts), from a pool sized at twice the warm-up's rate.
    const load = (pool: number, durationSeconds: number) =>
      runLoad({ mode: 'autocannon', url, requestsFile: fixture.freshRequests(pool), connections: CONNECTIONS, durationSeconds });
    const warm = await load(4000, 2);
    const pids = stackProcesses(stack.pid!);
    for (const pid of Object.values(pids)) {
      try {
        // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux).
        writeFileSync(`/proc/${pid}/clear_refs`, '5');
      } catch {
        // Without it the peak includes start-up, which only overstates it.
      }
    }
    const before = Object.fromEntries(Object.entries(pids).map(([n, pid]) => [n, cpuSeconds(pid)]));
    const max = await load(Math.ceil(Math.max(2 * warm.requestsPerSecond, 1000) * o.seconds), o.seconds);
    const ratio = max.requestsPerSecond / koa.requestsPerSecond;
    const rows: BenchRow[] = [
      {
        metric: 'login through `npm start` max req/s (vs bare Koa)',
        value: Math.round(max.requestsPerSecond),
        baseline: Math.round(koa.requestsPerSecond),
        ratio: Math.round(ratio * 1000) / 1000,
        target: `ratio >= ${RATIO_TARGET}`,
        pass: ratio >= RATIO_TARGET,
      },
      { metric: 'login through `npm start` non-200 + errors', value: max.non2xx + max.errors, target: '0', pass: max.non2xx + max.errors === 0 },
    ];
    for (const [name, pid] of Object.entries(pids)) {
      rows.push({ metric: `npm start: ${name} CPU µs per login`, value: Math.round(((cpuSeconds(pid) - before[name]) * 1e6) / max.total) });
      const mb = Math.round((vmHwm(pid) / (1024 * 1024)) * 10) / 10;
      rows.push({ metric: `npm start: ${name} peak RSS MB under login load`, value: mb, target: `< ${RSS_TARGET_MB}`, pass: mb < RSS_TARGET_MB });
    }
    return { name: 'login-npm-start', rows };
  } finally {
    if (stack && stack.exitCode === null) {
      const exited = new Promise((r) => stack!.once('exit', r));
      stack.kill('SIGINT');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const r = await benchStart({ seconds: Number(process.argv[2] ?? 5), users: 1000 });
  console.table(r.rows);
}
