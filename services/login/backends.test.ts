// Login's directory client over real gRPC: concurrent logins travel together
// as batches on one LoginStream, each settles with its own result or error
// class; a draining directory loses no login, a silent one fails them at the
// deadline, and a directory that is gone fails every waiting login with a 503.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type * as grpc from '@grpc/grpc-js';
import { DirectoryClient, DirectoryService, type AssignNodeReply, type LoginRequest, type LoginStreamReply, type LoginStreamRequest } from '../../lib/gen/directory.js';
import { InternalError, InvalidGeneration, NewUsersDisabled, ServiceUnavailable } from '../../lib/errors.js';
import { NodeAssignService, type NodeReply } from '../../lib/gen/nodeassign.js';
import { answeringStream, grpcClient, MAX_BATCH_ITEMS, OpenStreams, startServer, type RunningServer, type ServiceSpec } from '../../lib/grpc.js';
import { logger } from '../../lib/log.js';
import { LoginMetrics } from '../../lib/metrics.js';
import { directoryService, loginStreamAnswer } from '../directory/service.js';
import { SqliteUserStore } from '../directory/store-sqlite.js';
import { eventually, tempStoreUrl, TEST_AUTH } from '../../tests/support/services.js';
import { connectBackends, type Backends } from './backends.js';

const temp = tempStoreUrl('login-backends-');
let store: SqliteUserStore;
let server: RunningServer;
let backends: Backends;
/** Calls the directory received, by method. */
const calls: Record<string, number> = {};
const RETRY_AFTER = 7;
const POLICY = { clientStateChangesPerDay: 10 };

const DIRECTORY = { definition: DirectoryService, name: 'tokenserver.directory.v1.Directory' };
const NODEASSIGN = { definition: NodeAssignService, name: 'tokenserver.nodeassign.v1.NodeAssign' };

/** A gRPC server on a loopback port of its own with one service (`DIRECTORY` or `NODEASSIGN`) and these handlers. */
const serve = (service: Pick<ServiceSpec, 'definition' | 'name'>, implementation: grpc.UntypedServiceImplementation, streams?: OpenStreams): Promise<RunningServer> =>
  startServer([{ ...service, implementation, streams }], '127.0.0.1', 0, TEST_AUTH);

before(async () => {
  store = SqliteUserStore.open(temp.storeUrl.slice('sqlite:'.length));
  const impl = directoryService(store, logger('directory'), POLICY);
  // The real handlers, counted: calls by method, and LoginStream's messages.
  const counted = Object.fromEntries(
    Object.entries(impl).map(([name, handler]) => [
      name,
      (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        calls[name] = (calls[name] ?? 0) + 1;
        if (name === 'loginStream') call.on('data', () => (calls.loginStreamMessages = (calls.loginStreamMessages ?? 0) + 1));
        (handler as grpc.handleUnaryCall<unknown, unknown>)(call, cb);
      },
    ]),
  );
  server = await serve(DIRECTORY, counted);
  backends = backendsOf(server);
});

after(async () => {
  backends.close();
  await server.close();
  await store.close();
  temp.cleanup();
});

const req = (email: string, o: Partial<LoginRequest> = {}): LoginRequest => ({ service: 'sync', email, clientState: '', allowNewUsers: true, ...o });

test('concurrent logins share batches on one LoginStream; each gets its own user or error class', async () => {
  const first = await backends.login(req('batched@example.com', { generation: 5 }), 'rid-first');
  for (const k of Object.keys(calls)) delete calls[k];
  const settled = await Promise.allSettled([
    ...Array.from({ length: 30 }, (_, i) => backends.login(req(`batched${i}@example.com`), `rid-${i}`)),
    backends.login(req('batched@example.com', { generation: 5 }), 'rid-same'),
    backends.login(req('batched@example.com', { generation: 2 }), 'rid-lower'),
    backends.login(req('nobody@example.com', { allowNewUsers: false }), 'rid-closed'),
  ]);
  assert.equal((calls.login ?? 0) + (calls.loginBatch ?? 0), 0, 'no unary Login or LoginBatch');
  assert.equal(calls.loginStream ?? 0, 0, 'the stream opened by the first login carries these too');
  assert.ok(calls.loginStreamMessages >= 1 && calls.loginStreamMessages < 5, `33 logins in ${calls.loginStreamMessages} batches`);
  const users = settled.slice(0, 30).map((r) => (r.status === 'fulfilled' ? r.value : assert.fail(String(r.reason))));
  assert.deepEqual(
    users.map((u) => u.email),
    Array.from({ length: 30 }, (_, i) => `batched${i}@example.com`),
  );
  assert.equal(new Set(users.map((u) => u.uid)).size, 30, 'one new uid each');
  assert.deepEqual(settled[30], { status: 'fulfilled', value: first });
  assert.ok(settled[31].status === 'rejected' && settled[31].reason instanceof InvalidGeneration, String(settled[31]));
  assert.ok(settled[32].status === 'rejected' && settled[32].reason instanceof NewUsersDisabled, String(settled[32]));
});

