// One part of the embedded stack in a process of its own, so that `npm start`
// uses every core as the split deployment does, from JavaScript built at
// start. The parent (scripts/start.ts through startPartProcess) sends what to
// start over the IPC channel and gets back where it listens; it alone stops
// the parts ('stop' message), so a Ctrl-C or a SIGTERM to the whole process
// group stops them in order. Logs go to the parent's stdout and stderr, as
// they did with one process. With LOGIN_WORKERS above 1 (`npm start` runs one
// unless it is set), login's part is the cluster primary of that many
// workers, each of them this script too.
import { fork, spawnSync, type ChildProcess } from 'node:child_process';
import cluster from 'node:cluster';
import { readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runWorker, startWorkerSet } from '../lib/cluster.js';
import { DEFAULTS, loginWorkers, metricsListener, port, str, type Env } from '../lib/config.js';
import { ConfigError } from '../lib/errors.js';
import { listen } from '../lib/listen.js';
import { logger } from '../lib/log.js';
import { SERVICE_NODE_ARGS } from '../lib/node-flags.js';
import { metricsUrl, startPart, type PartInfo, type PartLinks, type PartName, type RunningPart } from './stack.js';

const SELF = fileURLToPath(import.meta.url);
const ROOT = path.resolve(path.dirname(SELF), '..');
/** What a part needs, transpiled (bench/build.ts): the parts run as production runs the services. */
const PART_SOURCES = ['lib', 'services', 'scripts/stack.ts', 'scripts/stack-part.ts'];

/** How to run a part: the script (this file, or its built copy) and node's flags. */
export interface PartProgram {
  script: string;
  execArgv: readonly string[];
}

/**
 * Transpiles the parts into dist/start/<pid>/ (beside node_modules), removed
 * when this process exits, and returns how to run them with plain node: no
 * TypeScript loader in each part (a thread and ~40 MB of its own). The build
 * runs in a short-lived process, so the compiler never weighs on this one.
 */
