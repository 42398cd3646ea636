// Our split deployment as deployed (directory, nodeassign and login on SQLite,
// login with its default LOGIN_WORKERS, or LOGIN_WORKERS when set) beside Mozilla's Rust tokenserver
// (syncstorage-rs's syncserver, tokenserver only, on PostgreSQL, its native
// verifier with one RSA key), in alternating windows, each request a fresh
// credential: RS256 access tokens of the same shape for both (FxA's header and
// claims, X-KeyID, distinct accounts), and ES256 assertions for ours. CPU per
// login is counted for every process of each side, PostgreSQL's too. The
// closed-loop windows are loaded by wrk where it is installed (autocannon,
// saying so, where not): the load generator shares the two cores.
//
//   npm run bench -- --only vs-rust [--quick]
//   VS_RUST_LOAD=autocannon: the closed-loop windows from autocannon even where wrk is installed
//   SYNCSERVER_BIN=<path> (default ../shared/tools/syncstorage-rs/syncserver beside the checkout)
import { spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { loginWorkers } from '../lib/config.js';
import { startPostgres, type SqlServer } from '../tests/support/sql-servers.js';
import { freePort } from '../tests/support/services.js';
import { ROOT } from './build.js';
import { bearerFixture, NODE_URL, type BearerFixture } from './fixtures.js';
import type { BenchResult, BenchRow } from './gateway.js';
import type { LoadResult } from './load.js';
import { CONNECTIONS, RSS_TARGET_MB, startLoginStack, type LoginStack } from './login.js';
import { clearPeaks, median, processTree, runLoad, serviceOf, stopAll, treeCpuSeconds, vmHwm, wrkAvailable, type Service } from './proc.js';

/** Where the binary is unless SYNCSERVER_BIN says otherwise: ../shared beside the checkout. */
const DEFAULT_SYNCSERVER = path.join(ROOT, '..', 'shared', 'tools', 'syncstorage-rs', 'syncserver');
const BEARER_RATIO_TARGET = 2.2;
const ASSERTION_RATIO_TARGET = 2;
const P99_TARGET_MS = 25;
/** Fresh credentials per window: the fastest rate seen for the target so far times this, times the window. */
const RATE_MARGIN = 1.6;
/** The rate a target's first window is sized for (and its least: a window after a slow one must not run short). */
const FIRST_RATE = 3500;
const WARM_UP_SECONDS = 2;

type Target = 'rust' | 'bearer' | 'assertion';
const TARGETS: Target[] = ['rust', 'bearer', 'assertion'];
const LABEL: Record<Target, string> = { rust: 'Rust, Bearer', bearer: 'ours, Bearer', assertion: 'ours, ES256 assertions' };

/** The syncserver binary, or why the section cannot run. */
export function syncserverBinary(env: NodeJS.ProcessEnv = process.env): { bin: string } | { skip: string } {
  const given = env.SYNCSERVER_BIN?.trim();
  const bin = given ? path.resolve(ROOT, given) : DEFAULT_SYNCSERVER;
  try {
    accessSync(bin, constants.X_OK);
    return { bin };
  } catch {
    return { skip: `Mozilla's syncserver is not at ${bin} (set SYNCSERVER_BIN; ../shared/tools/syncstorage-rs/README.md)` };
  }
}

/**
 * Mozilla's tokenserver alone (storage off) on `databaseUrl`, verifying
 * access tokens with `jwk` itself, its one node `NODE_URL`; resolves once
 * `/__heartbeat__` answers 200.
 */
export async function startRustTokenserver(bin: string, databaseUrl: string, jwk: { kid: string; n: string; e: string }): Promise<Service> {
  const port = await freePort();
  const child = spawn(bin, [], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      PATH: process.env.PATH,
      RUST_LOG: 'warn',
      // Empty, it crashes at start; nothing listens there.
      SYNC_STATSD_HOST: '127.0.0.1',
      SYNC_HOST: '127.0.0.1',
      SYNC_PORT: String(port),
      SYNC_MASTER_SECRET: 'bench-master-secret-0123456789abcdef',
      SYNC_SYNCSTORAGE__ENABLED: 'false',
      SYNC_TOKENSERVER__ENABLED: 'true',
      SYNC_TOKENSERVER__DATABASE_URL: databaseUrl,
      SYNC_TOKENSERVER__NODE_TYPE: 'postgres',
      SYNC_TOKENSERVER__RUN_MIGRATIONS: 'true',
      SYNC_TOKENSERVER__INIT_NODE_URL: NODE_URL,
      SYNC_TOKENSERVER__FXA_EMAIL_DOMAIN: 'api.accounts.firefox.com',
      SYNC_TOKENSERVER__FXA_METRICS_HASH_SECRET: 'bench-metrics-secret',
      // Never called: the key below verifies every token.
      SYNC_TOKENSERVER__FXA_OAUTH_SERVER_URL: 'http://127.0.0.1:9',
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__KTY: 'RSA',
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__ALG: 'RS256',
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__KID: jwk.kid,
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__USE: 'sig',
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__FXA_CREATED_AT: '1564502400',
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__N: jwk.n,
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__E: jwk.e,
    },
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d).slice(-4000)));
  const service = serviceOf('syncserver', child, port);
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`syncserver exited with ${child.exitCode} before it was ready: ${stderr.trim()}`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/__heartbeat__`)).status === 200) return service;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      await service.stop();
      throw new Error(`syncserver did not answer /__heartbeat__ within 60 s: ${stderr.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A group of processes whose CPU is counted together (a service and its workers, PostgreSQL and its backends). */
interface Counted {
  name: string;
  pid: number;
}

interface Window {
  load: LoadResult;
  /** CPU µs per login by process group, and 'load generator'. */
  cpuUs: Record<string, number>;
  /** Peak RSS of the largest single process of each group, MB. */
  maxProcessRssMb: Record<string, number>;
}

interface Side {
  url: string;
  counted: Counted[];
  requests(count: number): Promise<string>;
}

/** The closed-loop windows' load generator: wrk where installed (bench/load.ts). */
type ClosedLoop = 'wrk' | 'autocannon';

/**
 * One window of `side`, closed loop from `generator` (or at `rate`, evenly paced), each request with a credential of its own.
 * A warm-up window may run out of credentials: it returns, and the caller sizes the next from the rate it saw.
 */
async function measure(side: Side, seconds: number, pool: number, generator: ClosedLoop, rate?: number, warmUp = false): Promise<Window> {
  const requestsFile = await side.requests(pool);
  for (const c of side.counted) clearPeaks(c.pid);
  const before = side.counted.map((c) => treeCpuSeconds(c.pid));
  const load = await runLoad(
    rate === undefined
      ? { mode: generator, url: side.url, requestsFile, connections: CONNECTIONS, durationSeconds: seconds }
      : { mode: 'paced', url: side.url, requestsFile, rate, durationSeconds: seconds },
  );
  if (warmUp && load.reused > 0) return { load, cpuUs: {}, maxProcessRssMb: {} };
  if (load.reused > 0) throw new Error(`${load.reused} credentials presented twice: the pool of ${pool} was too small`);
  if (load.non2xx + load.errors > 0) throw new Error(`failures under load: ${JSON.stringify(load.statuses)}, ${load.errors} errors`);
  const cpuUs: Record<string, number> = {};
  side.counted.forEach((c, i) => (cpuUs[c.name] = ((treeCpuSeconds(c.pid) - before[i]) * 1e6) / load.total));
  cpuUs['load generator'] = (load.cpuSeconds * 1e6) / load.total;
  const maxProcessRssMb = Object.fromEntries(side.counted.map((c) => [c.name, Math.max(...processTree(c.pid).map(vmHwm)) / (1024 * 1024)]));
  return { load, cpuUs, maxProcessRssMb };
}

const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;

export async function benchVsRust(o: { seconds: number; rounds: number; users: number }): Promise<BenchResult | { skip: string }> {
  const binary = syncserverBinary();
  if ('skip' in binary) return binary;
  const pg = await startPostgres();
  if ('skip' in pg) return { skip: pg.skip };
  const postgres: SqlServer = pg.server;
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-vs-rust-'));
  const services: Service[] = [];
  let stack: LoginStack | undefined;
  try {
    const rustTokens: BearerFixture = await bearerFixture(dir, o.users);
    const rust = await startRustTokenserver(binary.bin, postgres.url, rustTokens.publicJwk);
    services.push(rust);
    const rustUrl = `http://127.0.0.1:${rust.port}`;
    // Every Rust account logs in once (its user row and node), as ours do in startLoginStack.
    const first = await runLoad({ mode: 'probe', url: rustUrl, requestsFile: await rustTokens.freshRequests(o.users), count: o.users, concurrency: 8 });
    if (first.statuses['200'] !== o.users) throw new Error(`creating the Rust tokenserver's users: ${JSON.stringify(first.statuses)}, ${first.errors} errors`);

    const workers = loginWorkers(process.env);
    stack = await startLoginStack(`sqlite:${path.join(dir, 'store.db')}`, { users: o.users, bearer: true, loginEnv: { LOGIN_WORKERS: String(workers) } });
    const ours = stack;
    const oursCounted: Counted[] = [ours.login, ours.directory, ours.nodeAssign].map((s) => ({ name: s.name, pid: s.child.pid! }));
    const sides: Record<Target, Side> = {
      rust: { url: rustUrl, counted: [{ name: 'syncserver', pid: rust.child.pid! }, { name: 'postgres', pid: postgres.pid }], requests: (n) => rustTokens.freshRequests(n) },
      bearer: { url: ours.url, counted: oursCounted, requests: (n) => ours.freshBearerRequests!(n) },
      assertion: { url: ours.url, counted: oursCounted, requests: async (n) => ours.freshRequests(n) },
    };

    // VS_RUST_LOAD=autocannon: autocannon even where wrk is installed, to compare the two.
    const wrk = process.env.VS_RUST_LOAD === 'autocannon' ? { skip: 'VS_RUST_LOAD=autocannon' } : wrkAvailable();
    if ('skip' in wrk) console.log(`[vs-rust] ${wrk.skip}`);
    const generator: ClosedLoop = 'skip' in wrk ? 'autocannon' : 'wrk';
    const fastest: Record<Target, number> = { rust: FIRST_RATE, bearer: FIRST_RATE, assertion: FIRST_RATE };
    const pool = (t: Target, seconds: number) => Math.ceil(fastest[t] * RATE_MARGIN * seconds);
    for (const t of TARGETS) {
      // A faster machine than FIRST_RATE assumes runs out of credentials: warm up again with a pool for the rate seen.
      for (let tries = 1; ; tries++) {
        const w = await measure(sides[t], WARM_UP_SECONDS, pool(t, WARM_UP_SECONDS), generator, undefined, true);
        fastest[t] = Math.max(fastest[t], w.load.requestsPerSecond);
        if (w.load.reused === 0) break;
        if (tries === 3) throw new Error(`${LABEL[t]}: warm-up windows still ran out of credentials at ${Math.round(w.load.requestsPerSecond)} req/s`);
      }
    }
    const windows: Record<Target, Window[]> = { rust: [], bearer: [], assertion: [] };
    for (let r = 0; r < o.rounds; r++) {
      // Each round starts with another target, so none always follows the same one.
      for (let k = 0; k < TARGETS.length; k++) {
        const t = TARGETS[(r + k) % TARGETS.length];
        const w = await measure(sides[t], o.seconds, pool(t, o.seconds), generator);
        windows[t].push(w);
        fastest[t] = Math.max(fastest[t], w.load.requestsPerSecond);
        console.log(`[vs-rust] round ${r + 1}, ${LABEL[t]}: ${Math.round(w.load.requestsPerSecond)} req/s, ${Math.round(Object.values(w.cpuUs).reduce((a, b) => a + b, 0) - w.cpuUs['load generator'])} µs CPU per login`);
      }
    }
    // At half of each target's median rate, evenly paced: the latency a service gives with room to spare.
    const half: Partial<Record<Target, Window>> = {};
    for (const t of TARGETS) {
      const rate = median(windows[t].map((w) => w.load.requestsPerSecond)) / 2;
      half[t] = await measure(sides[t], o.seconds, Math.ceil(rate * o.seconds) + 1, generator, rate);
    }
    return { name: 'vs-rust', rows: rows({ ...o, generator }, workers, windows, half as Record<Target, Window>) };
  } finally {
    await stack?.close();
    await stopAll(services);
    await postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function rows(o: { seconds: number; rounds: number; generator: ClosedLoop }, workers: number, windows: Record<Target, Window[]>, half: Record<Target, Window>): BenchRow[] {
  const med = (t: Target, f: (w: Window) => number) => median(windows[t].map(f));
  const rps = (t: Target) => med(t, (w) => w.load.requestsPerSecond);
  const serverCpu = (w: Window) => Object.entries(w.cpuUs).reduce((sum, [k, v]) => (k === 'load generator' ? sum : sum + v), 0);
  const out: BenchRow[] = [];
  const what = `median of ${o.rounds} alternating ${o.seconds} s windows, ${o.generator}, ${CONNECTIONS} connections`;
  for (const t of TARGETS) {
    const by = Object.keys(windows[t][0].cpuUs).map((k) => `${k} ${Math.round(med(t, (w) => w.cpuUs[k]))}`).join(', ');
    out.push(
      { metric: `${LABEL[t]}: req/s (${what})`, value: Math.round(rps(t)) },
      { metric: `${LABEL[t]}: server CPU µs per login, all processes (${by})`, value: Math.round(med(t, serverCpu)) },
      { metric: `${LABEL[t]}: p99 ms at max load (p50 ${med(t, (w) => w.load.latencyP50)})`, value: med(t, (w) => w.load.latencyP99) },
      {
        // The server CPU per login of that window beside the closed loop's: on a virtual machine an idle core wakes slow.
        metric: `${LABEL[t]}: p99 ms at half its rate (${Math.round(rps(t) / 2)} req/s, evenly paced; p50 ${round(half[t].load.latencyP50, 2)}; server CPU µs per login ${Math.round(serverCpu(half[t]))})`,
        value: round(half[t].load.latencyP99, 2),
        ...(t === 'rust' ? {} : { target: `< ${P99_TARGET_MS}`, pass: half[t].load.latencyP99 < P99_TARGET_MS }),
      },
    );
  }
  for (const [t, target] of [['bearer', BEARER_RATIO_TARGET], ['assertion', ASSERTION_RATIO_TARGET]] as const) {
    const ratio = rps(t) / rps('rust');
    out.push({ metric: `${LABEL[t]} / Rust: req/s`, value: Math.round(rps(t)), baseline: Math.round(rps('rust')), ratio: round(ratio, 3), target: `>= ${target}`, pass: ratio >= target });
    const cpu = med(t, serverCpu);
    const rustCpu = med('rust', serverCpu);
    out.push({ metric: `${LABEL[t]} / Rust: server CPU per login, µs (ratio Rust / ours)`, value: Math.round(cpu), baseline: Math.round(rustCpu), ratio: round(rustCpu / cpu, 3) });
  }
  const peak = (t: Target, name: string) => Math.max(...windows[t].map((w) => w.maxProcessRssMb[name] ?? 0));
  for (const name of ['login', 'directory', 'nodeassign']) {
    const mb = Math.max(peak('bearer', name), peak('assertion', name));
    out.push({ metric: `ours: ${name} peak RSS MB, largest single process${name === 'login' ? ` (LOGIN_WORKERS=${workers})` : ''}`, value: round(mb, 1), target: `< ${RSS_TARGET_MB}`, pass: mb < RSS_TARGET_MB });
  }
  out.push({ metric: 'Rust: syncserver peak RSS MB', value: round(peak('rust', 'syncserver'), 1) });
  out.push({ metric: `machine: ${cpus().length} cores shared by the servers and the load generator; non-200, errors, credentials presented twice`, value: 0, target: '0', pass: true });
  return out;
}