/** A directory on the test's store whose LoginStream answers wait for `hold` when it says so. */
async function holdingDirectory(hold: (req: LoginStreamRequest) => Promise<void> | undefined): Promise<{ server: RunningServer; streams: OpenStreams; opened: () => number; answered: () => number }> {
  const streams = new OpenStreams();
  const answer = loginStreamAnswer(store, POLICY, logger('directory'));
  let opened = 0;
  let answered = 0;
  const stream = answeringStream<LoginStreamRequest, LoginStreamReply>(streams, async (req) => {
    await hold(req);
    answered++;
    return answer(req);
  });
  const implementation = {
    ...directoryService(store, logger('directory'), POLICY),
    loginStream: (call: grpc.ServerDuplexStream<LoginStreamRequest, LoginStreamReply>) => {
      opened++;
      stream(call);
    },
  };
  const running = await serve(DIRECTORY, implementation, streams);
  return { server: running, streams, opened: () => opened, answered: () => answered };
}

/** Login's backends against `server` as the directory, and nodeassign at `nodeAssignPort` (none: a port nothing answers on). */
const backendsOf = (server: RunningServer, o: { deadlineMs?: number; streamMaxAgeMs?: number; nodeAssignPort?: number; metrics?: LoginMetrics } = {}): Backends =>
  connectBackends(
    {
      directoryAddr: `127.0.0.1:${server.port}`,
      nodeAssignAddr: `127.0.0.1:${o.nodeAssignPort ?? 1}`,
      auth: TEST_AUTH,
      grpcDeadlineMs: o.deadlineMs ?? 2000,
      retryAfter: RETRY_AFTER,
    },
    o.metrics ?? new LoginMetrics(),
    o.streamMaxAgeMs,
  );

test('a draining directory answers the batch it read; one it did not read goes again on a new stream', async () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const d = await holdingDirectory((req) => (req.batch?.items[0]?.requestId === 'rid-held' ? gate : undefined));
  const b = backendsOf(d.server);
  try {
    const held = b.login(req('drain-held@example.com'), 'rid-held');
    await eventually('the stream to open', () => d.streams.size === 1, { pollMs: 5 });
    // It cannot end yet: the held batch is unanswered. What arrives now is not read.
    d.streams.drain();
    const after = b.login(req('drain-after@example.com'), 'rid-after');
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(d.answered(), 0);
    release();
    const [u1, u2] = await Promise.all([held, after]);
    assert.deepEqual([u1.email, u2.email], ['drain-held@example.com', 'drain-after@example.com']);
    assert.equal(d.opened(), 2, 'the unread batch went on a second stream');
    assert.equal(d.answered(), 2, 'each batch was decided once');
  } finally {
    b.close();
    await d.server.close();
  }
});

test('a directory that never answers: the batch fails with 503 at the deadline; its late answer changes nothing', async () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const d = await holdingDirectory(() => gate);
  const b = backendsOf(d.server, { deadlineMs: 300 });
  try {
    const started = Date.now();
    const err = await b.login(req('silent@example.com'), 'rid-silent').then(
      () => assert.fail('answered'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ServiceUnavailable, String(err));
    assert.equal(err.retryAfter, RETRY_AFTER);
    assert.equal(err.message, 'backend unavailable: Deadline exceeded');
    assert.ok(Date.now() - started < 1500, `failed after ${Date.now() - started} ms`);
    release();
    await eventually('the late answer', () => d.answered() === 1, { pollMs: 5 });
    // The stream is still good for the next login.
    assert.equal((await b.login(req('silent@example.com'), 'rid-next')).email, 'silent@example.com');
    assert.equal(d.opened(), 1);
  } finally {
    b.close();
    await d.server.close();
  }
});

