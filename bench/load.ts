// A load generator in its own process (forked by bench/proc.ts runLoad): it
// receives one LoadSpec over IPC, runs it and sends back one LoadResult.
//  - 'autocannon': throughput (closed loop) or a fixed overall rate, with
//    autocannon's coordinated-omission correction; latencies in whole ms.
//    Its rate limit sends each connection's share of a second back to back and
//    then waits for the next second: bursts at full speed, not an even rate.
//  - 'paced': an even rate (request k is due at k / rate s) over keep-alive
//    connections, each latency counted from when the request was due, so a
//    slow server cannot hide its queue (no coordinated omission). Its requests
//    are bytes made before the clock starts, over plain sockets.
//  - 'wrk': throughput like 'autocannon', from wrk (a C load generator, when on
//    PATH) with bench/wrk-fresh.lua: a third to a quarter of autocannon's CPU
//    per request, which the servers measured beside it no longer lose. Answers
//    other than 2xx/3xx are counted together (wrk's status errors), not by status.
//  - 'probe': a fixed number of requests from a few keep-alive loops, timed
//    with performance.now(), for latency comparisons finer than a millisecond.
import http from 'node:http';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { cpuSeconds } from './procfs.js';

export interface RequestSpec {
  method?: string;
  path: string;
  headers?: Record<string, string>;
}

export interface LoadSpec {
  mode: 'autocannon' | 'wrk' | 'paced' | 'probe';
  /** Base URL of the server, e.g. http://127.0.0.1:8000 */
  url: string;
  /** Requests cycled in order, given inline or as a JSON file (large sets of assertions). */
  requests?: RequestSpec[];
  requestsFile?: string;
  /** autocannon and wrk: connections, seconds; autocannon: an optional overall rate (req/s). */
  connections?: number;
  durationSeconds?: number;
  overallRate?: number;
  /** paced: requests per second, for durationSeconds, at most maxInFlight at once (default 256), over `connections` opened first (default 32) and more when needed. */
  rate?: number;
  maxInFlight?: number;
  /** probe: how many requests, over how many concurrent loops. */
  count?: number;
  concurrency?: number;
}

export interface LoadResult {
  requestsPerSecond: number;
  /** ms */
  latencyP50: number;
  latencyP99: number;
  latencyMean: number;
  total: number;
  non2xx: number;
  errors: number;
  statuses: Record<string, number>;
  /** CPU time the load generator itself used, seconds (is it the bottleneck?). */
  cpuSeconds: number;
  /** Requests sent after the list ran out, so that its items went out again (a pool of fresh assertions was too small). */
  reused: number;
}

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number; mean: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodeStats?: Record<string, { count: number }>;
}
// autocannon ships no types; this is the part of its API we use.
type Autocannon = (opts: Record<string, unknown>) => Promise<AutocannonResult>;

function requestsOf(spec: LoadSpec): RequestSpec[] {
  const list = spec.requestsFile ? (JSON.parse(readFileSync(spec.requestsFile, 'utf8')) as RequestSpec[]) : spec.requests;
  if (!list || list.length === 0) throw new Error('a load needs at least one request');
  return list;
}

async function runAutocannon(spec: LoadSpec): Promise<LoadResult> {
  const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;
  const list = requestsOf(spec);
  let next = 0;
  const result = await autocannon({
    url: spec.url,
    connections: spec.connections ?? 32,
    duration: spec.durationSeconds ?? 5,
    ...(spec.overallRate ? { overallRate: Math.max(1, Math.round(spec.overallRate)) } : {}),
    requests: [
      {
        // Each request takes the next item of the list, whichever connection sends it.
        setupRequest: (req: Record<string, unknown>) => {
          const r = list[next++ % list.length];
          return { ...req, method: r.method ?? 'GET', path: r.path, headers: { ...(req.headers as object), ...r.headers } };
        },
      },
    ],
  });
  const statuses: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats ?? {})) statuses[code] = count;
  return {
    requestsPerSecond: result.requests.average,
    latencyP50: result.latency.p50,
    latencyP99: result.latency.p99,
    latencyMean: result.latency.mean,
    total: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    statuses,
    cpuSeconds: 0,
    reused: Math.max(0, next - list.length),
  };
}

interface WrkSummary {
  requests: number;
  durationUs: number;
  connect: number;
  read: number;
  write: number;
  status: number;
  timeout: number;
  p50Us: number;
  p99Us: number;
  meanUs: number;
}

const cpuUsageSeconds = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;

