// One part of the embedded stack in a process of its own, so that `npm start`
// uses every core as the split deployment does. The parent (scripts/start.ts
// through startPartProcess) sends what to start over the IPC channel and gets
// back where it listens; it alone stops the parts ('stop' message), so a
// Ctrl-C or a SIGTERM to the whole process group stops them in order. Logs go
// to the parent's stdout and stderr, as they did with one process.
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Env } from '../lib/config.js';
import { ConfigError } from '../lib/errors.js';
import { SERVICE_NODE_ARGS } from '../lib/node-flags.js';
import { startPart, type PartInfo, type PartLinks, type PartName, type RunningPart } from './stack.js';

const SELF = fileURLToPath(import.meta.url);

type ToPart = { start: { name: PartName; env: Env; links: PartLinks } } | 'stop';
type FromPart = { ready: PartInfo } | { failed: { message: string; variable?: string } } | 'stopped';

/**
 * Starts `name` in a child process (this file, with the parent's node flags,
 * the TypeScript loader among them, and the service's own, as production runs
 * it). `onExit` hears of a part that exits on its own.
 */
export function startPartProcess(onExit: (name: PartName, code: number | null) => void) {
  return (name: PartName, env: Env, links: PartLinks): Promise<RunningPart> =>
    new Promise((resolve, reject) => {
      const flags: readonly string[] = name === 'login' || name === 'directory' ? SERVICE_NODE_ARGS[name] : [];
      const child = fork(SELF, [], { env: { ...process.env, ...env }, execArgv: [...process.execArgv, ...flags], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
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

function runPart(): void {
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
    startPart(m.start.name, m.start.env, m.start.links).then(
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
