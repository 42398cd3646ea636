// Gateway throughput against a bare pass-through proxy to the same upstream.
// Every part runs in its own process (upstream, gateway, bare proxy, and the
// autocannon load), so the gateway's RSS is its own and the load generator
// competes with both proxies equally. The load is real traffic's shape: many
// users, each with its own token and path, every request signed with a fresh
// nonce for both targets (the bare proxy just passes the header on), so the
// only difference measured is the gateway's own work. (One token flooding the
// gateway would meet its per-token nonce quota, NONCE_PER_TOKEN, which is
// right.) The gateway runs as production runs it: the built JavaScript
// (bench/build.ts) under plain node, at the default LOG_LEVEL (info: one
// access line per request), its output drained as a log collector would.
//
//   npx tsx bench/gateway.ts [seconds]
//   npx tsx bench/ab.ts --gateway <file>=<replacement>   (two gateway builds side by side)
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildServices } from './build.js';
import { cpuSeconds, startService, type Service } from './proc.js';

export interface BenchRow {
  metric: string;
  value: number;
  baseline?: number;
  ratio?: number;
  target?: string;
  pass?: boolean;
}
export interface BenchResult {
  name: string;
  rows: BenchRow[];
}

const SELF = fileURLToPath(import.meta.url);
const NODE_URL = 'http://bench-node.example';
const MASTER_SECRETS = randomBytes(32).toString('hex');
/** Users, each with its own token: requests go to them in turn. */
const USERS = 2000;
const pathOf = (uid: number): string => `/1.5/${uid}/info/collections`;
/**
 * Enough to remember every nonce of the run for its whole window (2 × HAWK_SKEW):
 * at ~10k req/s that is ~1.2M. Below that the gateway rightly answers 503.
 */
const NONCE_CACHE_SIZE = 2_000_000;
const CONNECTIONS = 32;
const WARMUP_ROUNDS = 1;
const RATIO_TARGET = 0.9;
const RSS_TARGET_MB = 150;

interface LoadResult {
  requests: number;
  requestsPerSecond: number;
  latencyP50: number;
  latencyP99: number;
  non2xx: number;
  errors: number;
}
interface ProcessStats {
  /** Peak RSS since the last reset, and before any load. */
  peakRss: number;
  idleRss: number;
  /** CPU time used so far (user + system), microseconds. */
  cpu: number;
}
/** 'bare' and one or more gateway builds, by name. */
type Target = string;
type Message = { ready: number } | { stats: ProcessStats } | { load: Record<Target, LoadResult> };

// ---- parent side ----

/** BENCH_CPU_PROF=<dir>: node's --cpu-prof for the gateways and the bare proxy, to compare where their time goes. */
function profileFlags(): string[] {
  return process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
}