test('a stream older than its age carries no new batch: the next one opens another (another replica, round robin)', async () => {
  const d = await holdingDirectory(() => undefined);
  const b = backendsOf(d.server, { streamMaxAgeMs: 150 });
  try {
    assert.equal((await b.login(req('aged-1@example.com'), 'rid-aged-1')).email, 'aged-1@example.com');
    assert.equal((await b.login(req('aged-2@example.com'), 'rid-aged-2')).email, 'aged-2@example.com');
    assert.equal(d.opened(), 1);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal((await b.login(req('aged-3@example.com'), 'rid-aged-3')).email, 'aged-3@example.com');
    assert.equal(d.opened(), 2);
    // The old stream was half-closed: the directory ended it once it had answered.
    await eventually('the old stream to end', () => d.streams.size === 1, { pollMs: 5 });
  } finally {
    b.close();
    await d.server.close();
  }
});

test('a batch of more items than MAX_BATCH_ITEMS on the stream: that batch fails as a whole, the stream serves on', async () => {
  const d = await holdingDirectory(() => undefined);
  const client = grpcClient(DirectoryClient, `127.0.0.1:${d.server.port}`, TEST_AUTH);
  const call = client.loginStream();
  try {
    const replies: LoginStreamReply[] = [];
    call.on('data', (r: LoginStreamReply) => replies.push(r));
    const item = (i: number) => ({ requestId: `big-${i}`, login: req(`big-${i}@example.com`) });
    call.write({ id: 41, batch: { items: Array.from({ length: MAX_BATCH_ITEMS + 1 }, (_, i) => item(i)) } });
    call.write({ id: 42, batch: { items: [item(0)] } });
    await eventually('both replies', () => replies.length === 2, { pollMs: 5 });
    const byId = new Map(replies.map((r) => [r.id, r]));
    assert.equal(byId.get(41)?.error?.errorClass, 'BadRequest');
    assert.equal(byId.get(41)?.batch, undefined);
    assert.equal(byId.get(42)?.batch?.results[0]?.user?.email, 'big-0@example.com');
  } finally {
    call.on('error', () => undefined);
    call.cancel();
    client.close();
    await d.server.close();
  }
});

test('more logins in one turn than MAX_BATCH_ITEMS go in batches of at most that many, and each is answered', async () => {
  const sizes: number[] = [];
  const d = await holdingDirectory((r) => {
    sizes.push(r.batch?.items.length ?? 0);
    return undefined;
  });
  const b = backendsOf(d.server);
  try {
    for (const count of [MAX_BATCH_ITEMS, MAX_BATCH_ITEMS + 1]) {
      sizes.length = 0;
      const users = await Promise.all(Array.from({ length: count }, (_, i) => b.login(req(`many-${count}-${i}@example.com`), `rid-many-${i}`)));
      assert.deepEqual(users.map((u) => u.email), Array.from({ length: count }, (_, i) => `many-${count}-${i}@example.com`));
      assert.deepEqual(sizes, count === MAX_BATCH_ITEMS ? [MAX_BATCH_ITEMS] : [MAX_BATCH_ITEMS, 1]);
    }
  } finally {
    b.close();
    await d.server.close();
  }
});

