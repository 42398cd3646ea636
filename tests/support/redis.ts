// A throwaway redis-server on a free loopback port, for the tests of the shared
// nonce store: Debian's redis-server (`.ci/run` installs it), or the binary
// REDIS_SERVER names. No automatic persistence (SAVE still writes a snapshot),
// its own temp folder; it can be stopped, killed, paused (SIGSTOP: a Redis too
// slow to answer) and started again on its port, from its last snapshot if any.
// Stopped when the test process exits; one whose test process was killed
// outright is stopped, and its folder removed, by the next test process that
// starts a child (tests/support/children.ts).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './services.js';
import { stopOnExit } from './children.js';

const START_WAIT_MS = 10_000;

export interface TestRedis {
  url: string;
  port: number;
  /** Starts it again on the same port and folder (after stop or kill): from the last SAVE's snapshot, else empty. */
  start(): Promise<void>;
  /** Stops it (SIGTERM) and waits for the process to end. */
  stop(): Promise<void>;
  /** SIGKILL, as a crash: nothing is written on the way out (paused, it is not resumed first). */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT: connections stay open, nothing is answered meanwhile. */
  pause(): void;
  resume(): void;
  /** One command on a connection of its own (redis-cli's way of writing it); the reply as ioredis reads it. */
  command(...args: string[]): Promise<unknown>;
  /** Stops it for good and removes its folder. */
  dispose(): Promise<void>;
}

/** The redis-server binary (REDIS_SERVER when set, else the one on PATH), or undefined. */
export function redisServerBinary(): string | undefined {
  const named = process.env.REDIS_SERVER?.trim();
  if (named) return existsSync(named) ? named : undefined;
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim();
  return found || undefined;
}

/** Why the Redis tests cannot run here, or undefined when they can. */
export function redisSkipReason(): string | undefined {
  if (redisServerBinary()) return undefined;
  const named = process.env.REDIS_SERVER?.trim();
  return named ? `REDIS_SERVER names ${named}, which does not exist` : 'redis-server is not installed (apt-get install redis-server; .ci/run installs it)';
}

/** Whether something answers PING with PONG on the port. */
function answersPing(port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    socket.setTimeout(timeoutMs, () => socket.destroy());
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d: Buffer) => {
      reply += d.toString();
      if (reply.includes('\r\n')) socket.end();
    });
    socket.on('close', () => resolve(reply.startsWith('+PONG')));
    socket.on('error', () => {});
  });
}

async function command(port: number, args: string[]): Promise<unknown> {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, commandTimeout: 2000 });
  try {
    await client.connect();
    return await client.call(args[0], ...args.slice(1));
  } finally {
    client.disconnect();
  }
}

const DIR_PREFIX = 'test-redis-';

/** Starts a redis-server; `args` are extra config directives (`['--maxmemory-policy', 'allkeys-lru']`). */
export async function startRedis(args: string[] = []): Promise<TestRedis> {
  const binary = redisServerBinary();
  if (!binary) throw new Error(redisSkipReason());
  const dir = mkdtempSync(path.join(tmpdir(), DIR_PREFIX));
  const port = await freePort();
  let child: ChildProcess | undefined;
  let output = '';

  async function start(): Promise<void> {
    output = '';
    const proc = spawn(binary!, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--loglevel', 'warning', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    stopOnExit(proc, { dir });
    proc.stdout!.on('data', (d: Buffer) => (output += d));
    proc.stderr!.on('data', (d: Buffer) => (output += d));
    const deadline = Date.now() + START_WAIT_MS;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode}: ${output.slice(-500)}`);
      if (await answersPing(port, 500)) return;
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port} within ${START_WAIT_MS / 1000} s: ${output.slice(-500)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async function stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    // A paused process is resumed to handle SIGTERM; SIGKILL ends it as it is, with what it had not read unread.
    if (signal !== 'SIGKILL') proc.kill('SIGCONT');
    proc.kill(signal);
    await exited;
  }

  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    start,
    stop: () => stop(),
    kill: () => stop('SIGKILL'),
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    command: (...a: string[]) => command(port, a),
    dispose: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
