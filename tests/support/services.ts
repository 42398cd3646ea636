// Test helpers shared by the directory and nodeassign service tests: a temp
// SQLite store URL, the internal secret, and a grpc.health.v1 Check over a real channel.
import * as grpc from '@grpc/grpc-js';
import assert from 'node:assert/strict';
import { service as healthService } from 'grpc-health-check';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { GrpcAuth } from '../../lib/config.js';
import { grpcClient, type ClientAuth } from '../../lib/grpc.js';
import { stopOnExit } from './children.js';

/** A fresh random secret, long enough for MASTER_SECRETS and INTERNAL_SECRET: tests never ship a fixed one. */
export function newSecret(): string {
  return randomBytes(32).toString('hex');
}

/** A loopback port nothing listens on right now (for a server that must come back on the same port). */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', resolve);
  });
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/**
 * A TCP server on a loopback port of its own (the relays tests put between a client and a
 * service): each connection goes to `onConnection`, and close() destroys every socket given to
 * `track` that is still open, then stops listening.
 */
export async function serveTcp(
  onConnection: (client: net.Socket, track: (socket: net.Socket) => void) => void,
): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  };
  const server = net.createServer((client) => onConnection(client, track));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * Sends `bytes` (latin1, so any byte can be written) over one new connection to a loopback port and
 * reads the answer until the connection closes, or until `waitMs` have passed (to see a connection
 * kept open). `end` half-closes the connection once the bytes are sent.
 */
export function rawExchange(port: number, bytes: string, o: { end?: boolean; waitMs?: number } = {}): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => (o.end ? socket.end(bytes, 'latin1') : socket.write(bytes, 'latin1')));
    const chunks: Buffer[] = [];
    const done = (closed: boolean) => {
      clearTimeout(timer);
      resolve({ text: Buffer.concat(chunks).toString('latin1'), closed });
    };
    const timer = o.waitMs === undefined ? undefined : setTimeout(() => {
      socket.destroy();
      done(false);
    }, o.waitMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', () => done(true));
    socket.on('error', reject);
  });
}

/** The internal gRPC secret of this test process: servers require it, clients send it. */
export const TEST_AUTH: GrpcAuth = { internalSecret: newSecret() };

/** Clients that must be refused: no secret, a wrong one of the same length, a short one. */
export const WRONG_AUTHS: Array<{ name: string; auth: ClientAuth }> = [
  { name: 'no secret', auth: {} },
  { name: 'a wrong secret', auth: { internalSecret: newSecret() } },
  { name: 'a prefix of the secret', auth: { internalSecret: TEST_AUTH.internalSecret.slice(0, 8) } },
];

/** What call() rejects with when the server refuses the caller's internal secret. */
export const UNAUTHENTICATED = /backend error UNAUTHENTICATED: missing or wrong internal secret/;

/** A SQLite STORE_URL in a new temp folder, and a function that removes the folder. */
export function tempStoreUrl(prefix: string): { storeUrl: string; cleanup(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { storeUrl: `sqlite:${path.join(dir, 'data', 'tokenserver.db')}`, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const HealthClient = grpc.makeClientConstructor(healthService as unknown as grpc.ServiceDefinition, 'grpc.health.v1.Health');

type HealthCheckClient = grpc.Client & {
  check(req: { service: string }, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: { status: string }) => void): void;
};

/** The serving status grpc.health.v1 Check reports for `service` ('' is the whole server); health needs no secret. */
export function healthStatus(port: number, service: string): Promise<string> {
  const client = grpcClient(HealthClient, `127.0.0.1:${port}`, {}) as unknown as HealthCheckClient;
  return new Promise<string>((resolve, reject) => {
    client.check({ service }, { deadline: Date.now() + 5000 }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res.status);
    });
  });
}

export interface EntryPointRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a service entry point as its own process with `env`; once `readyLine`
 * appears in its output it is sent SIGTERM. Resolves when it exits.
 */
export function runEntryPoint(file: string, env: Record<string, string>, readyLine: RegExp): Promise<EntryPointRun> {
  const child = spawn(process.execPath, ['--import', 'tsx', file], {
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  stopOnExit(child);
  let stdout = '';
  let stderr = '';
  let signalled = false;
  child.stdout.on('data', (d: Buffer) => {
    stdout += d;
    // Once only: a second signal would force an immediate exit.
    if (!signalled && readyLine.test(stdout)) {
      signalled = true;
      child.kill('SIGTERM');
    }
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  return new Promise((resolve) => {
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Asserts that the entry point, given `env` and no INTERNAL_SECRET or a 31-byte one, exits 1 naming the variable. */
export async function refusesBadInternalSecret(file: string, env: Record<string, string>): Promise<void> {
  for (const [secret, message] of [[undefined, 'is required'], ['x'.repeat(31), 'must be at least 32 bytes']] as const) {
    const run = await runEntryPoint(file, secret ? { ...env, INTERNAL_SECRET: secret } : env, /listening/);
    assert.equal(run.code, 1, run.stdout);
    assert.ok(run.stderr.startsWith(`configuration error: INTERNAL_SECRET: ${message}`), run.stderr);
  }
}

/** An application node for gateway tests: 200 `{"ok":true}` to every request, counting those that reach it. */
export class CountingUpstream {
  reached = 0;
  private readonly server = http.createServer((req, res) => {
    this.reached++;
    req.resume();
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{"ok":true}');
  });

  /** Listens on a loopback port (once, however often called); its URL. */
  async start(): Promise<string> {
    if (!this.server.listening) await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

/** Polls `check` every `pollMs` until it holds; fails naming `what` once `timeoutMs` have passed. */
export async function eventually(what: string, check: () => boolean | Promise<boolean>, o: { timeoutMs?: number; pollMs?: number } = {}): Promise<void> {
  const timeoutMs = o.timeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, o.pollMs ?? 100));
  }
}