async function runWrk(spec: LoadSpec): Promise<LoadResult> {
  const list = requestsOf(spec);
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-wrk-'));
  try {
    const file = path.join(dir, 'requests.tsv');
    const fields = (r: RequestSpec) => [r.method ?? 'GET', r.path, ...Object.entries(r.headers ?? {}).flat()];
    if (list.some((r) => fields(r).some((f) => /[\t\r\n]/.test(f)))) throw new Error('wrk: a request holds a tab or a line break');
    writeFileSync(file, list.map((r) => fields(r).join('\t')).join('\n') + '\n');
    // Over wrk's run only (this process and wrk once reaped): reading the list above is not load.
    const before = cpuSeconds(process.pid, true);
    const script = new URL('./wrk-fresh.lua', import.meta.url).pathname;
    // One thread: it keeps up with these servers many times over, and a second would take CPU from them.
    // wrk takes whole seconds.
    const child = spawn('wrk', ['-t1', `-c${spec.connections ?? 32}`, `-d${Math.max(1, Math.round(spec.durationSeconds ?? 5))}s`, '-s', script, spec.url], {
      env: { ...process.env, WRK_REQUESTS: file },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    const json = /^WRK_RESULT (.*)$/m.exec(out)?.[1];
    if (code !== 0 || json === undefined) throw new Error(`wrk exited with ${code}: ${out.trim()}`);
    const w = JSON.parse(json) as WrkSummary;
    const ok = w.requests - w.status;
    return {
      requestsPerSecond: w.requests / (w.durationUs / 1e6),
      latencyP50: w.p50Us / 1000,
      latencyP99: w.p99Us / 1000,
      latencyMean: w.meanUs / 1000,
      total: w.requests,
      non2xx: w.status,
      errors: w.connect + w.read + w.write + w.timeout,
      statuses: { '200': ok, ...(w.status > 0 ? { 'not 2xx': w.status } : {}) },
      cpuSeconds: cpuSeconds(process.pid, true) - before,
      reused: Math.max(0, w.requests - list.length),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function sendOne(agent: http.Agent, base: URL, r: RequestSpec): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ agent, host: base.hostname, port: base.port, method: r.method ?? 'GET', path: r.path, headers: r.headers }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end();
  });
}

/** Collects latencies and statuses; summary() gives the LoadResult. */
function recorder() {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  return {
    ok(ms: number, status: number) {
      latencies.push(ms);
      statuses[status] = (statuses[status] ?? 0) + 1;
    },
    error() {
      errors++;
    },
    summary(seconds: number, reused: number): LoadResult {
      latencies.sort((a, b) => a - b);
      return {
        requestsPerSecond: latencies.length / seconds,
        latencyP50: percentile(latencies, 50),
        latencyP99: percentile(latencies, 99),
        latencyMean: latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length),
        total: latencies.length,
        non2xx: latencies.length - (statuses['200'] ?? 0),
        errors,
        statuses,
        cpuSeconds: 0,
        reused,
      };
    },
  };
}

async function runProbe(spec: LoadSpec): Promise<LoadResult> {
  const list = requestsOf(spec);
  const base = new URL(spec.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: spec.concurrency ?? 4 });
  const count = spec.count ?? 1000;
  const rec = recorder();
  let next = 0;
  const started = performance.now();
  const loop = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) {
      const t0 = performance.now();
      try {
        const status = await sendOne(agent, base, list[i % list.length]);
        rec.ok(performance.now() - t0, status);
      } catch {
        rec.error();
      }
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency ?? 4 }, loop));
  agent.destroy();
  return rec.summary((performance.now() - started) / 1000, Math.max(0, count - list.length));
}

/** A request's bytes, made before the clock starts (GET and the like: no body). */
function requestBytes(base: URL, r: RequestSpec): Buffer {
  const method = r.method ?? 'GET';
  if (method === 'HEAD') throw new Error('paced: HEAD is not supported (its answer has no body to wait for)');
  const lines = [`${method} ${r.path} HTTP/1.1`, `Host: ${base.host}`, ...Object.entries(r.headers ?? {}).map(([k, v]) => `${k}: ${v}`)];
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
}

const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)/i;
const CONNECTION_CLOSE = /\r\nconnection:[ \t]*close/i;

/**
 * One keep-alive connection of the paced generator: a request at a time,
 * answers read by their Content-Length (chunked answers are refused as
 * errors). Much cheaper than node:http's client, whose CPU the servers
 * measured beside it would otherwise lose.
 */
class PacedConnection {
  private readonly socket: net.Socket;
  private pending: Buffer | null = null;
  private waiting: ((status: number | Error) => void) | null = null;
  closed = false;

