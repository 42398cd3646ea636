// Login throughput and latency for existing users, each presenting a fresh
// assertion (its certificate reused, as a real identity provider's is), with
// ES256 or RS256 user keys, and Bearer access tokens beside assertions on one
// stack: directory, nodeassign and login each in its own process on one store
// (SQLite, or MongoDB through the compatible server), the load from another
// process, next to a bare Koa hello-world measured in the same run.
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import type { Env } from '../lib/config.js';
import type { BenchResult, BenchRow } from './gateway.js';
import { addNodes, bearerFixture, loginFixture, NODE_URL, type BearerFixture, type UserKeyAlg } from './fixtures.js';
import type { LoadResult } from './load.js';
import { median, runLoad, startBareKoa, startDirectory, startLoginService, startNodeAssign, stopAll, type Service } from './proc.js';

export const CONNECTIONS = 32;
const THROUGHPUT_RATIO_TARGET = 0.2;
const P99_TARGET_MS = 25;
export const RSS_TARGET_MB = 150;

export interface BareKoa {
  requestsPerSecond: number;
  latencyP50: number;
  latencyP99: number;
  /** CPU time of the Koa process per request, µs. */
  cpuUsPerRequest: number;
}

export async function measureBareKoa(seconds: number): Promise<BareKoa> {
  const koa = await startBareKoa();
  try {
    const url = `http://127.0.0.1:${koa.port}`;
    await runLoad({ mode: 'autocannon', url, requests: [{ path: '/' }], connections: CONNECTIONS, durationSeconds: 1 });
    const cpu = koa.cpuSeconds();
    const r = await runLoad({ mode: 'autocannon', url, requests: [{ path: '/' }], connections: CONNECTIONS, durationSeconds: seconds });
    return { requestsPerSecond: r.requestsPerSecond, latencyP50: r.latencyP50, latencyP99: r.latencyP99, cpuUsPerRequest: ((koa.cpuSeconds() - cpu) * 1e6) / r.total };
  } finally {
    await koa.stop();
  }
}

export interface LoginStack {
  directory: Service;
  nodeAssign: Service;
  login: Service;
  url: string;
  /** A file of `count` requests with assertions never presented before (bench/fixtures.ts). */
  freshRequests(count: number): string;
  /** Likewise with Bearer access tokens (bench/fixtures.ts bearerFixture); only on a stack started with `bearer`. */
  freshBearerRequests?(count: number): Promise<string>;
  /** The OAuth key those tokens are signed with and the METRICS_HASH_SECRET login has; only with `bearer`. */
  bearerKeys?: { publicJwk: BearerFixture['publicJwk']; metricsHashSecret: string };
  users: number;
  close(): Promise<void>;
}

/**
 * Starts the three services on `storeUrl` and logs every user in once, so
 * the measured requests are existing users with a node (and cached certificates).
 */