function spawn(role: string, args: string[] = []): ChildProcess {
  return fork(SELF, [role, ...args], {
    // Only the TypeScript loader: not the parent's flags (a test runner's --test, say).
    execArgv: ['--import', import.meta.resolve('tsx'), ...(role === 'proxy' ? profileFlags() : [])],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

/** The gateway from its real entry point, as built by buildServices() into `buildDir`. */
function startGatewayService(upstreamPort: number, buildDir?: string): Promise<Service> {
  const profile = profileFlags();
  return startService(
    'node-gateway',
    'services/node-gateway/index.ts',
    { NODE_URL, UPSTREAM_URL: `http://127.0.0.1:${upstreamPort}`, MASTER_SECRETS, GATEWAY_PORT: '0', NONCE_CACHE_SIZE: String(NONCE_CACHE_SIZE) },
    /node-gateway listening/,
    { nodeArgs: profile, buildDir },
  );
}

/** Children exit on disconnect (cleanly, so --cpu-prof can write); a stuck one is killed. */
function stop(child: ChildProcess): void {
  if (child.connected) child.disconnect();
  setTimeout(() => child.kill(), 2000).unref();
}

function next<T>(child: ChildProcess, pick: (m: Message) => T | undefined): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: Message): void => {
      const v = pick(m);
      if (v === undefined) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(v);
    };
    const onExit = (code: number | null): void => reject(new Error(`bench child exited with ${code}`));
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

const ready = (child: ChildProcess): Promise<number> => next(child, (m) => ('ready' in m ? m.ready : undefined));

function stats(child: ChildProcess, reset = false): Promise<ProcessStats> {
  child.send(reset ? 'stats-reset' : 'stats');
  return next(child, (m) => ('stats' in m ? m.stats : undefined));
}

/** The same figures for a service process, from /proc. */
function serviceStats(s: Service, idleRss: number, reset = false): ProcessStats {
  const st = { peakRss: s.peakRssMb() * MB, idleRss, cpu: cpuSeconds(s.child.pid!) * 1e6 };
  if (reset) s.resetPeak();
  return st;
}

/**
 * One load process goes through the targets in one-second slices, so a busy
 * neighbour on the machine slows all alike; which goes first rotates too,
 * since the later slices of a round run measurably faster.
 */
async function load(ports: Record<Target, number>, rounds: number, expires: number): Promise<Record<Target, LoadResult>> {
  const child = spawn('load', [JSON.stringify(ports), String(rounds), String(expires), MASTER_SECRETS]);
  try {
    return await next(child, (m) => ('load' in m ? m.load : undefined));
  } finally {
    stop(child);
  }
}

const round = (x: number, digits = 1): number => Math.round(x * 10 ** digits) / 10 ** digits;
const MB = 1024 * 1024;

export async function benchGateway(opts: { durationSeconds?: number } = {}): Promise<BenchResult> {
  const r = await measureGateways({ gateway: undefined }, opts.durationSeconds ?? 5);
  const gw = r.load.gateway;
  const bare = r.load.bare;
  const ratio = gw.requestsPerSecond / bare.requestsPerSecond;
  const rssMb = r.stats.gateway.peakRss / MB;
  return {
    name: 'gateway',
    rows: [
      {
        metric: `gateway req/s, ${USERS} users, fresh nonces (baseline: bare node:http proxy)`,
        value: Math.round(gw.requestsPerSecond),
        baseline: Math.round(bare.requestsPerSecond),
        ratio: round(ratio, 3),
        target: `ratio >= ${RATIO_TARGET}`,
        pass: ratio >= RATIO_TARGET,
      },
      { metric: 'proxy process CPU µs per request', value: round(r.cpuUs.gateway), baseline: round(r.cpuUs.bare), ratio: round(r.cpuUs.bare / r.cpuUs.gateway, 3) },
      { metric: 'latency p50 ms', value: gw.latencyP50, baseline: bare.latencyP50 },
      { metric: 'latency p99 ms', value: gw.latencyP99, baseline: bare.latencyP99 },
      // Baseline: the gateway before any load.
      { metric: 'gateway peak RSS MB', value: round(rssMb), baseline: round(r.stats.gateway.idleRss / MB), target: `< ${RSS_TARGET_MB}`, pass: rssMb < RSS_TARGET_MB },
      // A refused or failed request would make the throughput meaningless.
      { metric: 'non-2xx responses + errors', value: gw.non2xx + gw.errors, baseline: bare.non2xx + bare.errors, target: '0', pass: gw.non2xx + gw.errors === 0 },
    ],
  };
}

export interface GatewayRun {
  load: Record<Target, LoadResult>;
  /** CPU µs per request of each proxy process. */
  cpuUs: Record<Target, number>;
  stats: Record<Target, ProcessStats>;
}

/**
 * The bare proxy and one gateway per entry of `builds` (name → build folder,
 * undefined for BUILD_DIR) under the same load, in rotating one-second slices.
 */
export async function measureGateways(builds: Record<string, string | undefined>, durationSeconds: number): Promise<GatewayRun> {
  const seconds = Math.max(1, Math.round(durationSeconds));
  const expires = Math.floor(Date.now() / 1000) + 3600;
  const children: ChildProcess[] = [];
  const gateways: Record<string, Service> = {};
  try {
    const upstream = spawn('upstream');
    children.push(upstream);
    const upstreamPort = await ready(upstream);
    const proxy = spawn('proxy', [String(upstreamPort)]);
    children.push(proxy);
    const idle: Record<string, number> = {};
    for (const [name, dir] of Object.entries(builds)) {
      gateways[name] = await startGatewayService(upstreamPort, dir);
      idle[name] = gateways[name].peakRssMb() * MB;
    }
    const ports: Record<Target, number> = { bare: await ready(proxy) };
    for (const [name, g] of Object.entries(gateways)) ports[name] = g.port;

    await load(ports, WARMUP_ROUNDS, expires);
    const snapshot = async (reset: boolean): Promise<Record<Target, ProcessStats>> => {
      const out: Record<Target, ProcessStats> = { bare: await stats(proxy, reset) };
      for (const [name, g] of Object.entries(gateways)) out[name] = serviceStats(g, idle[name], reset);
      return out;
    };
    const before = await snapshot(true);
    const result = await load(ports, seconds, expires);
    const after = await snapshot(false);
    // CPU per request is what the gateway's checks cost, whatever else the machine is doing.
    const cpuUs: Record<Target, number> = {};
    for (const t of Object.keys(ports)) cpuUs[t] = (after[t].cpu - before[t].cpu) / Math.max(1, result[t].requests);
    return { load: result, cpuUs, stats: after };
  } finally {
    for (const c of children) stop(c);
    // SIGTERM: a clean exit, so that --cpu-prof writes its profile.
    await Promise.all(Object.values(gateways).map((g) => g.stop()));
  }
}

// ---- child roles ----

function listening(server: http.Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

/** Answers the parent's 'stats' requests: peak RSS (sampled), CPU time. */
function reportStats(): void {
  const idleRss = process.memoryUsage.rss();
  let peakRss = idleRss;
  const sample = (): void => {
    peakRss = Math.max(peakRss, process.memoryUsage.rss());
  };
  setInterval(sample, 100).unref();
  process.on('message', (m) => {
    if (m !== 'stats' && m !== 'stats-reset') return;
    sample();
    const { user, system } = process.cpuUsage();
    process.send!({ stats: { peakRss, idleRss, cpu: user + system } });
    if (m === 'stats-reset') peakRss = 0;
  });
}

async function upstreamRole(): Promise<number> {
  const body = JSON.stringify({ bookmarks: 1700000000.12, tabs: 1700000001.34 });
  return listening(
    http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
        res.end(body);
      });
    }),
  );
}

