// Gateway throughput against a bare pass-through proxy to the same upstream.
// Every part runs in its own process (upstream, gateway, bare proxy, and the
// autocannon load), so the gateway's RSS is its own and the load generator
// competes with both proxies equally. The load signs every request with a
// fresh nonce for both targets (the bare proxy just passes the header on), so
// the only difference measured is the gateway's own work. The gateway runs as
// production runs it: the built JavaScript (bench/build.ts) under plain node,
// at the default LOG_LEVEL (info: one access line per request), its output
// drained as a log collector would.
//
//   npx tsx bench/gateway.ts [seconds]
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
const UID = 1;
const PATH = `/1.5/${UID}/info/collections`;
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
type Target = 'bare' | 'gateway';
type Message = { ready: number } | { stats: ProcessStats } | { load: Record<Target, LoadResult> };

// ---- parent side ----

function spawn(role: string, args: string[] = []): ChildProcess {
  return fork(SELF, [role, ...args], {
    // Only the TypeScript loader: not the parent's flags (a test runner's --test, say).
    execArgv: ['--import', import.meta.resolve('tsx')],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

/** The gateway from its real entry point, as built by buildServices(); BENCH_CPU_PROF=<dir> profiles it. */
function startGatewayService(upstreamPort: number): Promise<Service> {
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  return startService(
    'node-gateway',
    'services/node-gateway/index.ts',
    { NODE_URL, UPSTREAM_URL: `http://127.0.0.1:${upstreamPort}`, MASTER_SECRETS, GATEWAY_PORT: '0' },
    /node-gateway listening/,
    { nodeArgs: profile },
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
 * One load process alternates between the two targets in one-second slices,
 * so a busy neighbour on the machine slows both alike; which goes first
 * alternates too, since the second slice of a pair runs measurably faster.
 */
async function load(ports: Record<Target, number>, rounds: number, token: { id: string; key: string }): Promise<Record<Target, LoadResult>> {
  const child = spawn('load', [String(ports.bare), String(ports.gateway), String(rounds), token.id, token.key]);
  try {
    return await next(child, (m) => ('load' in m ? m.load : undefined));
  } finally {
    stop(child);
  }
}

const round = (x: number, digits = 1): number => Math.round(x * 10 ** digits) / 10 ** digits;
const MB = 1024 * 1024;

export async function benchGateway(opts: { durationSeconds?: number } = {}): Promise<BenchResult> {
  const seconds = Math.max(1, Math.round(opts.durationSeconds ?? 5));
  const { makeToken, nodeSecrets } = await import('../lib/token.js');
  const token = makeToken(
    { uid: UID, node: NODE_URL, expires: Math.floor(Date.now() / 1000) + 3600, salt: 'a1b2c3' },
    nodeSecrets([MASTER_SECRETS], NODE_URL)[0],
  );
  const children: ChildProcess[] = [];
  let gateway: Service | undefined;
  try {
    const upstream = spawn('upstream');
    children.push(upstream);
    const upstreamPort = await ready(upstream);
    const proxy = spawn('proxy', [String(upstreamPort)]);
    children.push(proxy);
    gateway = await startGatewayService(upstreamPort);
    const gatewayIdleRss = gateway.peakRssMb() * MB;
    const ports = { bare: await ready(proxy), gateway: gateway.port };

    await load(ports, WARMUP_ROUNDS, token);
    const before = { bare: await stats(proxy, true), gateway: serviceStats(gateway, gatewayIdleRss, true) };
    const result = await load(ports, seconds, token);
    const after = { bare: await stats(proxy), gateway: serviceStats(gateway, gatewayIdleRss) };
    // CPU per request is what the gateway's checks cost, whatever else the machine is doing.
    const cpuPerRequest = (t: Target): number => (after[t].cpu - before[t].cpu) / Math.max(1, result[t].requests);

    const gw = result.gateway;
    const bare = result.bare;
    const ratio = gw.requestsPerSecond / bare.requestsPerSecond;
    const rssMb = after.gateway.peakRss / MB;
    return {
      name: 'gateway',
      rows: [
        {
          metric: 'gateway req/s (baseline: bare node:http proxy)',
          value: Math.round(gw.requestsPerSecond),
          baseline: Math.round(bare.requestsPerSecond),
          ratio: round(ratio, 3),
          target: `ratio >= ${RATIO_TARGET}`,
          pass: ratio >= RATIO_TARGET,
        },
        { metric: 'proxy process CPU µs per request', value: round(cpuPerRequest('gateway')), baseline: round(cpuPerRequest('bare')), ratio: round(cpuPerRequest('bare') / cpuPerRequest('gateway'), 3) },
        { metric: 'latency p50 ms', value: gw.latencyP50, baseline: bare.latencyP50 },
        { metric: 'latency p99 ms', value: gw.latencyP99, baseline: bare.latencyP99 },
        // Baseline: the gateway before any load.
        { metric: 'gateway peak RSS MB', value: round(rssMb), baseline: round(after.gateway.idleRss / MB), target: `< ${RSS_TARGET_MB}`, pass: rssMb < RSS_TARGET_MB },
        // A refused or failed request would make the throughput meaningless.
        { metric: 'non-2xx responses + errors', value: gw.non2xx + gw.errors, baseline: bare.non2xx + bare.errors, target: '0', pass: gw.non2xx + gw.errors === 0 },
      ],
    };
  } finally {
    for (const c of children) stop(c);
    // SIGTERM: a clean exit, so that --cpu-prof writes its profile.
    await gateway?.stop();
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

/** The baseline: what any reverse proxy on node:http costs, with no checks at all. */
async function proxyRole(upstreamPort: number): Promise<number> {
  reportStats();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512, maxFreeSockets: 64, scheduling: 'lifo' });
  return listening(
    http.createServer((req, res) => {
      const { connection: _c, 'keep-alive': _k, ...headers } = req.headers;
      const up = http.request({ agent, host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers }, (upRes) => {
        const { connection: _uc, 'keep-alive': _uk, 'transfer-encoding': _ut, ...upHeaders } = upRes.headers;
        res.writeHead(upRes.statusCode ?? 502, upHeaders);
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

async function loadRole(ports: Record<Target, number>, rounds: number, id: string, key: string): Promise<void> {
  const { hawkHeader } = await import('../lib/hawk.js');
  // autocannon ships no types; this is the part of its API we use.
  const autocannon = createRequire(import.meta.url)('autocannon') as (opts: Record<string, unknown>) => Promise<{
    requests: { total: number };
    duration: number;
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
    timeouts: number;
  }>;
  const url = NODE_URL + PATH;
  const slice = (port: number, duration: number) =>
    autocannon({
      url: `http://127.0.0.1:${port}`,
      connections: CONNECTIONS,
      duration,
      requests: [
        {
          method: 'GET',
          path: PATH,
          // Signed with a fresh nonce per request for both targets: the gateway's
          // replay cache never refuses one, and the load costs the same either way.
          setupRequest: (req: Record<string, unknown>) => ({
            ...req,
            headers: { ...(req.headers as object), authorization: hawkHeader({ id, key, method: 'GET', url }) },
          }),
        },
      ],
    });
  const runs: Record<Target, Awaited<ReturnType<typeof slice>>[]> = { bare: [], gateway: [] };
  for (let i = 0; i < rounds; i++) {
    const targets: Target[] = i % 2 === 0 ? ['bare', 'gateway'] : ['gateway', 'bare'];
    for (const t of targets) runs[t].push(await slice(ports[t], 1));
  }
  const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
  const summary = (rs: typeof runs.bare): LoadResult => ({
    requests: sum(rs.map((r) => r.requests.total)),
    requestsPerSecond: sum(rs.map((r) => r.requests.total)) / sum(rs.map((r) => r.duration)),
    latencyP50: round(sum(rs.map((r) => r.latency.p50)) / rs.length),
    latencyP99: round(sum(rs.map((r) => r.latency.p99)) / rs.length),
    non2xx: sum(rs.map((r) => r.non2xx)),
    errors: sum(rs.map((r) => r.errors + r.timeouts)),
  });
  process.send!({ load: { bare: summary(runs.bare), gateway: summary(runs.gateway) } });
}

async function role(name: string, args: string[]): Promise<void> {
  if (name === 'load') return loadRole({ bare: Number(args[0]), gateway: Number(args[1]) }, Number(args[2]), args[3], args[4]);
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