export function buildParts(): PartProgram {
  const base = path.join(ROOT, 'dist', 'start');
  // Folders of runs that ended without cleaning up (killed).
  for (const name of safeReaddir(base)) if (!alive(Number(name))) rmSync(path.join(base, name), { recursive: true, force: true });
  const dir = path.join(base, String(process.pid));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const build = `import(${JSON.stringify(path.join(ROOT, 'bench/build.ts'))}).then((m) => m.buildServices(${JSON.stringify(dir)}, {}, ${JSON.stringify(PART_SOURCES)}))`;
  const r = spawnSync(process.execPath, [...process.execArgv, '--input-type=module', '-e', build], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`building the services failed: ${r.stderr.trim()}`);
  return { script: path.join(dir, 'scripts', 'stack-part.js'), execArgv: [] };
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

type ToPart = { start: { name: PartName; env: Env; links: PartLinks } } | 'stop';
type FromPart = { ready: PartInfo } | { failed: { message: string; variable?: string } } | 'stopped';

/**
 * Starts `name` in a child process: `program` (default: this file with the
 * parent's node flags, the TypeScript loader among them), plus the service's
 * own flags, as production runs it. `onExit` hears of a part that exits on its own.
 */
export function startPartProcess(onExit: (name: PartName, code: number | null) => void, program: PartProgram = { script: SELF, execArgv: process.execArgv }) {
  return (name: PartName, env: Env, links: PartLinks): Promise<RunningPart> =>
    new Promise((resolve, reject) => {
      const flags: readonly string[] = name === 'login' || name === 'directory' ? SERVICE_NODE_ARGS[name] : [];
      const child = fork(program.script, [], { env: { ...process.env, ...env }, execArgv: [...program.execArgv, ...flags], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      let stopping = false;
      const exited = new Promise<void>((done) => child.once('exit', () => done()));
      child.once('exit', (code) => {
        if (!stopping) onExit(name, code);
      });
      child.on('message', (m: FromPart) => {
        if (m === 'stopped') return;
        if ('failed' in m) {
          stopping = true;
          const { message, variable } = m.failed;
          reject(variable !== undefined ? new ConfigError(variable, message.slice(variable.length + 2)) : new Error(`${name}: ${message}`));
        } else resolve({ info: m.ready, close: () => stop(child, exited, () => (stopping = true)) });
      });
      child.once('exit', (code) => reject(new Error(`${name} exited (${code}) before it was ready`)));
      send(child, { start: { name, env, links } });
    });
}

/** Asks a part to stop and waits for its exit; a part that does not within 10 s is killed. */
async function stop(child: ChildProcess, exited: Promise<void>, mark: () => void): Promise<void> {
  mark();
  if (child.exitCode !== null || child.signalCode !== null) return;
  send(child, 'stop');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

function send(child: ChildProcess, m: ToPart): void {
  if (child.connected) child.send(m);
}

// ---- the child side ----

/** `npm start`'s login: one process unless LOGIN_WORKERS says more. */
function stackLoginWorkers(env: Env): number {
  return loginWorkers(env, 1);
}

/** A port free now on `host` (for login's workers, which must all make the same audience of it). */
async function freePort(host: string): Promise<number> {
  const probe = createServer();
  const free = await listen(probe, 0, host);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return free;
}

/**
 * Login as the primary of LOGIN_WORKERS workers (lib/cluster.ts). The
 * audience is made of the port: with LOGIN_PORT=0 and no AUDIENCES, a port is
 * chosen here, so that every worker makes the same one.
 */
async function startLoginWorkers(env: Env, links: PartLinks): Promise<RunningPart> {
  const count = stackLoginWorkers(env);
  let loginPort = port(env, 'LOGIN_PORT', DEFAULTS.LOGIN_PORT);
  if (loginPort === 0 && !env.AUDIENCES?.trim()) loginPort = await freePort(str(env, 'BIND_HOST', DEFAULTS.BIND_HOST));
  const metrics = metricsListener(env, 'LOGIN_METRICS_PORT');
  const set = await startWorkerSet({
    name: 'login',
    count,
    metrics,
    // The primary serves /metrics; each worker finds the backends in its environment.
    env: { LOGIN_PORT: String(loginPort), LOGIN_METRICS_PORT: '', DIRECTORY_ADDR: links.directoryAddr, NODEASSIGN_ADDR: links.nodeAssignAddr },
  });
  logger('login').info({ port: set.port, workers: count, metricsPort: set.metricsPort }, 'login listening');
  return { info: { ...(set.info as PartInfo), metricsUrl: metricsUrl(set.metricsPort, metrics) }, close: set.close };
}

function runLoginWorker(): void {
  process.title = 'tokenserver login worker';
  runWorker('login', async (waitForTurn) => {
    const links = { directoryAddr: process.env.DIRECTORY_ADDR, nodeAssignAddr: process.env.NODEASSIGN_ADDR };
    const part = await startPart('login', process.env, links, { worker: { waitForTurn } });
    return { port: part.info.port, info: part.info, metrics: part.metrics!, close: part.close };
  });
}

function runPart(): void {
  if (cluster.isWorker) return runLoginWorker();
  let running: RunningPart | undefined;
  let stopping = false;
  const stopPart = (): void => {
    if (stopping) return;
    stopping = true;
    void (running?.close() ?? Promise.resolve()).finally(() => process.exit(0));
  };
  // The parent stops the parts in order; a signal to the whole group (Ctrl-C) is its to handle.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => undefined);
  // A parent gone without a word (killed) takes its parts with it.
  process.on('disconnect', stopPart);
  process.on('message', (m: ToPart) => {
    if (m === 'stop') return stopPart();
    // `ps` (and the benchmark) tell the parts apart by it.
    process.title = `tokenserver ${m.start.name}`;
    const { name, env, links } = m.start;
    // Inside the promise: a bad LOGIN_WORKERS is a failed start like any other configuration error.
    Promise.resolve().then(() => (name === 'login' && stackLoginWorkers(env) > 1 ? startLoginWorkers(env, links) : startPart(name, env, links))).then(
      (part) => {
        running = part;
        process.send!({ ready: part.info } satisfies FromPart);
      },
      (err: Error) => {
        process.send!({ failed: { message: err.message, variable: err instanceof ConfigError ? err.variable : undefined } } satisfies FromPart, () => process.exit(1));
      },
    );
  });
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === SELF) runPart();
