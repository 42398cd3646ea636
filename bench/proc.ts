// Processes for the benchmarks. Every server runs as its own process from its
// real entry point (services/*/index.ts, as built by bench/build.ts), so its RSS is its own and nothing
// else shares its event loop; every load generator runs in another process
// (bench/load.ts), never in a server's.
import { fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Env, GrpcAuth } from '../lib/config.js';
import { SERVICE_NODE_ARGS } from '../lib/node-flags.js';
import { builtEntry, ROOT } from './build.js';
import type { LoadResult, LoadSpec } from './load.js';
import { cpuSeconds } from './procfs.js';

export { cpuSeconds };

const TSX = import.meta.resolve('tsx');

export interface Service {
  name: string;
  child: ChildProcess;
  port: number;
  /**
   * Peak resident memory since start or the last resetPeak(), MB: of each of its
   * processes (login's cluster workers too), added up.
   */
  peakRssMb(): number;
  resetPeak(): void;
  /** CPU time (user + system) its processes used so far, workers that have exited included, seconds; 0 where /proc is missing. */
  cpuSeconds(): number;
  /** SIGTERM, then SIGKILL after a grace period; resolves once it has exited. */
  stop(): Promise<void>;
}

/** The median of a list (the upper one of the middle two for an even count). */
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Peak RSS of a process as the kernel tracks it (VmHWM), bytes; 0 where /proc is missing. */
export function vmHwm(pid: number): number {
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** `pid` and its descendants alive now (a cluster primary and its workers); just `pid` where /proc has no children lists. */
export function processTree(pid: number): number[] {
  const children = (p: number): number[] => {
    try {
      return readdirSync(`/proc/${p}/task`).flatMap((task) =>
        readFileSync(`/proc/${p}/task/${task}/children`, 'utf8').split(' ').filter((c) => c !== '').map(Number),
      );
    } catch {
      return [];
    }
  };
  return [pid, ...children(pid).flatMap(processTree)];
}

/** Resets the peak RSS (VmHWM) of a process and its descendants to their current RSS (Linux: 5 into clear_refs). */
export function clearPeaks(pid: number): void {
  for (const p of processTree(pid)) {
    try {
      writeFileSync(`/proc/${p}/clear_refs`, '5');
    } catch {
      // Without it the peak includes start-up, which only overstates it.
    }
  }
}

/** CPU time of a process and its descendants, the live ones and those reaped already, seconds. */
export function treeCpuSeconds(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + cpuSeconds(p, true), 0);
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

async function terminate(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited(child);
  clearTimeout(timer);
}

/** The internal gRPC secret of this benchmark run: every service started here gets it, every client sends it. */
export const BENCH_AUTH: GrpcAuth = { internalSecret: randomBytes(32).toString('hex') };

/**
 * Starts `entry` (a TypeScript file, path from the repository root, run as
 * built by bench/build.ts buildServices(), or through tsx with `fromSource`) with `env`
 * and waits for its JSON log line whose `msg` matches `readyMsg` and carries a
 * `port`. The rest of its output is drained unread (the per-request log lines
 * still cost the service what they cost in production).
 */
export async function startService(
  name: string,
  entry: string,
  env: Env,
  readyMsg: RegExp,
  opts: { nodeArgs?: string[]; startTimeoutMs?: number; fromSource?: boolean; buildDir?: string; wrap?: string[] } = {},
): Promise<Service> {
  const program = opts.fromSource ? ['--import', TSX, entry] : [builtEntry(entry, opts.buildDir)];
  // `wrap`: a command that runs node (valgrind for bench/instructions.ts) in the same process.
  const [command, ...args] = [...(opts.wrap ?? []), process.execPath, ...(opts.nodeArgs ?? []), ...program];
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', INTERNAL_SECRET: BENCH_AUTH.internalSecret, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d).slice(-4000)));
  const lines = createInterface({ input: child.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`${name} did not start within ${opts.startTimeoutMs ?? 30_000} ms`)), opts.startTimeoutMs ?? 30_000);
    const onExit = (code: number | null) => fail(new Error(`${name} exited with ${code} before it was ready: ${stderr.trim()}`));
    function fail(err: Error): void {
      clearTimeout(timer);
      lines.close();
      child.kill('SIGKILL');
      reject(err);
    }
    child.once('exit', onExit);
    lines.on('line', (line) => {
      let rec: { msg?: string; port?: number };
      try {
        rec = JSON.parse(line);
      } catch {
        return;
      }
      if (typeof rec.port === 'number' && rec.msg !== undefined && readyMsg.test(rec.msg)) {
        clearTimeout(timer);
        child.off('exit', onExit);
        lines.close();
        child.stdout!.resume();
        resolve(rec.port);
      }
    });
  });
  return serviceOf(name, child, port);
}