test('a batch refused as a whole fails each of its logins with that error; an item without a result fails with a 500', async () => {
  const user = { service: 'sync', email: 'scripted@example.com', uid: 9, node: '', generation: 0, clientState: '', seenClientStates: [], replaced: [], createdAt: 1, keysChangedAt: undefined };
  const streams = new OpenStreams();
  // Answers by the first item's request id: the whole batch refused, a reply with results for some items only, or neither.
  const scripted = answeringStream<LoginStreamRequest, LoginStreamReply>(streams, async (r) => {
    const first = r.batch?.items[0]?.requestId;
    if (first === 'whole') return { id: r.id, error: { errorClass: 'NewUsersDisabled', message: 'closed to new users', retryAfter: 0 } };
    if (first === 'partial') return { id: r.id, batch: { results: [{ user }, { error: { errorClass: 'InvalidGeneration', message: 'lower', retryAfter: 0 } }, {}] } };
    return { id: r.id };
  });
  const server = await serve(DIRECTORY, { ...directoryService(store, logger('directory'), POLICY), loginStream: scripted }, streams);
  const b = backendsOf(server);
  const batch = (ids: string[]) => Promise.allSettled(ids.map((id) => b.login(req(`${id}@example.com`), id)));
  const reasons = (settled: PromiseSettledResult<unknown>[]) => settled.map((r) => (r.status === 'rejected' ? `${r.reason.constructor.name}: ${r.reason.message}` : 'fulfilled'));
  try {
    assert.deepEqual(reasons(await batch(['whole', 'whole-2'])), ['NewUsersDisabled: closed to new users', 'NewUsersDisabled: closed to new users']);
    const partial = await batch(['partial', 'partial-2', 'partial-3', 'partial-4']);
    assert.deepEqual(partial[0], { status: 'fulfilled', value: user });
    assert.deepEqual(reasons(partial.slice(1)), [
      'InvalidGeneration: lower',
      'InternalError: directory LoginStream returned no result for an item',
      'InternalError: directory LoginStream returned no result for an item',
    ]);
    assert.deepEqual(reasons(await batch(['neither'])), ['InternalError: directory LoginStream returned no result for an item']);
  } finally {
    b.close();
    await server.close();
  }
});

test('health: SERVING is up, NOT_SERVING or no answer is down; connect is true only when both backends connect', async () => {
  const d = await holdingDirectory(() => undefined);
  const missing = backendsOf(d.server);
  // Both backends at the directory's address: its overall health answers for either.
  const both = backendsOf(d.server, { nodeAssignPort: d.server.port });
  try {
    assert.equal(await both.connect(2000), true);
    assert.deepEqual(await both.health(), { directory: true, nodeassign: true });
    assert.equal(await missing.connect(300), false, 'nodeassign never answers');
    assert.deepEqual(await missing.health(), { directory: true, nodeassign: false });
    d.server.health.setStatus('', 'NOT_SERVING');
    assert.deepEqual(await both.health(), { directory: false, nodeassign: false });
  } finally {
    both.close();
    missing.close();
    await d.server.close();
  }
});

test('a backend that answers without the node or the user it must gives a 500 naming the call; allocations are counted by application', async () => {
  const node = { service: 'sync', url: 'https://node-1.example', capacity: 10, currentLoad: 1, available: 9, downed: false, backoff: false };
  let withNode = true;
  const nodeassign = await serve(NODEASSIGN, { allocate: (_c: unknown, cb: grpc.sendUnaryData<NodeReply>) => cb(null, { node: withNode ? node : undefined }) });
  const directory = await serve(DIRECTORY, { assignNode: (_c: unknown, cb: grpc.sendUnaryData<AssignNodeReply>) => cb(null, { user: undefined, assigned: true, released: 0 }) });
  const metrics = new LoginMetrics();
  const b = backendsOf(directory, { nodeAssignPort: nodeassign.port, metrics });
  const internal = (message: string) => (e: unknown) => e instanceof InternalError && e.message === message;
  try {
    assert.equal(await b.allocate('sync', 'rid-allocate'), node.url);
    assert.deepEqual((await metrics.allocations.get()).values.map((v) => [v.labels, v.value]), [[{ application: 'sync' }, 1]]);
    withNode = false;
    await assert.rejects(b.allocate('sync', 'rid-no-node'), internal('nodeassign Allocate returned no node'));
    await assert.rejects(b.assignNode({ service: 'sync', email: 'x@example.com', uid: 1, node: node.url }, 'rid-assign'), internal('directory AssignNode returned no user'));
    assert.equal((await metrics.allocations.get()).values[0].value, 1, 'a failed allocation is not counted');
  } finally {
    b.close();
    await directory.close();
    await nodeassign.close();
  }
});