/** What the bare proxy sends where the gateway sends its request id: a fixed one, as long. */
const FIXED_REQUEST_ID = '00000000-0000-4000-8000-000000000000';

/**
 * The baseline: what any reverse proxy on node:http costs, with no checks at
 * all. Like for like, it forwards what the gateway forwards: the same request
 * headers to the application (no Authorization; X-Forwarded-*, the caller's
 * identity and a request id, with fixed values where the gateway's are
 * checked or generated) and the same ones to the client.
 */
async function proxyRole(upstreamPort: number): Promise<number> {
  reportStats();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512, maxFreeSockets: 64, scheduling: 'lifo' });
  const publicUrl = new URL(NODE_URL);
  return listening(
    http.createServer((req, res) => {
      const { connection: _c, 'keep-alive': _k, authorization: _a, ...headers } = req.headers;
      const upstreamHeaders = {
        ...headers,
        'x-request-id': FIXED_REQUEST_ID,
        'x-forwarded-for': req.socket.remoteAddress,
        'x-forwarded-proto': publicUrl.protocol.slice(0, -1),
        'x-forwarded-host': publicUrl.host,
        'x-authenticated-uid': '1',
        'x-authenticated-node': NODE_URL,
      };
      const up = http.request({ agent, host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers: upstreamHeaders }, (upRes) => {
        const { connection: _uc, 'keep-alive': _uk, 'transfer-encoding': _ut, ...upHeaders } = upRes.headers;
        res.writeHead(upRes.statusCode ?? 502, { ...upHeaders, 'x-request-id': FIXED_REQUEST_ID });
        upRes.pipe(res);
      });
      up.on('error', () => {
        res.statusCode = 502;
        res.end();
      });
      req.pipe(up);
    }),
  );
}