export async function startLoginStack(
  storeUrl: string,
  o: { users: number; alg?: UserKeyAlg; loginNodeArgs?: string[]; emailPrefix?: string; buildDir?: string; bearer?: boolean; loginEnv?: Env; loginWrap?: string[] },
): Promise<LoginStack> {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-login-'));
  const services: Service[] = [];
  const close = async () => {
    await stopAll(services);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const fixture = await loginFixture(dir, o.users, { alg: o.alg, emailPrefix: o.emailPrefix });
    const bearer = o.bearer ? await bearerFixture(dir, o.users) : undefined;
    // One after the other: two processes turning a new SQLite file to WAL at once can meet
    // "database is locked" (seen once in lib/sqlite.ts openSqlite; SQLite skips the busy handler there).
    const directory = await startDirectory(storeUrl, {}, o.buildDir);
    services.push(directory);
    const nodeAssign = await startNodeAssign(storeUrl, {}, o.buildDir);
    services.push(nodeAssign);
    await addNodes(nodeAssign.port, [{ url: NODE_URL, capacity: 10_000_000 }]);
    const login = await startLoginService(
      { ...fixture.env, ...bearer?.env, DIRECTORY_ADDR: `127.0.0.1:${directory.port}`, NODEASSIGN_ADDR: `127.0.0.1:${nodeAssign.port}`, ...o.loginEnv },
      { nodeArgs: o.loginNodeArgs, buildDir: o.buildDir, ...(o.loginWrap ? { wrap: o.loginWrap, startTimeoutMs: 300_000 } : {}) },
    );
    services.push(login);
    const url = `http://127.0.0.1:${login.port}`;
    // First logins: create every user and assign its node.
    const created = await runLoad({ mode: 'probe', url, requestsFile: fixture.freshRequests(o.users), count: o.users, concurrency: 8 });
    if (created.statuses['200'] !== o.users) throw new Error(`creating users: ${JSON.stringify(created.statuses)}, ${created.errors} errors`);
    if (bearer) {
      const first = await runLoad({ mode: 'probe', url, requestsFile: await bearer.freshRequests(o.users), count: o.users, concurrency: 8 });
      if (first.statuses['200'] !== o.users) throw new Error(`creating Bearer users: ${JSON.stringify(first.statuses)}, ${first.errors} errors`);
    }
    return {
      directory,
      nodeAssign,
      login,
      url,
      freshRequests: (count) => fixture.freshRequests(count),
      ...(bearer
        ? { freshBearerRequests: (count: number) => bearer.freshRequests(count), bearerKeys: { publicJwk: bearer.publicJwk, metricsHashSecret: bearer.env.METRICS_HASH_SECRET! } }
        : {}),
      users: o.users,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;

function failures(r: LoadResult): number {
  return r.non2xx + r.errors;
}

const WARM_UP_SECONDS = 2;
/** Fresh assertions for the warm-up, whose rate sizes the pools of the measured windows. */
const WARM_UP_REQUESTS = 8000;
/**
 * Each window gets fresh assertions for the rate seen before it times this
 * margin; should the pool still run out, the row counting reuse says so.
 * (Not autocannon's `amount`: its run ends on a whole-second tick, which skews req/s.)
 */
const RATE_MARGIN = 2;

/**
 * `latency: false` measures throughput and CPU only (the RS256 row: a fresh
 * RS256 assertion costs ~0.5 ms to make, so its pools are kept to one window).
 */
export async function benchLogin(o: {
  label: string;
  storeUrl: string;
  seconds: number;
  users: number;
  koa: BareKoa;
  alg?: UserKeyAlg;
  latency?: boolean;
}): Promise<{ result: BenchResult; max: LoadResult; rssMb: Record<string, number> }> {
  const stack = await startLoginStack(o.storeUrl, { users: o.users, alg: o.alg });
  const label = `${o.label} ${o.alg ?? 'ES256'}`;
  try {
    const load = (pool: number, durationSeconds: number, overallRate?: number) =>
      runLoad({ mode: 'autocannon', url: stack.url, requestsFile: stack.freshRequests(pool), connections: CONNECTIONS, durationSeconds, overallRate });
    const warm = await load(WARM_UP_REQUESTS, WARM_UP_SECONDS);
    const pool = (rate: number) => Math.ceil(rate * RATE_MARGIN * o.seconds);
    for (const s of [stack.directory, stack.nodeAssign, stack.login]) s.resetPeak();
    const cpuBefore = [stack.login.cpuSeconds(), stack.directory.cpuSeconds()];
    const max = await load(pool(warm.requestsPerSecond), o.seconds);
    // CPU per request hardly depends on what else the machine is doing, unlike req/s.
    const [loginCpuUs, directoryCpuUs] = [stack.login, stack.directory].map((s, i) => ((s.cpuSeconds() - cpuBefore[i]) * 1e6) / max.total);
    const halfRate = max.requestsPerSecond / 2;
    const latencyRuns: LoadResult[] = [];
    if (o.latency !== false) {
      latencyRuns.push(await load(pool(halfRate), o.seconds, halfRate));
      latencyRuns.push(await runLoad({ mode: 'paced', url: stack.url, requestsFile: stack.freshRequests(Math.ceil(halfRate * o.seconds)), rate: halfRate, durationSeconds: o.seconds }));
    }
    const [half, paced] = latencyRuns;
    const all = [max, ...latencyRuns];
    const rssMb = Object.fromEntries([stack.directory, stack.nodeAssign, stack.login].map((s) => [s.name, round(s.peakRssMb(), 1)]));
    const ratio = max.requestsPerSecond / o.koa.requestsPerSecond;
    const failed = all.reduce((n, r) => n + failures(r), 0);
    const reused = all.reduce((n, r) => n + r.reused, 0);
    const rows: BenchRow[] = [
      {
        metric: `login ${label} max req/s (vs bare Koa)`,
        value: Math.round(max.requestsPerSecond),
        baseline: Math.round(o.koa.requestsPerSecond),
        ratio: round(ratio, 3),
        target: `ratio >= ${THROUGHPUT_RATIO_TARGET}`,
        pass: ratio >= THROUGHPUT_RATIO_TARGET,
      },
      {
        metric: `login ${label} CPU µs per request (vs bare Koa)`,
        value: Math.round(loginCpuUs),
        baseline: Math.round(o.koa.cpuUsPerRequest),
        ratio: round(o.koa.cpuUsPerRequest / loginCpuUs, 3),
      },
      { metric: `directory (${label}) CPU µs per login`, value: Math.round(directoryCpuUs) },
      { metric: `load generator CPU µs per login (${label})`, value: Math.round((max.cpuSeconds * 1e6) / max.total) },
    ];
    if (half && paced) {
      rows.push(
        { metric: `login ${label} p50 ms at half load (${Math.round(halfRate)} req/s), autocannon overallRate (bursts)`, value: half.latencyP50 },
        {
          metric: `login ${label} p99 ms at half load, autocannon overallRate (bursts)`,
          value: half.latencyP99,
          target: `< ${P99_TARGET_MS}`,
          pass: half.latencyP99 < P99_TARGET_MS,
        },
        { metric: `login ${label} p50 ms at half load, evenly paced`, value: round(paced.latencyP50, 2) },
        {
          metric: `login ${label} p99 ms at half load, evenly paced`,
          value: round(paced.latencyP99, 2),
          target: `< ${P99_TARGET_MS}`,
          pass: paced.latencyP99 < P99_TARGET_MS,
        },
      );
    }
    rows.push(
      { metric: `login ${label} non-200 + errors`, value: failed, target: '0', pass: failed === 0 },
      // Every measured request carries an assertion made for it alone.
      { metric: `login ${label} assertions presented more than once`, value: reused, target: '0', pass: reused === 0 },
    );
    for (const [name, mb] of Object.entries(rssMb)) {
      rows.push({ metric: `${name} peak RSS MB under login load (${label})`, value: mb, target: `< ${RSS_TARGET_MB}`, pass: mb < RSS_TARGET_MB });
    }
    return { result: { name: `login-${label.replace(' ', '-')}`, rows }, max, rssMb };
  } finally {
    await stack.close();
  }
}

export type Scheme = 'assertion' | 'bearer';

export interface SchemeRound {
  requestsPerSecond: number;
  /** CPU ms per request, by service and 'load generator'. */
  cpuMsPerRequest: Record<string, number>;
  /** Peak RSS during the round, MB, by service. */
  peakRssMb: Record<string, number>;
}

/**
 * One closed-loop window of the requests in `requestsFile` against `url`: req/s, CPU ms per
 * request of each of `services` and of the load generator, and their peak RSS. Throws if a
 * request failed or, unless `reuse`, if one was presented twice (`what`: what ran out).
 */
export async function closedLoopWindow(
  url: string,
  services: Service[],
  requestsFile: string,
  seconds: number,
  o: { what: string; reuse?: boolean },
): Promise<SchemeRound & { requests: number }> {
  const before = services.map((s) => s.cpuSeconds());
  for (const s of services) s.resetPeak();
  const r = await runLoad({ mode: 'autocannon', url, requestsFile, connections: CONNECTIONS, durationSeconds: seconds });
  if (r.reused > 0 && !o.reuse) throw new Error(`${r.reused} ${o.what} presented twice: the pool was too small`);
  if (failures(r) > 0) throw new Error(`failures under load: ${JSON.stringify(r.statuses)}, ${r.errors} errors`);
  return {
    requestsPerSecond: r.requestsPerSecond,
    requests: r.total,
    cpuMsPerRequest: {
      ...Object.fromEntries(services.map((s, i) => [s.name, ((s.cpuSeconds() - before[i]) * 1000) / r.total])),
      'load generator': (r.cpuSeconds * 1000) / r.total,
    },
    peakRssMb: Object.fromEntries(services.map((s) => [s.name, s.peakRssMb()])),
  };
}

/**
 * One closed-loop window of `scheme` logins on `stack`, each request with
 * credentials made for it alone; throws if any was presented twice or failed.
 */
export async function schemeRound(stack: LoginStack & { lastRate?: Partial<Record<Scheme, number>> }, seconds: number, scheme: Scheme): Promise<SchemeRound> {
  // Fresh credentials for the window at 2 × the rate seen last time (at least 4000/s: warm-ups run slow).
  const pool = Math.ceil(Math.max(stack.lastRate?.[scheme] ?? 0, 4000) * RATE_MARGIN * seconds);
  const requestsFile = scheme === 'bearer' ? await stack.freshBearerRequests!(pool) : stack.freshRequests(pool);
  const { requests: _, ...round } = await closedLoopWindow(stack.url, [stack.login, stack.directory], requestsFile, seconds, { what: `${scheme} credentials` });
  stack.lastRate = { ...stack.lastRate, [scheme]: round.requestsPerSecond };
  return round;
}

/** Bearer (one RS256 check, e = 65537) must cost login no more CPU than an ES256 assertion, and at most this. */
const BEARER_CPU_TARGET_US = 250;
const SCHEME_ROUNDS = 3;

/**
 * Bearer logins (fresh RS256 access tokens, distinct accounts) beside
 * assertion logins (fresh ES256 assertions) on one SQLite stack, in
 * alternating windows, so that a change in the machine's speed hits both
 * alike; each figure is the median of its scheme's windows.
 */
export async function benchBearerBesideAssertions(o: { storeUrl: string; seconds: number; users: number }): Promise<BenchResult> {
  const stack = await startLoginStack(o.storeUrl, { users: o.users, bearer: true });
  const schemes: Scheme[] = ['assertion', 'bearer'];
  const label: Record<Scheme, string> = { assertion: 'ES256 assertions', bearer: 'Bearer' };
  try {
    for (const scheme of schemes) await schemeRound(stack, WARM_UP_SECONDS, scheme);
    const rounds: Record<Scheme, SchemeRound[]> = { assertion: [], bearer: [] };
    for (let i = 0; i < SCHEME_ROUNDS; i++) for (const scheme of schemes) rounds[scheme].push(await schemeRound(stack, o.seconds, scheme));
    const cpuUs = (scheme: Scheme, service: string) => Math.round(median(rounds[scheme].map((r) => r.cpuMsPerRequest[service])) * 1000);
    const rows: BenchRow[] = [];
    for (const scheme of schemes) {
      const what = `${label[scheme]}, beside the other, median of ${SCHEME_ROUNDS}`;
      rows.push(
        { metric: `login sqlite ${what}: req/s`, value: Math.round(median(rounds[scheme].map((r) => r.requestsPerSecond))) },
        { metric: `login sqlite ${what}: login CPU µs per login`, value: cpuUs(scheme, 'login') },
        { metric: `login sqlite ${what}: directory CPU µs per login`, value: cpuUs(scheme, 'directory') },
        { metric: `login sqlite ${what}: load generator CPU µs per login`, value: cpuUs(scheme, 'load generator') },
      );
    }
    const [bearer, assertion] = [cpuUs('bearer', 'login'), cpuUs('assertion', 'login')];
    rows.push(
      {
        metric: 'login CPU µs per login, Bearer vs ES256 assertions (alternating windows)',
        value: bearer,
        baseline: assertion,
        ratio: round(bearer / assertion, 3),
        target: `<= assertions' and <= ${BEARER_CPU_TARGET_US}`,
        pass: bearer <= assertion && bearer <= BEARER_CPU_TARGET_US,
      },
      // schemeRound throws on any failure or reuse, so reaching here means none.
      { metric: 'login sqlite Bearer and assertions: non-200 + errors, credentials presented twice', value: 0, target: '0', pass: true },
    );
    const rss = Math.max(...rounds.bearer.map((r) => r.peakRssMb.login));
    rows.push({ metric: 'login peak RSS MB under Bearer load', value: round(rss, 1), target: `< ${RSS_TARGET_MB}`, pass: rss < RSS_TARGET_MB });
    return { name: 'login-bearer', rows };
  } finally {
    await stack.close();
  }
}

/** One measured window of the LOGIN_WORKERS comparison. */
interface WorkersWindow {
  max: LoadResult;
  loginCpu: number;
  directoryCpu: number;
  nodeAssignCpu: number;
  rssMb: number;
}

/** Windows per LOGIN_WORKERS value, taken in turn with the other's: a neighbour's burst on a shared machine hits one window, not one value. */
const WORKERS_ROUNDS = 3;

/**
 * Login as one process and as two cluster workers (LOGIN_WORKERS=1 and 2),
 * each on a stack of its own (both up at once, idle but for their turn),
 * under the same closed-loop load of fresh assertions for existing users, in
 * alternating windows; the figures are those of each value's fastest window.
 * CPU is counted for every process, the load generator's too: on a small
 * machine it takes cores the workers would use, so the share of the machine
 * used says whether login or the machine was the limit.
 */
export async function benchLoginWorkers(o: { storeDir: string; seconds: number; users: number; counts?: number[] }): Promise<BenchResult> {
  const counts = o.counts ?? [1, 2];
  const cores = cpus().length;
  const stacks: LoginStack[] = [];
  try {
    for (const workers of counts) {
      stacks.push(await startLoginStack(`sqlite:${path.join(o.storeDir, `workers-${workers}.db`)}`, { users: o.users, loginEnv: { LOGIN_WORKERS: String(workers) } }));
    }
    const load = (stack: LoginStack, pool: number, durationSeconds: number) =>
      runLoad({ mode: 'autocannon', url: stack.url, requestsFile: stack.freshRequests(pool), connections: CONNECTIONS, durationSeconds });
    const rates: number[] = [];
    for (const stack of stacks) {
      // Twice: each worker warms up on its share, so the first rate understates what follows (and the pool sized from it).
      await load(stack, WARM_UP_REQUESTS, WARM_UP_SECONDS);
      rates.push((await load(stack, WARM_UP_REQUESTS, WARM_UP_SECONDS)).requestsPerSecond);
    }
    const windows: WorkersWindow[][] = stacks.map(() => []);
    for (let round = 0; round < WORKERS_ROUNDS; round++) {
      for (const [i, stack] of stacks.entries()) {
        const services = [stack.login, stack.directory, stack.nodeAssign];
        for (const s of services) s.resetPeak();
        const cpuBefore = services.map((s) => s.cpuSeconds());
        // Sized for the fastest rate either value has reached: a warm-up slowed by a neighbour must not leave the pool short.
        const max = await load(stack, Math.ceil(Math.max(...rates) * RATE_MARGIN * o.seconds), o.seconds);
        const [loginCpu, directoryCpu, nodeAssignCpu] = services.map((s, k) => s.cpuSeconds() - cpuBefore[k]);
        rates[i] = Math.max(rates[i], max.requestsPerSecond);
        windows[i].push({ max, loginCpu, directoryCpu, nodeAssignCpu, rssMb: stack.login.peakRssMb() });
      }
    }
    const rows: BenchRow[] = [];
    const best = windows.map((w) => w.reduce((a, b) => (b.max.requestsPerSecond > a.max.requestsPerSecond ? b : a)));
    for (const [i, workers] of counts.entries()) {
      const label = `LOGIN_WORKERS=${workers}`;
      const { max, loginCpu, directoryCpu, nodeAssignCpu } = best[i];
      const perLogin = (seconds: number) => Math.round((seconds * 1e6) / max.total);
      // Over the load's own window: the servers idle while the load generator starts.
      const machinePercent = ((loginCpu + directoryCpu + nodeAssignCpu + max.cpuSeconds) / (o.seconds * cores)) * 100;
      const failed = windows[i].reduce((n, w) => n + failures(w.max), 0);
      const reused = windows[i].reduce((n, w) => n + w.max.reused, 0);
      rows.push(
        { metric: `login ${label} max req/s (${CONNECTIONS} connections; fastest of ${WORKERS_ROUNDS} windows)`, value: Math.round(max.requestsPerSecond) },
        { metric: `login ${label} p50 ms at max load`, value: max.latencyP50 },
        { metric: `login ${label} p99 ms at max load`, value: max.latencyP99 },
        { metric: `login ${label} CPU µs per request (all its processes)`, value: perLogin(loginCpu) },
        { metric: `directory CPU µs per login (${label})`, value: perLogin(directoryCpu) },
        { metric: `nodeassign CPU µs per login (${label})`, value: perLogin(nodeAssignCpu) },
        { metric: `load generator CPU µs per login (${label})`, value: perLogin(max.cpuSeconds) },
        { metric: `CPU used by login, directory, nodeassign and the load generator, % of ${cores} cores (${label})`, value: round(machinePercent, 1) },
        { metric: `login peak RSS MB, all its processes (${label})`, value: round(Math.max(...windows[i].map((w) => w.rssMb)), 1) },
        { metric: `login ${label} non-200 + errors`, value: failed, target: '0', pass: failed === 0 },
        { metric: `login ${label} assertions presented more than once`, value: reused, target: '0', pass: reused === 0 },
      );
    }
    if (best.length === 2) {
      const [a, b] = best.map((w) => w.max.requestsPerSecond);
      rows.push({ metric: `login max req/s, LOGIN_WORKERS=${counts[1]} vs ${counts[0]}`, value: Math.round(b), baseline: Math.round(a), ratio: round(b / a, 3) });
    }
    return { name: 'login-workers', rows };
  } finally {
    await Promise.all(stacks.map((s) => s.close()));
  }
}