test('every call is timed under its method; an account retired gives back only the slots of records that had a node', async () => {
  const d = await holdingDirectory(() => undefined);
  // Claim keys are SHA-256 hex (of the token's issuer and jti).
  const JTI_KEY = 'a1'.repeat(32);
  const releases: string[] = [];
  const nodeassign = await serve(NODEASSIGN, {
    // A node named after the application asked for.
    allocate: (c: grpc.ServerUnaryCall<{ service: string }, NodeReply>, cb: grpc.sendUnaryData<NodeReply>) =>
      cb(null, { node: { service: c.request.service, url: `https://${c.request.service}-node.example`, capacity: 1, currentLoad: 0, available: 1, downed: false, backoff: false } }),
    release: (c: grpc.ServerUnaryCall<{ url: string }, NodeReply>, cb: grpc.sendUnaryData<NodeReply>) => {
      releases.push(c.request.url);
      cb(null, { node: undefined });
    },
  });
  const metrics = new LoginMetrics();
  const b = backendsOf(d.server, { nodeAssignPort: nodeassign.port, metrics });
  try {
    const u = await b.login(req('timed@example.com'), 'rid-timed');
    const url = await b.allocate('sync', 'rid-timed');
    assert.equal(url, 'https://sync-node.example');
    assert.equal((await b.assignNode({ service: 'sync', email: u.email, uid: u.uid, node: url }, 'rid-timed')).user.node, url);
    await b.release('sync', url, 'rid-timed');
    assert.equal(await b.raiseGeneration(u.email, 42, 'rid-timed'), 1);
    assert.equal(await b.claimEventToken(JTI_KEY, Date.now() + 60_000, 'rid-timed'), true);
    assert.equal(await b.claimEventToken(JTI_KEY, Date.now() + 60_000, 'rid-timed'), false);
    await b.releaseEventToken(JTI_KEY, 'rid-timed');
    assert.equal(await b.claimEventToken(JTI_KEY, Date.now() + 60_000, 'rid-timed'), true);
    const noNode = await b.login(req('timed-no-node@example.com'), 'rid-timed');
    assert.deepEqual(await b.retireUser(noNode.email, '', 'rid-timed'), [{ service: 'sync', uid: noNode.uid, node: '' }]);
    assert.deepEqual(releases, [url], 'a record without a node gives nothing back');
    assert.deepEqual(await b.retireUser(u.email, 'sync', 'rid-timed'), [{ service: 'sync', uid: u.uid, node: url }]);
    assert.deepEqual(releases, [url, url]);
    assert.deepEqual(await b.health(), { directory: true, nodeassign: true });
    const methods = new Set((await metrics.backendCalls.get()).values.map((v) => v.labels.method));
    assert.deepEqual([...methods].sort(), [
      'directory.AssignNode',
      'directory.ClaimEventToken',
      'directory.Health.Check',
      'directory.Login',
      'directory.RaiseGeneration',
      'directory.ReleaseEventToken',
      'directory.RetireUser',
      'nodeassign.Allocate',
      'nodeassign.Health.Check',
      'nodeassign.Release',
    ]);
  } finally {
    b.close();
    await nodeassign.close();
    await d.server.close();
  }
});

test('after close, a login fails with 503 rather than throwing out of the event loop', async () => {
  const d = await holdingDirectory(() => undefined);
  const b = backendsOf(d.server);
  try {
    assert.equal((await b.login(req('closing@example.com'), 'rid-open')).email, 'closing@example.com');
    b.close();
    await assert.rejects(b.login(req('closing@example.com'), 'rid-closed'), (err: unknown) => err instanceof ServiceUnavailable && err.retryAfter === RETRY_AFTER);
  } finally {
    await d.server.close();
  }
});

test('the directory gone: every waiting login fails with 503 and the configured Retry-After', async () => {
  server.server.forceShutdown();
  const settled = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => backends.login(req(`gone${i}@example.com`), `rid-gone-${i}`)));
  for (const r of settled) {
    assert.ok(r.status === 'rejected' && r.reason instanceof ServiceUnavailable, String(r.status === 'rejected' ? r.reason : 'fulfilled'));
    assert.equal(r.reason.retryAfter, RETRY_AFTER);
    // Failed by the stream's end, not left to their deadline.
    assert.doesNotMatch(r.reason.message, /Deadline exceeded/);
  }
});