/** `master`: the parent's MASTER_SECRETS (this process drew its own at import). */
async function loadRole(ports: Record<Target, number>, rounds: number, expires: number, master: string): Promise<void> {
  const { hawkHeader } = await import('../lib/hawk.js');
  const { makeToken, nodeSecrets } = await import('../lib/token.js');
  const secret = nodeSecrets([master], NODE_URL)[0];
  // The same tokens in every load process (same payload, same salt): a warm-up warms the caches.
  const users = Array.from({ length: USERS }, (_, i) => {
    const uid = i + 1;
    const token = makeToken({ uid, node: NODE_URL, expires, salt: (0xa00000 + uid).toString(16) }, secret);
    return { ...token, path: pathOf(uid), url: NODE_URL + pathOf(uid) };
  });
  let next = 0;
  // autocannon ships no types; this is the part of its API we use.
  const autocannon = createRequire(import.meta.url)('autocannon') as (opts: Record<string, unknown>) => Promise<{
    requests: { total: number };
    duration: number;
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
    timeouts: number;
  }>;
  const slice = (port: number, duration: number) =>
    autocannon({
      url: `http://127.0.0.1:${port}`,
      connections: CONNECTIONS,
      duration,
      requests: [
        {
          method: 'GET',
          // Users in turn, each request signed with a fresh nonce for every target: the
          // gateway's replay cache never refuses one, and the load costs the same either way.
          setupRequest: (req: Record<string, unknown>) => {
            const u = users[next++ % USERS];
            return { ...req, path: u.path, headers: { ...(req.headers as object), authorization: hawkHeader({ id: u.id, key: u.key, method: 'GET', url: u.url }) } };
          },
        },
      ],
    });
  const names = Object.keys(ports);
  const runs: Record<Target, Awaited<ReturnType<typeof slice>>[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let i = 0; i < rounds; i++) {
    for (let j = 0; j < names.length; j++) {
      const t = names[(i + j) % names.length];
      runs[t].push(await slice(ports[t], 1));
    }
  }
  const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
  const summary = (rs: (typeof runs)[string]): LoadResult => ({
    requests: sum(rs.map((r) => r.requests.total)),
    requestsPerSecond: sum(rs.map((r) => r.requests.total)) / sum(rs.map((r) => r.duration)),
    latencyP50: round(sum(rs.map((r) => r.latency.p50)) / rs.length),
    latencyP99: round(sum(rs.map((r) => r.latency.p99)) / rs.length),
    non2xx: sum(rs.map((r) => r.non2xx)),
    errors: sum(rs.map((r) => r.errors + r.timeouts)),
  });
  process.send!({ load: Object.fromEntries(names.map((n) => [n, summary(runs[n])])) });
}

async function role(name: string, args: string[]): Promise<void> {
  if (name === 'load') return loadRole(JSON.parse(args[0]) as Record<Target, number>, Number(args[1]), Number(args[2]), args[3]);
  const port = name === 'upstream' ? await upstreamRole() : await proxyRole(Number(args[0]));
  process.send!({ ready: port });
  // Stop with the parent.
  process.on('disconnect', () => process.exit(0));
}

const isMain = process.argv[1] !== undefined && path.resolve(process.argv[1]) === SELF;
if (isMain) {
  const [first, ...rest] = process.argv.slice(2);
  if (first && ['upstream', 'proxy', 'load'].includes(first)) {
    await role(first, rest);
  } else {
    buildServices();
    const result = await benchGateway(first ? { durationSeconds: Number(first) } : {});
    console.table(result.rows);
    const failed = result.rows.filter((r) => r.pass === false).map((r) => r.metric);
    console.log(failed.length === 0 ? 'gateway bench: all targets met' : `gateway bench: missed ${failed.join('; ')}`);
  }
}