  /** Resolves once connected (or failed: the first request on it then fails). */
  readonly connected: Promise<void>;

  constructor(base: URL) {
    this.socket = net.connect({ host: base.hostname, port: Number(base.port), noDelay: true });
    this.connected = new Promise((resolve) => {
      this.socket.once('connect', resolve);
      this.socket.once('close', resolve);
    });
    this.socket.on('data', (chunk: Buffer) => this.read(chunk));
    const fail = (err: Error) => {
      this.closed = true;
      this.finish(err);
    };
    this.socket.on('error', fail);
    this.socket.on('close', () => fail(new Error('connection closed')));
  }

  send(bytes: Buffer): Promise<number> {
    return new Promise((resolve, reject) => {
      this.waiting = (status) => (typeof status === 'number' ? resolve(status) : reject(status));
      this.socket.write(bytes);
    });
  }

  private read(chunk: Buffer): void {
    const buf = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) {
      this.pending = buf;
      return;
    }
    const head = buf.toString('latin1', 0, end);
    const length = CONTENT_LENGTH.exec(head);
    if (!length) {
      this.closed = true;
      this.socket.destroy();
      this.finish(new Error('an answer without Content-Length'));
      return;
    }
    if (buf.length < end + 4 + Number(length[1])) {
      this.pending = buf;
      return;
    }
    this.pending = null;
    if (CONNECTION_CLOSE.test(head)) {
      this.closed = true;
      this.socket.destroy();
    }
    this.finish(Number(head.slice(9, 12)));
  }

  private finish(status: number | Error): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.(status);
  }

  destroy(): void {
    this.closed = true;
    this.socket.destroy();
  }
}

async function runPaced(spec: LoadSpec): Promise<LoadResult> {
  const list = requestsOf(spec);
  const base = new URL(spec.url);
  const rate = spec.rate ?? 100;
  const maxInFlight = spec.maxInFlight ?? 256;
  const total = Math.round(rate * (spec.durationSeconds ?? 5));
  const bytes = Array.from({ length: total }, (_, i) => requestBytes(base, list[i % list.length]));
  // Connections opened before the clock starts, as many as the closed-loop windows use: with none
  // open, the first requests would each open one and measure connection set-up.
  const all = Array.from({ length: Math.min(maxInFlight, spec.connections ?? 32) }, () => new PacedConnection(base));
  await Promise.all(all.map((c) => c.connected));
  // Accepted by the server's process too (a cluster primary hands each to a worker).
  await new Promise((r) => setTimeout(r, 200));
  const idle = all.filter((c) => !c.closed);
  const rec = recorder();
  const started = performance.now();
  let sent = 0;
  let inFlight = 0;
  await new Promise<void>((resolve) => {
    const send = (k: number): void => {
      const due = started + (k * 1000) / rate;
      let c = idle.pop();
      // One the server closed while it was idle is left behind.
      while (c?.closed) c = idle.pop();
      if (c === undefined) all.push((c = new PacedConnection(base)));
      const conn = c;
      inFlight++;
      conn.send(bytes[k]).then(
        (status) => {
          rec.ok(performance.now() - due, status);
          if (!conn.closed) idle.push(conn);
        },
        () => rec.error(),
      ).finally(() => {
        inFlight--;
        if (sent === total && inFlight === 0) resolve();
      });
    };
    const tick = (): void => {
      const now = performance.now();
      // Everything due by now goes out; a request held back by maxInFlight still counts from when it was due.
      while (sent < total && started + (sent * 1000) / rate <= now && inFlight < maxInFlight) send(sent++);
      if (sent < total) setTimeout(tick, 1);
    };
    tick();
  });
  for (const c of all) c.destroy();
  return rec.summary((performance.now() - started) / 1000, Math.max(0, total - list.length));
}

process.once('message', (spec: LoadSpec) => {
  const cpu = process.cpuUsage();
  const run = { probe: runProbe, paced: runPaced, wrk: runWrk, autocannon: runAutocannon }[spec.mode];
  run(spec).then(
    (result) => {
      // wrk's mode counts its own window (wrk and this process while it runs); the others this whole process.
      const cpuSeconds = spec.mode === 'wrk' ? result.cpuSeconds : cpuUsageSeconds(process.cpuUsage(cpu));
      process.send!({ ...result, cpuSeconds }, () => process.exit(0));
    },
    (err) => {
      console.error(`load generator failed: ${(err as Error).stack ?? err}`);
      process.exit(1);
    },
  );
});
