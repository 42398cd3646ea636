// Internal gRPC authentication: the constant-time secret check, and mutual TLS
// over real gRPC with a throwaway CA made by openssl.
import { after, before, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { grpcTls, type GrpcAuth } from './config.js';
import { DirectoryClient, DirectoryService } from './gen/directory.js';
import { call, callGone, CLIENT_OPTIONS, grpcClient, MAX_HEALTH_WATCHES_PER_PEER, peerAddress, secretMatches, startServer } from './grpc.js';
import { startDirectory, type RunningDirectory } from '../services/directory/server.js';
import { healthStatus, tempStoreUrl, TEST_AUTH, UNAUTHENTICATED } from '../tests/support/services.js';
import { makePki } from '../tests/support/tls.js';

test('secretMatches: only the exact string matches', () => {
  const secret = 'a'.repeat(64);
  assert.equal(secretMatches(secret, secret), true);
  assert.equal(secretMatches(secret, 'a'.repeat(63)), false);
  assert.equal(secretMatches(secret, `${secret}a`), false);
  assert.equal(secretMatches(secret, 'b'.repeat(64)), false);
  assert.equal(secretMatches(secret, ''), false);
  assert.equal(secretMatches(secret, undefined), false);
  assert.equal(secretMatches(secret, Buffer.from(secret)), false);
});

const dir = mkdtempSync(path.join(tmpdir(), 'grpc-tls-'));
const temp = tempStoreUrl('grpc-tls-store-');
let server: RunningDirectory;
let serverAuth: GrpcAuth;
const addr = () => `127.0.0.1:${server.port}`;

/** Certificates for 127.0.0.1 from a throwaway CA, as the GRPC_TLS_* variables name them. */
function makeGrpcPki(name: string): { GRPC_TLS_CERT: string; GRPC_TLS_KEY: string; GRPC_TLS_CA: string } {
  const pki = makePki(dir, name, 'IP:127.0.0.1,DNS:localhost');
  return { GRPC_TLS_CERT: pki.cert, GRPC_TLS_KEY: pki.key, GRPC_TLS_CA: pki.ca };
}

before(async () => {
  serverAuth = { ...TEST_AUTH, tls: grpcTls(makeGrpcPki('internal')) };
  server = await startDirectory({ storeUrl: temp.storeUrl, port: 0, auth: serverAuth });
});

after(async () => {
  await server.close();
  temp.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

const opts = { deadlineMs: 3000, retryAfter: 1 };
const HealthClient = grpc.makeGenericClientConstructor(healthService, 'grpc.health.v1.Health');
const getUser = { service: 'sync', email: 'nobody@example.com' };

test('mutual TLS: a client with a certificate from the CA and the secret is served', async () => {
  const client = grpcClient(DirectoryClient, addr(), serverAuth);
  try {
    await assert.rejects(call(client, client.getUser, getUser, opts), { name: 'RecordNotFound' });
  } finally {
    client.close();
  }
});

test('mutual TLS: without a client certificate, with one from another CA, or in plaintext, the call never reaches the service', async () => {
  const other = grpcTls(makeGrpcPki('other'))!;
  const ca = serverAuth.tls!.ca;
  const clients = {
    // By hand: grpcClient has no TLS-without-certificate form. A refused handshake is ServiceUnavailable, not UNAUTHENTICATED.
    'no client certificate': new DirectoryClient(addr(), grpc.credentials.createSsl(ca), CLIENT_OPTIONS),
    'certificate from another CA': grpcClient(DirectoryClient, addr(), { ...TEST_AUTH, tls: { ...other, ca } }),
    plaintext: grpcClient(DirectoryClient, addr(), TEST_AUTH),
  };
  try {
    for (const [name, client] of Object.entries(clients)) {
      await assert.rejects(call(client, client.getUser, getUser, opts), { name: 'ServiceUnavailable' }, name);
    }
  } finally {
    for (const c of Object.values(clients)) c.close();
  }
});

test('mutual TLS: a client with a certificate but without the secret is UNAUTHENTICATED; health needs the certificate only', async () => {
  const client = grpcClient(DirectoryClient, addr(), { tls: serverAuth.tls });
  try {
    await assert.rejects(call(client, client.getUser, getUser, opts), UNAUTHENTICATED);
  } finally {
    client.close();
  }
  // Health is open to any client the TLS layer lets in, plaintext ones are not.
  const health = grpcClient(HealthClient, addr(), { tls: serverAuth.tls }) as unknown as grpc.Client & {
    check(req: { service: string }, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: { status: string }) => void): void;
  };
  try {
    const status = await new Promise<string>((resolve, reject) =>
      health.check({ service: '' }, { deadline: Date.now() + 3000 }, (err, res) => (err ? reject(err) : resolve(res.status))),
    );
    assert.equal(status, 'SERVING');
  } finally {
    health.close();
  }
  await assert.rejects(healthStatus(server.port, ''));
});

test('peerAddress: the peer without its port', () => {
  assert.equal(peerAddress('127.0.0.1:5000'), '127.0.0.1');
  assert.equal(peerAddress('[::1]:5000'), '[::1]');
  assert.equal(peerAddress('unix:/tmp/s'), 'unix:/tmp/s');
});

test('health Watch streams need no secret, and one address may hold at most MAX_HEALTH_WATCHES_PER_PEER of them', async () => {
  const running = await startServer([], '127.0.0.1', 0, TEST_AUTH);
  const client = new HealthClient(`127.0.0.1:${running.port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  const streams: grpc.ClientReadableStream<unknown>[] = [];
  /** Opens a Watch: its first status, or the error that ended it. */
  const watch = () =>
    new Promise<{ status?: string; code?: number }>((resolve) => {
      const stream = client.watch({ service: '' }) as grpc.ClientReadableStream<{ status: string }>;
      streams.push(stream);
      stream.once('data', (m: { status: string }) => resolve({ status: m.status }));
      stream.once('error', (e: grpc.ServiceError) => resolve({ code: e.code }));
    });
  try {
    for (let i = 0; i < MAX_HEALTH_WATCHES_PER_PEER; i++) assert.deepEqual(await watch(), { status: 'SERVING' });
    assert.deepEqual(await watch(), { code: grpc.status.RESOURCE_EXHAUSTED });
    // Check calls are not counted.
    const check = await new Promise<{ status: string }>((resolve, reject) => client.check({ service: '' }, (e: Error | null, r: { status: string }) => (e ? reject(e) : resolve(r))));
    assert.equal(check.status, 'SERVING');
    // A closed watch frees its place.
    streams[0].cancel();
    let reopened = false;
    for (let i = 0; i < 50 && !reopened; i++) {
      reopened = (await watch()).status === 'SERVING';
      if (!reopened) await new Promise((res) => setTimeout(res, 20));
    }
    assert.ok(reopened, 'a cancelled watch frees its place');
  } finally {
    for (const s of streams) s.cancel();
    client.close();
    await running.close();
  }
});

test('clients spread calls round robin over every address of the target, and leave out one that goes away', async () => {
  const hits = [0, 0];
  const servers = await Promise.all(
    hits.map((_, i) =>
      startServer(
        [
          {
            definition: DirectoryService,
            name: 'tokenserver.directory.v1.Directory',
            implementation: {
              getUser: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => {
                hits[i]++;
                cb({ code: grpc.status.NOT_FOUND, details: 'no such user' });
              },
            },
          },
        ],
        '127.0.0.1',
        0,
        TEST_AUTH,
      ),
    ),
  );
  // Two addresses behind one target, as dns:/// gives for two replicas.
  const client = grpcClient(DirectoryClient, `ipv4:${servers.map((s) => `127.0.0.1:${s.port}`).join(',')}`, TEST_AUTH);
  try {
    for (let i = 0; i < 20; i++) await assert.rejects(call(client, client.getUser, getUser, opts), /NOT_FOUND: no such user/);
    assert.ok(hits[0] >= 5 && hits[1] >= 5, `both replicas served: ${hits}`);
    await servers[0].close();
    const before = hits[1];
    // The channel notices the closed replica; from then on every call reaches the other one.
    let settled = 0;
    for (let i = 0; i < 50 && settled < 10; i++) {
      try {
        await call(client, client.getUser, getUser, opts);
      } catch (err) {
        settled = /NOT_FOUND: no such user/.test((err as Error).message) ? settled + 1 : 0;
      }
    }
    assert.equal(settled, 10, 'ten calls in a row answered by the replica left');
    assert.ok(hits[1] - before >= 10);
  } finally {
    client.close();
    await servers[1].close();
  }
});

test('callGone: a cancelled call, or one whose deadline (Date or ms) has passed; no deadline is Infinity', () => {
  const now = 1_700_000_000_000;
  const at = (cancelled: boolean, deadline: grpc.Deadline) => callGone({ cancelled, getDeadline: () => deadline }, now);
  assert.equal(at(true, Infinity), true);
  assert.equal(at(false, Infinity), false);
  assert.equal(at(false, now + 1), false);
  assert.equal(at(false, now), true);
  assert.equal(at(false, new Date(now - 1)), true);
  assert.equal(at(false, new Date(now + 1000)), false);
});
