// Login through `npm start`: the embedded stack as a user starts it
// (scripts/start.ts, every service in its own process), on SQLite, with the
// login benchmark's users and assertions (bench/fixtures.ts), next to the bare
// Koa hello-world measured in the same run. CPU per login and peak RSS are
// read for each process of the stack from /proc (each login worker on its own
// when LOGIN_WORKERS > 1). The peak RSS also covers, after the measured
// window, the first logins of more distinct users than login's certificate
// cache holds, then load over them, so it is the peak with a full cache.
//
//   npx tsx bench/start.ts [seconds] [fill users]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULTS } from '../lib/config.js';
import { addNode } from '../services/nodeassign/service.js';
import { SqliteNodeStore } from '../services/nodeassign/store-sqlite.js';
import { APP, loginFixture, NODE_URL } from './fixtures.js';
import type { BenchResult, BenchRow } from './gateway.js';
import { CONNECTIONS, measureBareKoa, RSS_TARGET_MB, type BareKoa } from './login.js';
import { cpuSeconds, processTree, runLoad, vmHwm } from './proc.js';
import { ROOT } from './build.js';

const RATIO_TARGET = 0.15;
/**
 * Distinct users whose first logins fill login's certificate cache: more than
 * it holds (10 000 certificates at most, fewer by its memory bound).
 */
export const CACHE_FILL_USERS = 20_000;

/**
 * The stack's processes by name: scripts/stack-part.ts titles each child
 * after its service; a child's own children (login's cluster workers) follow
 * it, numbered.
 */
function stackProcesses(parent: number): Record<string, number> {
  const out: Record<string, number> = { 'npm start (parent)': parent };
  const children = readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  for (const pid of children.map(Number)) {
    const title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0];
    out[title] = pid;
    for (const [i, worker] of processTree(pid).slice(1).entries()) out[`${title} worker ${i + 1}`] = worker;
  }
  return out;
}

/**
 * The node every user gets, registered before `npm start` runs (it adds the
 * demo node only when there is none): the demo node's capacity, 10 000, would
 * answer the fill's later first logins with 503.
 */
async function registerNode(storeFile: string): Promise<void> {
  const store = SqliteNodeStore.open(storeFile);
  try {
    await addNode(store, { service: APP, url: NODE_URL, capacity: 10_000_000 }, DEFAULTS.RELEASE_RATE);
  } finally {
    await store.close();
  }
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

export async function benchStart(o: { seconds: number; users: number; fillUsers?: number; koa?: BareKoa }): Promise<BenchResult> {
  const koa = o.koa ?? (await measureBareKoa(o.seconds));
  const fillUsers = o.fillUsers ?? CACHE_FILL_USERS;
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-start-'));
  let stack: ChildProcess | undefined;
  try {
    // The measured users first, then those of the fill.
    const fixture = await loginFixture(dir, o.users + fillUsers);
    const measured = { from: 0, to: o.users };
    const fill = { from: o.users, to: o.users + fillUsers };
    const dataDir = path.join(dir, 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    await registerNode(path.join(dataDir, 'tokenserver.db'));
    const started = await startStack({
      ...fixture.env,
      DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
      LOGIN_PORT: '0',
      GATEWAY_PORT: '0',
      DIRECTORY_PORT: '0',
      NODEASSIGN_PORT: '0',
      DEMO_APP_PORT: '0',
    });
    stack = started.child;
    const url = started.loginUrl;
    const created = await runLoad({ mode: 'probe', url, requestsFile: fixture.freshRequests(o.users, measured), count: o.users, concurrency: 8 });
    if (created.statuses['200'] !== o.users) throw new Error(`creating users: ${JSON.stringify(created.statuses)}, ${created.errors} errors`);
    // Every login presents a fresh assertion (bench/fixtures.ts), from a pool sized at twice the warm-up's rate.
    const load = (pool: number, durationSeconds: number, among = measured) =>
      runLoad({ mode: 'autocannon', url, requestsFile: fixture.freshRequests(pool, among), connections: CONNECTIONS, durationSeconds });
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
    const pool = Math.ceil(Math.max(2 * warm.requestsPerSecond, 1000) * o.seconds);
    const max = await load(pool, o.seconds);
    const cpu = Object.fromEntries(Object.entries(pids).map(([n, pid]) => [n, cpuSeconds(pid) - before[n]]));
    // The certificate cache filled: every fill user's first login, then load over them all,
    // each request a certificate the cache no longer holds.
    const firsts = await runLoad({ mode: 'probe', url, requestsFile: fixture.freshRequests(fillUsers, fill), count: fillUsers, concurrency: 8 });
    const churn = await load(pool, o.seconds, fill);
    const fillFailures = firsts.non2xx + firsts.errors + churn.non2xx + churn.errors;
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
      { metric: `login through \`npm start\` max req/s, ${fillUsers} users beyond the certificate cache`, value: Math.round(churn.requestsPerSecond) },
      { metric: `login through \`npm start\`, ${fillUsers} first logins and the load over them: non-200 + errors`, value: fillFailures, target: '0', pass: fillFailures === 0 },
    ];
    for (const [name, pid] of Object.entries(pids)) {
      rows.push({ metric: `npm start: ${name} CPU µs per login`, value: Math.round((cpu[name] * 1e6) / max.total) });
      const mb = Math.round((vmHwm(pid) / (1024 * 1024)) * 10) / 10;
      rows.push({ metric: `npm start: ${name} peak RSS MB, login load and ${fillUsers} more users (certificate cache full)`, value: mb, target: `< ${RSS_TARGET_MB}`, pass: mb < RSS_TARGET_MB });
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
  const r = await benchStart({ seconds: Number(process.argv[2] ?? 5), users: 1000, fillUsers: Number(process.argv[3] ?? CACHE_FILL_USERS) });
  console.table(r.rows);
}