/** A Service for a server process already started and listening on `port` (its descendants counted with it). */
export function serviceOf(name: string, child: ChildProcess, port: number): Service {
  return {
    name,
    child,
    port,
    peakRssMb: () => processTree(child.pid!).reduce((sum, p) => sum + vmHwm(p), 0) / (1024 * 1024),
    resetPeak: () => clearPeaks(child.pid!),
    cpuSeconds: () => treeCpuSeconds(child.pid!),
    stop: () => terminate(child),
  };
}

/** The node flags production starts these services with (lib/node-flags.ts). */
export const PRODUCTION_NODE_ARGS = SERVICE_NODE_ARGS;

export const startDirectory = (storeUrl: string, extra: Env = {}, buildDir?: string): Promise<Service> =>
  startService('directory', 'services/directory/index.ts', { STORE_URL: storeUrl, DIRECTORY_PORT: '0', ...extra }, /directory listening/, {
    buildDir,
    nodeArgs: [...PRODUCTION_NODE_ARGS.directory],
  });

export const startNodeAssign = (storeUrl: string, extra: Env = {}, buildDir?: string): Promise<Service> =>
  startService('nodeassign', 'services/nodeassign/index.ts', { STORE_URL: storeUrl, NODEASSIGN_PORT: '0', ...extra }, /nodeassign listening/, { buildDir });

/**
 * `opts.nodeArgs` come after the production flags, so they can override them.
 * One process unless `env` sets LOGIN_WORKERS: the figures per process stay
 * comparable from one machine to another (bench/workers.ts compares 1 and 2).
 */
export const startLoginService = (env: Env, opts: { nodeArgs?: string[]; buildDir?: string; wrap?: string[]; startTimeoutMs?: number } = {}): Promise<Service> =>
  startService('login', 'services/login/index.ts', { LOGIN_PORT: '0', LOGIN_WORKERS: '1', ...env }, /login listening/, {
    ...opts,
    nodeArgs: [...PRODUCTION_NODE_ARGS.login, ...(opts.nodeArgs ?? [])],
  });

/** The bare Koa hello-world the login service is compared with. */
export const startBareKoa = (): Promise<Service> => startService('bare koa', 'bench/bare-koa.ts', {}, /listening/);

/** Runs one load in its own process (bench/load.ts) and returns what it measured. */
export function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const child = fork(fileURLToPath(new URL('./load.ts', import.meta.url)), [], {
    // Only the TypeScript loader: not the parent's flags (a test runner's --test, say).
    execArgv: ['--import', TSX],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise<LoadResult>((resolve, reject) => {
    let result: LoadResult | undefined;
    child.once('message', (m) => (result = m as LoadResult));
    child.once('exit', (code) => (result ? resolve(result) : reject(new Error(`load generator exited with ${code}`))));
    child.send(spec);
  });
}

/** wrk (bench/load.ts mode 'wrk') when it is on PATH; otherwise why not. */
export function wrkAvailable(): { ok: true } | { skip: string } {
  const probe = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  // wrk --version prints its banner and exits 1.
  return probe.error ? { skip: 'wrk is not installed (apt-get install wrk): autocannon generates the load, at 2–4 × the CPU per request' } : { ok: true };
}

/** Stops every service given, in parallel, ignoring those that are gone. */
export async function stopAll(services: Array<Service | undefined>): Promise<void> {
  await Promise.all(services.map((s) => s?.stop().catch(() => undefined)));
}
