// Internal gRPC authentication: the constant-time secret check, and mutual TLS
// over real gRPC with a throwaway CA made by openssl. Health Watch caps, round
// robin over replicas, and how errors travel between the services.
import { after, before, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { grpcTls, type GrpcAuth } from './config.js';
import { DirectoryClient, DirectoryService, UserReply, type LoginStreamReply, type LoginStreamRequest } from './gen/directory.js';
import {
  answeringStream,
  call,
  callGone,
  CLIENT_OPTIONS,
  fromServiceError,
  grpcClient,
  INTERNAL_SECRET_HEADER,
  logged,
  MAX_HEALTH_WATCHES_PER_PEER,
  OpenStreams,
  peerAddress,
  rebuiltError,
  REQUEST_ID,
  secretMatches,
  serveWithStore,
  startServer,
  toServiceError,
  unary,
  type CallContext,
} from './grpc.js';
import {
  BadRequest,
  Conflict,
  InternalError,
  InvalidCredentials,
  NewUsersDisabled,
  NoNodeAvailable,
  PayloadTooLarge,
  type ProtocolError,
  RecordNotFound,
  ServiceUnavailable,
  TooManyRequests,
} from './errors.js';
import { startDirectory, type RunningDirectory } from '../services/directory/server.js';
import { SqliteUserStore } from '../services/directory/store-sqlite.js';
import { eventually, healthStatus, tempStoreUrl, TEST_AUTH, UNAUTHENTICATED } from '../tests/support/services.js';
import { capturedLog } from '../tests/support/log.js';
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

/** A health client without the secret, and `watch()`: opens a Watch, resolving with its first status or the error that ended it. */
function healthWatcher(port: number) {
  const client = new HealthClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  const streams: grpc.ClientReadableStream<unknown>[] = [];
  const watch = () =>
    new Promise<{ status?: string; code?: number }>((resolve) => {
      const stream = client.watch({ service: '' }) as grpc.ClientReadableStream<{ status: string }>;
      streams.push(stream);
      stream.once('data', (m: { status: string }) => resolve({ status: m.status }));
      stream.once('error', (e: grpc.ServiceError) => resolve({ code: e.code }));
    });
  return { client, streams, watch };
}

test('health Watch streams need no secret, and one address may hold at most MAX_HEALTH_WATCHES_PER_PEER of them', async () => {
  const running = await startServer([], '127.0.0.1', 0, TEST_AUTH);
  const { client, streams, watch } = healthWatcher(running.port);
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

// How an error travels between the services: what a handler sends for it, and what the caller rebuilds.
// Plain functions; the service suites (services/*/service.test.ts, services/login/backends.test.ts) run
// them over real gRPC.

test('toServiceError: the gRPC code by HTTP status, the class and a rate limit in metadata; anything else hidden as InternalError', () => {
  const { log, lines } = capturedLog();
  const codes: Array<[ProtocolError, grpc.status]> = [
    [new BadRequest('bad'), grpc.status.INVALID_ARGUMENT],
    [new InvalidCredentials('bad'), grpc.status.UNAUTHENTICATED],
    [new NewUsersDisabled('closed'), grpc.status.PERMISSION_DENIED],
    [new RecordNotFound('none'), grpc.status.NOT_FOUND],
    [new TooManyRequests('slow down', 60), grpc.status.RESOURCE_EXHAUSTED],
    [new Conflict('taken'), grpc.status.ALREADY_EXISTS],
    [new ServiceUnavailable('down'), grpc.status.RESOURCE_EXHAUSTED],
    [new InternalError('bug'), grpc.status.INTERNAL],
    [new PayloadTooLarge('big'), grpc.status.INTERNAL],
  ];
  for (const [err, code] of codes) {
    const sent = toServiceError(err, log, 'Login');
    assert.equal(sent.code, code, err.name);
    assert.equal(sent.details, err.message, err.name);
    assert.deepEqual(sent.metadata?.get('x-error-class'), [err.name], err.name);
    assert.deepEqual(sent.metadata?.get('x-retry-after'), err instanceof TooManyRequests ? ['60'] : [], err.name);
  }
  const hidden = toServiceError(new Error('db password is hunter2'), log, 'Login');
  assert.deepEqual([hidden.code, hidden.details, hidden.metadata?.get('x-error-class')], [grpc.status.INTERNAL, 'internal error', ['InternalError']]);
  assert.deepEqual(
    lines.map((l) => [l.level, l.msg, l.method, l.class]),
    [
      [40, 'rpc failed', 'Login', 'ServiceUnavailable'],
      [40, 'rpc failed', 'Login', 'InternalError'],
      [50, 'rpc failed unexpectedly', 'Login', undefined],
    ],
    'a 4xx is not logged here; a 5xx is a warning with its reason; anything else an error with its cause',
  );
  assert.equal(lines[0].err, 'down');
  assert.match(JSON.stringify(lines[2]), /hunter2/);
});

test("rebuiltError: each class as itself; a rate limit keeps the server's Retry-After when it is sane; a 503 takes the caller's", () => {
  const carried = (errorClass: string, retryAfter = 0) => ({ errorClass, message: 'why', retryAfter });
  const unknown = rebuiltError(carried('NoSuchClass'), 10);
  assert.ok(unknown instanceof InternalError);
  assert.equal(unknown.message, 'backend error NoSuchClass: why');
  assert.ok(rebuiltError(carried('toString'), 10) instanceof InternalError, 'only the classes themselves, not what objects inherit');
  const bad = rebuiltError(carried('BadRequest'), 10);
  assert.deepEqual([bad.constructor, bad.message], [BadRequest, 'why']);
  for (const [given, expected] of [[120, '120'], [0, '1'], [-5, '1'], [1.5, '1'], [Number.NaN, '1']] as const) {
    const limited = rebuiltError(carried('TooManyRequests', given), 10);
    assert.ok(limited instanceof TooManyRequests);
    assert.equal(limited.headers['Retry-After'], expected, String(given));
  }
  const down = rebuiltError(carried('NoNodeAvailable'), 7);
  assert.deepEqual([down.constructor, down.headers['Retry-After'], down.message], [NoNodeAvailable, '7', 'why'], 'the subclass kept, with the Retry-After this service is configured with');
  assert.equal(rebuiltError(carried('ServiceUnavailable'), 10).headers['Retry-After'], '10');
});

test('fromServiceError: a class in metadata is rebuilt; otherwise a transport failure is 503 and any other code an internal fault', () => {
  const failure = (code: grpc.status, details: string, md?: Record<string, string>): grpc.ServiceError => {
    const metadata = new grpc.Metadata();
    for (const [k, v] of Object.entries(md ?? {})) metadata.set(k, v);
    return Object.assign(new Error(details), { code, details, metadata: md ? metadata : (undefined as unknown as grpc.Metadata) });
  };
  const limited = fromServiceError(failure(grpc.status.RESOURCE_EXHAUSTED, 'too many', { 'x-error-class': 'TooManyRequests', 'x-retry-after': '30' }), 10);
  assert.deepEqual([limited.constructor, limited.message, limited.headers['Retry-After']], [TooManyRequests, 'too many', '30']);
  for (const code of [grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED, grpc.status.CANCELLED, grpc.status.RESOURCE_EXHAUSTED]) {
    const e = fromServiceError(failure(code, 'connect refused'), 4);
    assert.deepEqual([e.constructor, e.message, e.headers['Retry-After']], [ServiceUnavailable, 'backend unavailable: connect refused', '4'], grpc.status[code]);
  }
  const other = fromServiceError(failure(grpc.status.NOT_FOUND, 'no method', { 'x-error-class': 'Bogus' }), 4);
  assert.deepEqual([other.constructor, other.message], [InternalError, 'backend error NOT_FOUND: no method'], 'an unknown class is read as no class');
  const none = fromServiceError(failure(grpc.status.UNIMPLEMENTED, 'not here'), 4);
  assert.deepEqual([none.constructor, none.message], [InternalError, 'backend error UNIMPLEMENTED: not here'], 'an error without metadata');
});

test("logged: one 'rpc' line per call with the caller's request id, method, outcome and time; the handler's answer or error passes through", async () => {
  const { log, lines } = capturedLog();
  const seen: CallContext[] = [];
  const ok = await logged(log, 'Login', 'req-1', async (req: number, ctx) => (seen.push(ctx), req * 2), 21, () => true);
  assert.equal(ok, 42);
  assert.equal(seen[0].requestId, 'req-1');
  assert.equal(seen[0].gone(), true, "the handler asks the caller's own gone()");
  const refused = new InvalidCredentials('bad');
  await assert.rejects(logged(log, 'Login', 'req-2', async () => Promise.reject(refused), 0), (e) => e === refused);
  await assert.rejects(logged(log, 'Allocate', 'req-3', async () => Promise.reject(new Error('boom')), 0), /boom/);
  assert.deepEqual(
    lines.map((l) => [l.level, l.msg, l.requestId, l.method, l.outcome]),
    [
      [20, 'rpc', 'req-1', 'Login', 'ok'],
      [20, 'rpc', 'req-2', 'Login', 'InvalidCredentials'],
      [20, 'rpc', 'req-3', 'Allocate', 'InternalError'],
    ],
  );
  for (const l of lines) assert.ok(typeof l.ms === 'number' && l.ms >= 0 && l.ms < 1000, `ms is the call's duration (${l.ms})`);
  const defaultGone = await logged(log, 'Login', 'req-4', async (_req: number, ctx) => ctx.gone(), 0);
  assert.equal(defaultGone, false, 'without a gone() the caller is never gone');
});

// ---- found missing by mutation testing: the stream, the calls' metadata and deadline, the interceptors, the server's close ----

test('health Watch places: a cancelled watch frees exactly one place, and refused watches take none', async () => {
  const running = await startServer([], '127.0.0.1', 0, TEST_AUTH);
  const { client, streams, watch } = healthWatcher(running.port);
  const refusedWatch = { code: grpc.status.RESOURCE_EXHAUSTED };
  try {
    for (let i = 0; i < MAX_HEALTH_WATCHES_PER_PEER; i++) assert.deepEqual(await watch(), { status: 'SERVING' });
    for (let i = 0; i < 3; i++) assert.deepEqual(await watch(), refusedWatch);
    for (const n of [0, 1]) {
      streams[n].cancel();
      let reopened = false;
      for (let i = 0; i < 50 && !reopened; i++) {
        reopened = (await watch()).status === 'SERVING';
        if (!reopened) await new Promise((res) => setTimeout(res, 20));
      }
      assert.ok(reopened, 'the cancelled watch freed its place');
      assert.deepEqual(await watch(), refusedWatch, 'and one place only');
    }
  } finally {
    for (const s of streams) s.cancel();
    client.close();
    await running.close();
  }
});

/** The status code of a GetUser call carrying exactly `md`, through a client that adds no secret of its own (0: answered). */
async function rawGetUserCode(port: number, md: grpc.Metadata): Promise<number> {
  const raw = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  try {
    return await new Promise<number>((resolve) =>
      raw.makeUnaryRequest('/tokenserver.directory.v1.Directory/GetUser', (x: Buffer) => x, (x: Buffer) => x, Buffer.alloc(0), md, (err) => resolve(err ? err.code : 0)),
    );
  } finally {
    raw.close();
  }
}

test('the internal secret sent twice is refused, even when the first is right', async () => {
  const temp = tempStoreUrl('grpc-secret-twice-');
  const running = await startDirectory({ storeUrl: temp.storeUrl, port: 0, auth: TEST_AUTH });
  const client = grpcClient(DirectoryClient, `127.0.0.1:${running.port}`, TEST_AUTH);
  try {
    const md = new grpc.Metadata();
    md.add(INTERNAL_SECRET_HEADER, TEST_AUTH.internalSecret);
    md.add(INTERNAL_SECRET_HEADER, TEST_AUTH.internalSecret);
    assert.equal(await rawGetUserCode(running.port, md), grpc.status.UNAUTHENTICATED);
    // The client's own one secret is served (GetUser of nobody: 404, not UNAUTHENTICATED).
    await assert.rejects(call(client, client.getUser, { service: 'sync', email: 'nobody@example.com' }, { deadlineMs: 5000, retryAfter: 1 }), RecordNotFound);
  } finally {
    client.close();
    await running.close();
    temp.cleanup();
  }
});

/** A server with these Directory handlers only (and the secret check and health every server has), and a client with the secret. */
async function serveDirectory(implementation: grpc.UntypedServiceImplementation, streams?: OpenStreams) {
  const running = await startServer([{ definition: DirectoryService, name: 'x', implementation, streams }], '127.0.0.1', 0, TEST_AUTH);
  return { running, client: grpcClient(DirectoryClient, `127.0.0.1:${running.port}`, TEST_AUTH) };
}

/** A Directory whose GetUser records the caller's request id and answers when `release` is called (or never). */
async function heldDirectory() {
  const requestIds: string[] = [];
  const held: Array<() => void> = [];
  const d = await serveDirectory({
    getUser: (c: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      requestIds.push(String(c.metadata.get(REQUEST_ID)[0] ?? ''));
      held.push(() => cb(null, {}));
    },
  });
  return { ...d, requestIds, release: () => held.splice(0).forEach((f) => f()) };
}

/** A Directory whose LoginStream answers each message (its id) when the test calls that message's gate, in the order read. */
async function gatedStream() {
  const streams = new OpenStreams();
  const gates: Array<() => void> = [];
  const answer = (req: LoginStreamRequest) => new Promise<LoginStreamReply>((resolve) => gates.push(() => resolve({ id: req.id, batch: { results: [] } })));
  const d = await serveDirectory({ loginStream: answeringStream(streams, answer) }, streams);
  return { ...d, streams, gates };
}

test("call(): the caller's request id travels in metadata, none when it has none; its deadline ends a call the server never answers as a 503", async () => {
  const d = await heldDirectory();
  try {
    const ask = (o: { deadlineMs: number; requestId?: string }) => call(d.client, d.client.getUser, { service: 'sync', email: 'a@example.com' }, { retryAfter: 3, ...o });
    const started = Date.now();
    await assert.rejects(ask({ deadlineMs: 300, requestId: 'req-42' }), (e: unknown) => e instanceof ServiceUnavailable && e.retryAfter === 3);
    assert.ok(Date.now() - started < 5000, 'the deadline ended it');
    await assert.rejects(ask({ deadlineMs: 300 }), ServiceUnavailable);
    assert.deepEqual(d.requestIds, ['req-42', '']);
  } finally {
    d.client.close();
    d.release();
    await d.running.close();
  }
});

test('close(): a call that never ends does not hold the server past its 2 s grace', async () => {
  const d = await heldDirectory();
  const pending = call(d.client, d.client.getUser, { service: 'sync', email: 'a@example.com' }, { deadlineMs: 60_000, retryAfter: 1 }).catch((e: unknown) => e);
  await eventually('the call to arrive', () => d.requestIds.length === 1);
  const started = Date.now();
  await d.running.close();
  const took = Date.now() - started;
  assert.ok(took >= 1500 && took < 10_000, `closed after ${took} ms`);
  assert.ok((await pending) instanceof ServiceUnavailable);
  d.client.close();
});

test('answeringStream: a drain while answers are pending writes each of them, then ends OK; what arrives after the drain is not read', async () => {
  const { running, client, streams, gates } = await gatedStream();
  try {
    const stream = client.loginStream();
    const got: number[] = [];
    const ended = new Promise<number>((resolve) => {
      stream.on('data', (r: LoginStreamReply) => got.push(r.id));
      stream.on('status', (s: grpc.StatusObject) => resolve(s.code));
      stream.on('error', () => undefined);
    });
    stream.write({ id: 1, batch: { items: [] } });
    stream.write({ id: 2, batch: { items: [] } });
    await eventually('both to be read', () => gates.length === 2);
    assert.equal(streams.size, 1);
    streams.drain();
    stream.write({ id: 3, batch: { items: [] } });
    gates[0]();
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(got, [1], 'the stream stays open for the answer still pending');
    gates[1]();
    assert.equal(await ended, grpc.status.OK);
    assert.deepEqual(got, [1, 2]);
    assert.equal(gates.length, 2, 'the message sent after the drain was not read');
    assert.equal(streams.size, 0, 'an ended stream is forgotten');
  } finally {
    client.close();
    await running.close();
  }
});

test('answeringStream: a caller that cancels is forgotten at once, and its pending answer is not written', async () => {
  const { running, client, streams, gates } = await gatedStream();
  try {
    const stream = client.loginStream();
    stream.on('error', () => undefined);
    stream.write({ id: 1, batch: { items: [] } });
    await eventually('the message to be read', () => gates.length === 1);
    stream.cancel();
    await eventually('the stream to be forgotten', () => streams.size === 0);
    gates[0]();
    await new Promise((r) => setTimeout(r, 100));
    // The server is still whole: a new stream is answered.
    const again = client.loginStream();
    const reply = new Promise<LoginStreamReply>((resolve) => again.once('data', resolve));
    again.write({ id: 2, batch: { items: [] } });
    await eventually('the second message to be read', () => gates.length === 2);
    gates[1]();
    assert.equal((await reply).id, 2);
    again.end();
  } finally {
    client.close();
    await running.close();
  }
});

test('serveWithStore: the store is closed after the server, or at once when the server cannot start', async () => {
  const store = SqliteUserStore.open(':memory:');
  const served = await serveWithStore(store, { definition: DirectoryService, implementation: {}, name: 'x' }, '127.0.0.1', 0, TEST_AUTH);
  assert.equal(await healthStatus(served.port, ''), 'SERVING');
  await served.close();
  await assert.rejects(store.get('sync', 'a@example.com'), 'closed with the server');
  const blocker = await startServer([], '127.0.0.1', 0, TEST_AUTH);
  const second = SqliteUserStore.open(':memory:');
  try {
    await assert.rejects(serveWithStore(second, { definition: DirectoryService, implementation: {}, name: 'x' }, '127.0.0.1', blocker.port, TEST_AUTH));
    await assert.rejects(second.get('sync', 'a@example.com'), 'closed when the server could not start');
  } finally {
    await blocker.close();
  }
});

test('close(): a health watch open at the close hears NOT_SERVING, for the server and for each of its services', async () => {
  const { running } = await serveDirectory({});
  const client = new HealthClient(`127.0.0.1:${running.port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  const heard: Record<string, string[]> = { '': [], x: [] };
  const streams = Object.keys(heard).map((service) => {
    const stream = client.watch({ service }) as grpc.ClientReadableStream<{ status: string }>;
    stream.on('data', (m: { status: string }) => heard[service].push(m.status));
    stream.on('error', () => undefined);
    return stream;
  });
  try {
    await eventually('both watches to hear SERVING', () => heard[''].length === 1 && heard.x.length === 1);
    // The watches hold the server open: it closes after its 2 s grace, having told them first.
    const closed = running.close();
    await eventually('both watches to hear NOT_SERVING', () => heard[''].length === 2 && heard.x.length === 2);
    await closed;
    assert.deepEqual(heard, { '': ['SERVING', 'NOT_SERVING'], x: ['SERVING', 'NOT_SERVING'] });
  } finally {
    for (const s of streams) s.cancel();
    client.close();
  }
});

// ---- found missing by mutation testing: what the server's refusals and a failed call log ----

test("the server's refusals are logged at warn: the method, the peer, why; never the secret given", async () => {
  const { log, lines } = capturedLog();
  const running = await startServer([{ definition: DirectoryService, name: 'x', implementation: {} }], '127.0.0.1', 0, TEST_AUTH, log);
  const { client, streams, watch } = healthWatcher(running.port);
  const wrongSecret = 'a-wrong-secret-that-must-not-be-logged';
  try {
    assert.equal(await rawGetUserCode(running.port, new grpc.Metadata()), grpc.status.UNAUTHENTICATED);
    const wrong = new grpc.Metadata();
    wrong.set(INTERNAL_SECRET_HEADER, wrongSecret);
    assert.equal(await rawGetUserCode(running.port, wrong), grpc.status.UNAUTHENTICATED);
    for (let i = 0; i < MAX_HEALTH_WATCHES_PER_PEER; i++) assert.deepEqual(await watch(), { status: 'SERVING' });
    assert.deepEqual(await watch(), { code: grpc.status.RESOURCE_EXHAUSTED });
    const refusals = lines.filter((l) => String(l.msg).startsWith('rpc refused'));
    assert.deepEqual(
      refusals.map((l) => [l.level, l.msg, l.method, l.reason, l.open]),
      [
        [40, 'rpc refused: internal secret', '/tokenserver.directory.v1.Directory/GetUser', 'no secret', undefined],
        [40, 'rpc refused: internal secret', '/tokenserver.directory.v1.Directory/GetUser', 'wrong secret', undefined],
        [40, 'rpc refused: too many health watches', '/grpc.health.v1.Health/Watch', undefined, MAX_HEALTH_WATCHES_PER_PEER],
      ],
    );
    // The caller's address and port for the secret's refusals; the address alone, as counted, for the watches'.
    assert.match(refusals[0].peer, /^127\.0\.0\.1:\d+$/);
    assert.equal(refusals[2].peer, '127.0.0.1');
    assert.equal(JSON.stringify(lines).includes(wrongSecret), false);
    assert.equal(JSON.stringify(lines).includes(TEST_AUTH.internalSecret), false);
  } finally {
    for (const s of streams) s.cancel();
    client.close();
    await running.close();
  }
});

test("unary(): the handler's answer reaches the caller; a failure's line carries the caller's request id; a caller past its deadline is gone", async () => {
  const { log, lines } = capturedLog();
  const goneAfterDeadline: boolean[] = [];
  let answer: 'ok' | 'refuse' | 'crash' | 'outlive' = 'ok';
  const d = await serveDirectory({
    getUser: unary(log, 'GetUser', async (_req: unknown, ctx: CallContext) => {
      if (answer === 'refuse') throw new InternalError('the store timed out');
      if (answer === 'crash') throw new TypeError('x is undefined');
      if (answer === 'outlive') {
        await new Promise((r) => setTimeout(r, 400));
        goneAfterDeadline.push(ctx.gone());
      }
      return UserReply.fromPartial({ user: { service: 'sync', email: 'a@example.com', uid: 7 } });
    }),
  });
  const ask = (requestId: string, deadlineMs = 5000) => call(d.client, d.client.getUser, { service: 'sync', email: 'a@example.com' }, { deadlineMs, retryAfter: 1, requestId });
  try {
    assert.equal((await ask('req-ok')).user?.uid, 7);
    answer = 'refuse';
    await assert.rejects(ask('req-refused'), InternalError);
    answer = 'crash';
    await assert.rejects(ask('req-crashed'), (e: unknown) => e instanceof InternalError && !String((e as Error).message).includes('undefined'));
    answer = 'outlive';
    await assert.rejects(ask('req-late', 150), ServiceUnavailable);
    await eventually('the late handler to finish', () => goneAfterDeadline.length === 1);
    assert.deepEqual(goneAfterDeadline, [true]);
    const failures = lines.filter((l) => l.msg !== 'rpc');
    assert.deepEqual(
      failures.map((l) => [l.level, l.msg, l.requestId, l.method, l.class]),
      [
        [40, 'rpc failed', 'req-refused', 'GetUser', 'InternalError'],
        [50, 'rpc failed unexpectedly', 'req-crashed', 'GetUser', undefined],
      ],
    );
    assert.equal(failures[0].err, 'the store timed out');
    assert.match(JSON.stringify(failures[1].err), /x is undefined/);
  } finally {
    d.client.close();
    await d.running.close();
  }
});
