// The Directory service over real gRPC on a loopback port, on a temp SQLite file.
import { after, before, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import assert from 'node:assert/strict';
import { DirectoryClient, DirectoryService, type LoginBatchItem, type LoginRequest, type LoginStreamRequest, type LoginStreamReply, type User } from '../../lib/gen/directory.js';
import { call, fromServiceError, grpcClient, MAX_BATCH_ITEMS, rebuiltError, serveWithStore } from '../../lib/grpc.js';
import {
  BadRequest,
  InvalidClientState,
  InvalidGeneration,
  InvalidKeysChangedAt,
  NewUsersDisabled,
  ProtocolError,
  RecordNotFound,
  ServiceUnavailable,
} from '../../lib/errors.js';
import { startDirectory, type RunningDirectory } from './server.js';
import pino from 'pino';
import { login as applyLogin, assignNode as assignNodeOn, directoryService, importUsers, loginBatch, reserveUids, retireUser } from './service.js';
import { UidTaken } from './store.js';
import { importSample } from './store.contract.js';
import { SqliteUserStore } from './store-sqlite.js';
import { healthStatus, tempStoreUrl, TEST_AUTH, UNAUTHENTICATED, WRONG_AUTHS } from '../../tests/support/services.js';

const temp = tempStoreUrl('directory-service-');
let server: RunningDirectory;
let client: DirectoryClient;

before(async () => {
  server = await startDirectory({ storeUrl: temp.storeUrl, port: 0, auth: TEST_AUTH });
  client = grpcClient(DirectoryClient, `127.0.0.1:${server.port}`, TEST_AUTH);
});

after(async () => {
  client.close();
  await server.close();
  temp.cleanup();
});

const opts = { deadlineMs: 10_000, retryAfter: 10 };
const POLICY = { clientStateChangesPerDay: 10 };
let emails = 0;
const freshEmail = () => `user${++emails}@example.com`;

function login(email: string, o: Partial<LoginRequest> = {}): Promise<User> {
  const req: LoginRequest = { service: 'sync', email, clientState: '', allowNewUsers: true, ...o };
  return call(client, client.login, req, opts).then((r) => r.user!);
}

async function loginError(email: string, o: Partial<LoginRequest> = {}): Promise<ProtocolError> {
  try {
    await login(email, o);
  } catch (err) {
    assert.ok(err instanceof ProtocolError, String(err));
    return err;
  }
  assert.fail('login succeeded');
}

const getUser = (email: string) => call(client, client.getUser, { service: 'sync', email }, opts).then((r) => r.user!);
const assignNodeReply = (email: string, uid: number, node: string) => call(client, client.assignNode, { service: 'sync', email, uid, node }, opts);
const assignNode = (email: string, uid: number, node: string) => assignNodeReply(email, uid, node).then((r) => r.user!);

test('health check answers SERVING for the server and the Directory service', async () => {
  assert.equal(await healthStatus(server.port, ''), 'SERVING');
  assert.equal(await healthStatus(server.port, 'tokenserver.directory.v1.Directory'), 'SERVING');
});

/** One message on a LoginStream of its own: its reply, or the stream's error as login reads it. */
function streamed(c: DirectoryClient, message: LoginStreamRequest): Promise<LoginStreamReply> {
  return new Promise((resolve, reject) => {
    const stream = c.loginStream();
    stream.on('data', (reply: LoginStreamReply) => {
      resolve(reply);
      stream.end();
    });
    stream.on('error', (err: grpc.ServiceError) => reject(fromServiceError(err, 1)));
    stream.write(message);
  });
}

/** One batch on a LoginStream of its own. */
const streamedBatch = (c: DirectoryClient, items: LoginBatchItem[]) => streamed(c, { id: 1, batch: { items } });

test('without the internal secret, or with a wrong one, every call is UNAUTHENTICATED and changes nothing', async () => {
  const email = freshEmail();
  const before = await login(email, { generation: 5 });
  for (const { name, auth } of WRONG_AUTHS) {
    const stranger = grpcClient(DirectoryClient, `127.0.0.1:${server.port}`, auth);
    try {
      // A huge generation would lock the user out for good.
      const lockOut: LoginRequest = { service: 'sync', email, clientState: '', allowNewUsers: true, generation: Number.MAX_SAFE_INTEGER };
      await assert.rejects(call(stranger, stranger.login, lockOut, opts), UNAUTHENTICATED, name);
      await assert.rejects(call(stranger, stranger.login, { ...lockOut, email: freshEmail() }, opts), UNAUTHENTICATED, name);
      await assert.rejects(call(stranger, stranger.loginBatch, { items: [{ requestId: 'stranger', login: lockOut }] }, opts), UNAUTHENTICATED, name);
      await assert.rejects(streamedBatch(stranger, [{ requestId: 'stranger', login: lockOut }]), UNAUTHENTICATED, name);
      await assert.rejects(call(stranger, stranger.getUser, { service: 'sync', email }, opts), UNAUTHENTICATED, name);
      await assert.rejects(call(stranger, stranger.unassignNode, { service: 'sync', node: before.node }, opts), UNAUTHENTICATED, name);
      // An import's writes: a reservation up to 2^53 would leave no uid to hand out; a record would take over an account.
      await assert.rejects(call(stranger, stranger.reserveUids, { upTo: Number.MAX_SAFE_INTEGER, dryRun: false }, opts), UNAUTHENTICATED, name);
      const taken = { ...before, uid: 1, replaced: [], seenClientStates: [] };
      await assert.rejects(call(stranger, stranger.importUsers, { users: [{ ...taken, email: freshEmail() }], dryRun: false }, opts), UNAUTHENTICATED, name);
    } finally {
      stranger.close();
    }
  }
  assert.deepEqual(await getUser(email), before);
  // The same calls with the secret work.
  assert.equal((await login(email, { generation: 6 })).generation, 6);
  const streamed = await streamedBatch(client, [{ requestId: 'friend', login: { service: 'sync', email, clientState: '', allowNewUsers: true, generation: 7 } }]);
  assert.equal(streamed.batch?.results[0]?.user?.generation, 7);
});

test('LoginBatch: each item decided as Login decides it, results in item order, one item\'s error only its own', async () => {
  const known = freshEmail();
  const before = await login(known, { generation: 7 });
  const fresh = freshEmail();
  const req = (email: string, o: Partial<LoginRequest> = {}): LoginRequest => ({ service: 'sync', email, clientState: '', allowNewUsers: true, ...o });
  const { results } = await call(
    client,
    client.loginBatch,
    {
      items: [
        { requestId: 'batch-1', login: req(known, { generation: 7 }) },
        { requestId: 'batch-2', login: req(known, { generation: 3 }) },
        { requestId: 'batch-3', login: req(fresh) },
        { requestId: 'batch-4', login: req('') },
        { requestId: 'batch-5', login: req(freshEmail(), { allowNewUsers: false }) },
        { requestId: 'batch-6' } as LoginBatchItem,
      ],
    },
    opts,
  );
  assert.equal(results.length, 6);
  assert.deepEqual(results[0].user, before);
  assert.ok(rebuiltError(results[1].error!, 10) instanceof InvalidGeneration, JSON.stringify(results[1]));
  assert.deepEqual(results[2].user, await getUser(fresh));
  assert.ok(rebuiltError(results[3].error!, 10) instanceof BadRequest, JSON.stringify(results[3]));
  assert.ok(rebuiltError(results[4].error!, 10) instanceof NewUsersDisabled, JSON.stringify(results[4]));
  assert.ok(rebuiltError(results[5].error!, 10) instanceof BadRequest, JSON.stringify(results[5]));
  assert.equal((await getUser(known)).generation, 7, 'the refused item wrote nothing');
});

test('LoginBatch: more items than MAX_BATCH_ITEMS → BadRequest for the call, nothing decided', async () => {
  const email = freshEmail();
  const items = Array.from({ length: MAX_BATCH_ITEMS + 1 }, () => ({ requestId: 'big', login: { service: 'sync', email, clientState: '', allowNewUsers: true } }));
  await assert.rejects(call(client, client.loginBatch, { items }, opts), BadRequest);
  await assert.rejects(getUser(email), RecordNotFound);
});

test('one user history through gRPC, with the protocol error classes coming back', async () => {
  const email = freshEmail();
  const first = await login(email, { clientState: 'orig' });
  assert.equal(first.generation, 0);
  assert.equal(first.node, '');
  const uid = first.uid;
  assert.equal((await login(email, { generation: 12, clientState: 'orig' })).uid, uid);
  assert.ok((await loginError(email, { generation: 10, clientState: 'orig' })) instanceof InvalidGeneration);
  assert.equal((await login(email, { generation: 12, clientState: 'orig' })).uid, uid);
  const g13 = await login(email, { generation: 13, clientState: 'orig' });
  assert.equal(g13.uid, uid);
  assert.equal(g13.generation, 13);
  assert.ok((await loginError(email, { generation: 12, clientState: 'orig' })) instanceof InvalidGeneration);
  const noGen = await loginError(email, { clientState: 'orig' });
  assert.ok(noGen instanceof InvalidGeneration, 'no generation once one is recorded counts as 0');
  assert.equal((await getUser(email)).generation, 13);
  assert.ok((await loginError(email, { generation: 13, clientState: 'aaaa' })) instanceof InvalidClientState);
  const moved = await login(email, { generation: 14, clientState: 'aaaa' });
  assert.notEqual(moved.uid, uid);
  assert.ok(moved.uid > uid);
  assert.deepEqual(moved.seenClientStates, ['orig']);
  assert.deepEqual(moved.replaced.map((r) => [r.uid, r.node]), [[uid, '']]);
  const stale = await loginError(email, { generation: 15, clientState: 'orig' });
  assert.ok(stale instanceof InvalidClientState);
  assert.equal(stale.statusString, 'invalid-client-state');
  assert.equal(stale.status, 401);
  assert.ok((await loginError(email, { generation: 15, clientState: '' })) instanceof InvalidClientState);
  assert.equal((await getUser(email)).uid, moved.uid);
});

test('new users off: unknown user → NewUsersDisabled (403), known user still logs in', async () => {
  const email = freshEmail();
  const err = await loginError(email, { allowNewUsers: false });
  assert.ok(err instanceof NewUsersDisabled);
  assert.equal(err.status, 403);
  await login(email);
  assert.ok(await login(email, { allowNewUsers: false }));
});

test('malformed requests → BadRequest, never an internal error', async () => {
  assert.ok((await loginError('')) instanceof BadRequest);
  assert.ok((await loginError(freshEmail(), { service: '' })) instanceof BadRequest);
  assert.ok((await loginError(freshEmail(), { clientState: 'not valid!' })) instanceof BadRequest);
  assert.ok((await loginError(freshEmail(), { generation: -1 })) instanceof InvalidGeneration);
  await assert.rejects(assignNode(freshEmail(), 1, ''), BadRequest);
  await assert.rejects(call(client, client.unassignNode, { service: 'sync', node: '' }, opts), BadRequest);
});

test('50 concurrent first logins of one new user → exactly one uid', async () => {
  const email = freshEmail();
  const users = await Promise.all(Array.from({ length: 50 }, () => login(email, { generation: 3, clientState: 'abcd' })));
  const uids = new Set(users.map((u) => u.uid));
  assert.equal(uids.size, 1);
  assert.equal((await getUser(email)).uid, users[0].uid);
});

test('concurrent logins with mixed generations never lower the recorded generation', async () => {
  const email = freshEmail();
  await login(email, { generation: 1 });
  // Rising order is the worst case: each round the lowest pending generation wins and the rest retry.
  const rising = Array.from({ length: 40 }, (_, i) => i + 1);
  const shuffled = rising.map((_, i) => ((i * 17) % 40) + 1);
  const gens = [...rising, ...shuffled];
  const results = await Promise.allSettled(gens.map((generation) => login(email, { generation })));
  let ok = 0;
  for (const [i, r] of results.entries()) {
    if (r.status === 'fulfilled') {
      ok++;
      assert.ok(r.value.generation >= gens[i], 'a reply never shows a generation below the request');
    } else {
      assert.ok(r.reason instanceof InvalidGeneration, String(r.reason));
    }
  }
  assert.ok(ok >= 1);
  const final = await getUser(email);
  assert.equal(final.generation, 40);
  assert.equal(new Set(results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.uid] : []))).size, 1);
});

test('a client-state change under concurrency → exactly one new uid', async () => {
  const email = freshEmail();
  const before = await login(email, { generation: 1, clientState: 'aaaa' });
  const users = await Promise.all(Array.from({ length: 20 }, () => login(email, { generation: 2, clientState: 'bbbb' })));
  const uids = new Set(users.map((u) => u.uid));
  assert.equal(uids.size, 1);
  assert.notEqual([...uids][0], before.uid);
  const final = await getUser(email);
  assert.equal(final.replaced.length, 1);
  assert.equal(final.replaced[0].uid, before.uid);
  assert.deepEqual(final.seenClientStates, ['aaaa']);
});

test('concurrent Bearer logins with mixed keys_changed_at (no generation) never lower kca or generation', async () => {
  const email = freshEmail();
  const bearer = { missingGenerationIsNone: true, clientState: 'aaaa' };
  await login(email, { ...bearer, keysChangedAt: 1 });
  const rising = Array.from({ length: 40 }, (_, i) => i + 1);
  const kcas = [...rising, ...rising.map((_, i) => ((i * 17) % 40) + 1)];
  const results = await Promise.allSettled(kcas.map((keysChangedAt) => login(email, { ...bearer, keysChangedAt })));
  for (const [i, r] of results.entries()) {
    if (r.status === 'fulfilled') {
      assert.ok((r.value.keysChangedAt ?? 0) >= kcas[i], 'a reply never shows a kca below the request');
      assert.ok(r.value.generation >= kcas[i], 'a rising kca raised the generation with it');
    } else {
      assert.ok(r.reason instanceof InvalidKeysChangedAt, String(r.reason));
    }
  }
  const final = await getUser(email);
  assert.equal(final.keysChangedAt, 40);
  assert.equal(final.generation, 40);
  assert.equal(new Set(results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.uid] : []))).size, 1, 'no state change, one uid');
});

test('a client-state change with a new keys_changed_at under concurrency → exactly one new uid', async () => {
  const email = freshEmail();
  const bearer = { missingGenerationIsNone: true };
  const before = await login(email, { ...bearer, keysChangedAt: 1000, generation: 1000, clientState: 'aaaa' });
  const results = await Promise.allSettled(
    Array.from({ length: 20 }, () => login(email, { ...bearer, keysChangedAt: 2000, generation: 2000, clientState: 'bbbb' })),
  );
  const uids = new Set(results.map((r) => (r.status === 'fulfilled' ? r.value.uid : assert.fail(String(r.reason)))));
  assert.equal(uids.size, 1);
  assert.notEqual([...uids][0], before.uid);
  const final = await getUser(email);
  assert.deepEqual([final.keysChangedAt, final.generation, final.replaced.length], [2000, 2000, 1]);
});

test('RetireUser: live records of every service become replaced ones, listed once; idempotent; the next login is a new uid', async () => {
  const email = freshEmail();
  const sync = await assignNode(email, (await login(email, { generation: 4 })).uid, 'https://n1.example');
  const notes = await call(client, client.login, { service: 'notes', email, clientState: '', allowNewUsers: true }, opts).then((r) => r.user!);
  const retire = (service = '') => call(client, client.retireUser, { email, service }, opts).then((r) => r.retired);
  assert.deepEqual(await retire(), [
    { service: 'notes', uid: notes.uid, node: '' },
    { service: 'sync', uid: sync.uid, node: 'https://n1.example' },
  ]);
  assert.deepEqual(await retire(), [], 'a second delivery retires nothing');
  const retired = await getUser(email);
  assert.equal(retired.uid, 0);
  assert.deepEqual(retired.replaced.map((r) => [r.uid, r.node, r.released]), [[sync.uid, 'https://n1.example', true]]);
  // A login after the deletion starts afresh: a new uid, generations from zero.
  const again = await login(email, { generation: 1 });
  assert.ok(again.uid > sync.uid);
  assert.equal(again.node, '');
  assert.equal(again.replaced.length, 1);
  // One service only.
  assert.deepEqual((await retire('sync')).map((r) => r.uid), [again.uid]);
  assert.deepEqual(await retire('notes'), []);
});

test('RetireUser under concurrency: each live uid is listed by exactly one call', async () => {
  const email = freshEmail();
  const live = await login(email);
  const replies = await Promise.all(Array.from({ length: 10 }, () => call(client, client.retireUser, { email, service: '' }, opts)));
  assert.deepEqual(replies.flatMap((r) => r.retired.map((x) => x.uid)), [live.uid]);
});

test('RaiseGeneration: raises every live record of the account, never lowers, idempotent', async () => {
  const email = freshEmail();
  await login(email, { generation: 10 });
  const raise = (generation: number) => call(client, client.raiseGeneration, { email, generation }, opts).then((r) => r.count);
  assert.equal(await raise(5), 0);
  assert.equal((await getUser(email)).generation, 10);
  assert.equal(await raise(99), 1);
  assert.equal(await raise(99), 0, 'a second delivery changes nothing');
  assert.equal((await getUser(email)).generation, 99);
  assert.ok((await loginError(email, { generation: 98 })) instanceof InvalidGeneration, 'older credentials are refused now');
  assert.equal(await call(client, client.raiseGeneration, { email: 'nobody@example.com', generation: 1 }, opts).then((r) => r.count), 0);
  await assert.rejects(call(client, client.raiseGeneration, { email: '', generation: 1 }, opts), BadRequest);
});

test('AssignNode: concurrent assignments → the first wins and everyone gets it', async () => {
  const email = freshEmail();
  const { uid } = await login(email);
  const nodes = Array.from({ length: 20 }, (_, i) => `https://node${i}.example.com`);
  const users = await Promise.all(nodes.map((node) => assignNode(email, uid, node)));
  const winners = new Set(users.map((u) => u.node));
  assert.equal(winners.size, 1);
  const [winner] = winners;
  assert.ok(nodes.includes(winner));
  assert.equal((await getUser(email)).node, winner);
  assert.equal((await login(email)).node, winner, 'login returns the assigned node');
});

test('AssignNode: a stale uid does not assign; a missing user → RecordNotFound', async () => {
  const email = freshEmail();
  const old = await login(email, { clientState: 'aaaa' });
  const moved = await login(email, { clientState: 'bbbb' });
  const reply = await assignNode(email, old.uid, 'https://late.example.com');
  assert.equal(reply.uid, moved.uid);
  assert.equal(reply.node, '');
  await assert.rejects(assignNode(freshEmail(), 1, 'https://n.example.com'), RecordNotFound);
});

test('GetUser of an unknown user → RecordNotFound (404) naming it', async () => {
  const email = freshEmail();
  await assert.rejects(getUser(email), (err: unknown) => err instanceof RecordNotFound && err.status === 404 && err.message === `no user ${email} in sync`);
});

test('UnassignNode clears the node of its users and counts them; their next login keeps the uid', async () => {
  const node = 'https://unassign-me.example.com';
  const a = freshEmail();
  const b = freshEmail();
  const c = freshEmail();
  for (const email of [a, b, c]) {
    const { uid } = await login(email);
    await assignNode(email, uid, email === c ? 'https://other.example.com' : node);
  }
  const { count } = await call(client, client.unassignNode, { service: 'sync', node }, opts);
  assert.equal(count, 2);
  const after = await login(a);
  assert.equal(after.node, '');
  assert.equal(after.uid, (await getUser(a)).uid);
  assert.equal((await getUser(c)).node, 'https://other.example.com');
});

test('login retries after losing a race: parallel first logins on one store insert once, the rest re-read', async () => {
  const t2 = tempStoreUrl('directory-race-');
  const store = SqliteUserStore.open(t2.storeUrl.slice('sqlite:'.length));
  let inserts = 0;
  let lostInserts = 0;
  const insert = store.insert.bind(store);
  store.insert = async (r) => {
    inserts++;
    const ok = await insert(r);
    if (!ok) lostInserts++;
    return ok;
  };
  try {
    const req = { service: 'sync', email: 'race@example.com', clientState: '', allowNewUsers: true };
    const users = await Promise.all(Array.from({ length: 50 }, () => applyLogin(store, req, POLICY)));
    assert.ok(lostInserts > 0, 'the parallel logins did race');
    assert.equal(inserts - lostInserts, 1);
    assert.equal(new Set(users.map((u) => u.uid)).size, 1);
  } finally {
    await store.close();
    t2.cleanup();
  }
});

test('an existing user with nothing to change costs one read and no write', async () => {
  const t2 = tempStoreUrl('directory-keep-');
  const store = SqliteUserStore.open(t2.storeUrl.slice('sqlite:'.length));
  const calls: string[] = [];
  for (const method of ['get', 'insert', 'replace', 'nextUid'] as const) {
    const real = (store[method] as (...a: unknown[]) => Promise<unknown>).bind(store);
    (store as unknown as Record<string, unknown>)[method] = (...a: unknown[]) => {
      calls.push(method);
      return real(...a);
    };
  }
  try {
    const req = { service: 'sync', email: 'keep@example.com', generation: 3, clientState: 'aaaa', allowNewUsers: true };
    const created = await applyLogin(store, req, POLICY);
    calls.length = 0;
    const again = await applyLogin(store, req, POLICY);
    assert.deepEqual(calls, ['get']);
    assert.equal(again.version, created.version);
    assert.equal(again.uid, created.uid);
  } finally {
    await store.close();
    t2.cleanup();
  }
});

test('LoginBatch reads every item in one getMany and writes its updates in one replaceMany', async () => {
  const t2 = tempStoreUrl('directory-batch-');
  const store = SqliteUserStore.open(t2.storeUrl.slice('sqlite:'.length));
  const calls: string[] = [];
  for (const method of ['get', 'getMany', 'insert', 'replace', 'replaceMany', 'nextUid'] as const) {
    const real = (store[method] as (...a: unknown[]) => Promise<unknown>).bind(store);
    (store as unknown as Record<string, unknown>)[method] = (...a: unknown[]) => {
      calls.push(method);
      return real(...a);
    };
  }
  try {
    const req = (i: number, generation: number): LoginRequest => ({ service: 'sync', email: `b${i}@example.com`, generation, clientState: 'aaaa', allowNewUsers: true });
    for (let i = 0; i < 6; i++) await applyLogin(store, req(i, 1), POLICY);
    calls.length = 0;
    // Three keep their record, two raise the generation, one is refused (an older generation).
    const gens = [1, 1, 1, 2, 3, 0];
    const { results } = await loginBatch(store, { items: gens.map((g, i) => ({ requestId: `b${i}`, login: req(i, g) })) }, POLICY, pino({ level: 'silent' }));
    assert.deepEqual(calls, ['getMany', 'replaceMany']);
    assert.deepEqual(results.map((r) => r.user?.generation ?? r.error?.errorClass), [1, 1, 1, 2, 3, 'InvalidGeneration']);
    assert.equal((await store.get('sync', 'b4@example.com'))?.generation, 3);
    calls.length = 0;
    // Two items of one user raising it from the same read: one write is made, the other item decides again alone.
    const race = await loginBatch(store, { items: [4, 5].map((g) => ({ requestId: `r${g}`, login: req(0, g) })) }, POLICY, pino({ level: 'silent' }));
    assert.deepEqual(calls, ['getMany', 'replaceMany', 'get', 'replace']);
    assert.deepEqual(race.results.map((r) => r.user?.generation), [4, 5]);
    assert.equal((await store.get('sync', 'b0@example.com'))?.generation, 5);
  } finally {
    await store.close();
    t2.cleanup();
  }
});

/** A unary call's raw outcome: the gRPC status code and details, or 0 when it succeeded. */
function rawStatus(send: (cb: (err: grpc.ServiceError | null) => void) => void): Promise<{ code: number; details: string }> {
  return new Promise((resolve) => send((err) => resolve(err ? { code: err.code, details: err.details } : { code: 0, details: '' })));
}

test('a request with an int64 beyond Number.MAX_SAFE_INTEGER, or bytes that are no request, is INVALID_ARGUMENT (BadRequest) and changes nothing', async () => {
  const email = freshEmail();
  const deadline = () => ({ deadline: Date.now() + 10_000 });
  // 2^60 is exact as a double, so the client encodes it; the server's decoder refuses it.
  const huge: LoginRequest = { service: 'sync', email, clientState: '', allowNewUsers: true, generation: 2 ** 60 };
  for (const req of [huge, { ...huge, generation: undefined, keysChangedAt: 2 ** 60 }]) {
    const status = await rawStatus((cb) => client.login(req, new grpc.Metadata(), deadline(), cb));
    assert.equal(status.code, grpc.status.INVALID_ARGUMENT, status.details);
    assert.match(status.details, /could not be decoded: Value is larger than Number\.MAX_SAFE_INTEGER/);
    await assert.rejects(call(client, client.login, req, opts), BadRequest);
  }
  const batch = await rawStatus((cb) => client.loginBatch({ items: [{ requestId: 'r', login: huge }] }, new grpc.Metadata(), deadline(), cb));
  assert.equal(batch.code, grpc.status.INVALID_ARGUMENT, batch.details);
  // Not a protobuf message at all: field 0 is no valid tag.
  const garbage = await rawStatus((cb) =>
    client.makeUnaryRequest('/tokenserver.directory.v1.Directory/Login', (b: Buffer) => b, (b: Buffer) => b, Buffer.from([0x00, 0xff]), new grpc.Metadata(), deadline(), cb),
  );
  assert.equal(garbage.code, grpc.status.INVALID_ARGUMENT, garbage.details);
  await assert.rejects(getUser(email), RecordNotFound, 'no record was made');
  assert.equal((await login(email, { generation: 5 })).generation, 5, 'the service still serves');
});

// ---- found missing by mutation testing: the admin, purge, event-token and import calls over gRPC ----

/** A Directory server of its own on `store` (a fresh uid counter for import tests), and its client; close() closes the store too. */
async function serveOn(store: SqliteUserStore): Promise<{ c: DirectoryClient; close: () => Promise<void> }> {
  const served = await serveWithStore(store, { definition: DirectoryService, implementation: directoryService(store, pino({ level: 'silent' }), POLICY), name: 'x' }, '127.0.0.1', 0, TEST_AUTH);
  const c = grpcClient(DirectoryClient, `127.0.0.1:${served.port}`, TEST_AUTH);
  return {
    c,
    close: async () => {
      c.close();
      await served.close();
    },
  };
}

/** An imported record of `uid` with no replaced uids, on the store contract's sample. */
const imported = (uid: number, email = `imp${uid}@example.com`): User => importSample({ email, uid, replaced: [] });

const refused = (re: RegExp) => (err: unknown) => err instanceof BadRequest && re.test(err.message);

test('ListUsers: pages of `limit` joined by an opaque cursor, an exactly full page followed by an empty one; limit 0 is the default page; limit outside 1..1000 or a cursor not from a page → BadRequest', async () => {
  const service = 'list-app';
  const emails = ['l1@example.com', 'l2@example.com', 'l3@example.com', 'l4@example.com'];
  for (const email of emails) await call(client, client.login, { service, email, clientState: '', allowNewUsers: true }, opts);
  const list = (limit: number, after = '') => call(client, client.listUsers, { service, replaced: false, limit, after }, opts);
  const first = await list(3);
  assert.deepEqual(first.users.map((u) => u.email), emails.slice(0, 3));
  assert.notEqual(first.next, '');
  const second = await list(3, first.next);
  assert.deepEqual(second.users.map((u) => u.email), emails.slice(3));
  assert.equal(second.next, '', 'a page short of the limit is the last');
  const full = await list(4);
  assert.equal(full.users.length, 4);
  assert.notEqual(full.next, '', 'a full page may have a successor');
  assert.deepEqual(await list(4, full.next), { users: [], next: '' });
  assert.deepEqual((await list(0)).users.map((u) => u.email), emails);
  assert.equal((await list(1000)).users.length, 4);
  assert.equal((await list(1)).users.length, 1);
  for (const limit of [-1, 1001]) await assert.rejects(list(limit), refused(/^limit must be 1 to 1000$/), String(limit));
  const cursor = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  for (const after of ['not-a-cursor!', cursor(['list-app']), cursor(['list-app', 'l1@example.com', 'x']), cursor([1, 'l1@example.com']), cursor(['list-app', 1]), cursor({ 0: 'a', 1: 'b', length: 2 })]) {
    await assert.rejects(list(2, after), refused(/^after: not a cursor from a previous page$/), after);
  }
  assert.deepEqual((await list(2, cursor(['list-app', 'l2@example.com']))).users.map((u) => u.email), emails.slice(2), 'a cursor is the position after which the page starts');
});

test('ClaimReplaced, DeleteReplaced: a replaced uid claimed, refused to another claimant, deleted by its claimant with its node; bad targets → BadRequest', async () => {
  const email = freshEmail();
  const old = await login(email, { clientState: 'aaaa' });
  await assignNode(email, old.uid, 'https://purge.example.com');
  await login(email, { clientState: 'bbbb' });
  const claimReq = { service: 'sync', email, uid: old.uid, claimant: 'purger-1', leaseMs: 60_000, replacedBefore: Date.now() + 1000 };
  const claim = (o: Partial<typeof claimReq> = {}) => call(client, client.claimReplaced, { ...claimReq, ...o }, opts);
  const del = (o: { uid?: number; claimant?: string } = {}) => call(client, client.deleteReplaced, { service: 'sync', email, uid: old.uid, claimant: 'purger-1', ...o }, opts);
  assert.deepEqual(await claim({ replacedBefore: 1 }), { claimed: false, reason: 'too-recent', replaced: undefined });
  const claimed = await claim();
  assert.equal(claimed.claimed, true);
  assert.equal(claimed.reason, '');
  assert.deepEqual({ ...claimed.replaced, replacedAt: 0 }, { uid: old.uid, node: 'https://purge.example.com', replacedAt: 0, released: false });
  assert.deepEqual(await claim({ claimant: 'purger-2' }), { claimed: false, reason: 'claimed', replaced: undefined });
  assert.deepEqual(await del({ claimant: 'purger-2' }), { deleted: false, reason: 'not-claimed', releaseSlot: false, node: '' });
  assert.deepEqual(await del(), { deleted: true, reason: '', releaseSlot: true, node: 'https://purge.example.com' });
  assert.deepEqual(await del(), { deleted: false, reason: 'gone', releaseSlot: false, node: '' });
  assert.deepEqual(await claim(), { claimed: false, reason: 'gone', replaced: undefined });
  assert.deepEqual((await getUser(email)).replaced, []);
  for (const [o, re] of [
    [{ uid: 0 }, /^uid must be a positive integer$/],
    [{ uid: -1 }, /^uid must be a positive integer$/],
    [{ claimant: '' }, /^claimant must be 1 to 255 characters$/],
    [{ claimant: 'c'.repeat(256) }, /^claimant must be 1 to 255 characters$/],
  ] as const) {
    await assert.rejects(claim(o), refused(re), JSON.stringify(o));
    await assert.rejects(del(o), refused(re), JSON.stringify(o));
  }
  for (const leaseMs of [0, -1]) await assert.rejects(claim({ leaseMs }), refused(/^lease_ms must be positive$/));
  assert.equal((await claim({ claimant: 'c'.repeat(255) })).reason, 'gone', '255 characters are a claimant');
  await assert.rejects(claim({ email: freshEmail() }), (e: unknown) => e instanceof RecordNotFound && /^no user user\d+@example\.com in sync$/.test(e.message));
  await assert.rejects(claim({ email: '' }), BadRequest);
});

test('TrimClientStates: keeps the newest `max` seen client states and says how many went; max below 0 → BadRequest', async () => {
  const email = freshEmail();
  for (const cs of ['aaaa', 'bbbb', 'cccc']) await login(email, { clientState: cs });
  const seen = (await getUser(email)).seenClientStates;
  assert.equal(seen.length, 2);
  const trim = (max: number) => call(client, client.trimClientStates, { service: 'sync', email, max }, opts).then((r) => r.removed);
  assert.equal(await trim(2), 0);
  assert.equal(await trim(1), 1);
  assert.deepEqual((await getUser(email)).seenClientStates, seen.slice(-1));
  assert.equal(await trim(0), 1);
  assert.equal(await trim(0), 0);
  assert.deepEqual((await getUser(email)).seenClientStates, []);
  await assert.rejects(trim(-1), refused(/^max must be a non-negative integer$/));
  await assert.rejects(call(client, client.trimClientStates, { service: 'sync', email: '', max: 1 }, opts), BadRequest);
});

test('ClaimEventToken, ReleaseEventToken: the first claim wins until released; a key not 64 lowercase hex, or an expiry not within the next day → BadRequest', async () => {
  const key = 'ab'.repeat(32);
  const claimToken = (k: string, expiresAt = Date.now() + 60_000) => call(client, client.claimEventToken, { key: k, expiresAt }, opts).then((r) => r.first);
  const release = (k: string) => call(client, client.releaseEventToken, { key: k }, opts);
  assert.equal(await claimToken(key), true);
  assert.equal(await claimToken(key), false, 'a replay');
  await release(key);
  assert.equal(await claimToken(key), true, 'released: claimable again');
  const day = 86_400_000;
  assert.equal(await claimToken('cd'.repeat(32), Date.now() + day - 5000), true, 'just within a day');
  for (const bad of ['AB'.repeat(32), 'ab'.repeat(31), `x${'ab'.repeat(32)}`, `${'ab'.repeat(32)}x`, 'g'.repeat(64), '']) {
    await assert.rejects(claimToken(bad), refused(/^key must be 64 lowercase hex characters$/), bad);
    await assert.rejects(release(bad), refused(/^key must be 64 lowercase hex characters$/), bad);
  }
  for (const expiresAt of [Date.now() - 1000, 0, -1, Date.now() + day + 60_000]) {
    await assert.rejects(claimToken('ef'.repeat(32), expiresAt), refused(/^expires_at must be in the future, at most a day ahead \(ms\)$/), String(expiresAt));
  }
});

test('GetUser, UnassignNode, RetireUser, RaiseGeneration, CountUsers: malformed requests → BadRequest with what is wrong; counts per service', async () => {
  await assert.rejects(call(client, client.getUser, { service: 'sync', email: '' }, opts), BadRequest);
  for (const req of [{ service: '', node: 'https://n.example' }, { service: 'sync', node: '' }]) {
    await assert.rejects(call(client, client.unassignNode, req, opts), refused(/^service and node are required$/));
  }
  await assert.rejects(call(client, client.retireUser, { email: freshEmail(), service: 'x'.repeat(300) }, opts), BadRequest);
  await assert.rejects(call(client, client.retireUser, { email: '', service: '' }, opts), BadRequest);
  await assert.rejects(call(client, client.raiseGeneration, { email: freshEmail(), generation: -1 }, opts), refused(/^generation must be a non-negative integer$/));
  const service = 'count-app';
  for (let i = 0; i < 3; i++) await call(client, client.login, { service, email: freshEmail(), clientState: '', allowNewUsers: true }, opts);
  const { counts } = await call(client, client.countUsers, { service }, opts);
  assert.equal(counts.length, 1);
  assert.equal(counts[0].service, service);
  assert.equal(counts[0].live, 3);
});

test('AssignNode says whether this call wrote the node, and how many slots of replaced uids on that node go back', async () => {
  const email = freshEmail();
  const a = await login(email, { clientState: 'aaaa' });
  await assignNode(email, a.uid, 'https://slots.example.com');
  const b = await login(email, { clientState: 'bbbb' });
  const first = await assignNodeReply(email, b.uid, 'https://slots.example.com');
  assert.equal(first.assigned, true);
  assert.equal(first.released, 1, 'the replaced uid held a slot on this node');
  const second = await assignNodeReply(email, b.uid, 'https://other.example.com');
  assert.equal(second.assigned, false);
  assert.equal(second.released, 0);
  assert.equal(second.user?.node, 'https://slots.example.com');
  await assert.rejects(assignNodeReply(email, b.uid, ''), refused(/^node is required$/));
});

test('LoginBatch: exactly MAX_BATCH_ITEMS items are decided; an item without a login is that item\'s BadRequest; a stream message without a batch answers an empty one, a refused batch its error', async () => {
  const items: LoginBatchItem[] = Array.from({ length: MAX_BATCH_ITEMS }, (_, i) => ({ requestId: `m${i}`, login: { service: 'sync', email: freshEmail(), clientState: '', allowNewUsers: true } }));
  const { results } = await call(client, client.loginBatch, { items }, opts);
  assert.equal(results.filter((r) => r.user).length, MAX_BATCH_ITEMS);
  const mixed = await call(client, client.loginBatch, { items: [{ requestId: 'none' } as LoginBatchItem, items[0]] }, opts);
  const missing = rebuiltError(mixed.results[0].error!, 10);
  assert.ok(missing instanceof BadRequest && missing.message === 'login is required', String(missing));
  assert.equal(mixed.results[1].user?.email, items[0].login!.email);
  const empty = await streamed(client, { id: 7 } as LoginStreamRequest);
  assert.equal(empty.id, 7);
  assert.deepEqual(empty.batch?.results, []);
  const tooMany = await streamedBatch(client, [...items, items[0]]);
  assert.equal(tooMany.batch, undefined);
  const err = rebuiltError(tooMany.error!, 10);
  assert.ok(err instanceof BadRequest && err.message === `at most ${MAX_BATCH_ITEMS} items per batch`, String(err));
});

test('ReserveUids and ImportUsers on a fresh store: a dry run changes nothing; uids only up to the reservation, at most 2^52; at most MAX_BATCH_ITEMS users per call', async () => {
  const store = SqliteUserStore.open(':memory:');
  const { c, close } = await serveOn(store);
  try {
    const reserve = (upTo: number, dryRun = false) => call(c, c.reserveUids, { upTo, dryRun }, opts);
    assert.deepEqual(await reserve(100, true), { previous: 0, current: 100 });
    assert.deepEqual(await store.uidCounter(), { value: 0, imported: 0 }, 'a dry run writes nothing');
    assert.deepEqual(await reserve(100), { previous: 0, current: 100 });
    assert.deepEqual(await store.uidCounter(), { value: 100, imported: 100 });
    assert.deepEqual(await reserve(50), { previous: 100, current: 100 }, 'never lowered');
    await assert.rejects(reserve(-1), refused(/^up_to must be a non-negative integer$/));
    await assert.rejects(reserve(2 ** 52 + 1), refused(/^up_to must be at most 4503599627370496, the highest uid an import may bring$/));
    assert.deepEqual(await reserve(2 ** 52, true), { previous: 100, current: 2 ** 52 }, '2^52 itself may be reserved');
    const importUsers = (users: User[], dryRun = false) => call(c, c.importUsers, { users, dryRun }, opts).then((r) => r.results);
    assert.deepEqual(await importUsers([imported(100)], true), [{ result: 'created', detail: '' }]);
    assert.equal(await store.get('sync', 'imp100@example.com'), null, 'a dry run writes nothing');
    const [above] = await importUsers([imported(101)]);
    assert.equal(above.result, 'invalid');
    assert.equal(above.detail, 'uid 101 is above the uids reserved for imports (100): ReserveUids first');
    assert.deepEqual(await importUsers([imported(100)]), [{ result: 'created', detail: '' }], 'the reserved top itself');
    assert.deepEqual(await importUsers([imported(100)]), [{ result: 'unchanged', detail: '' }]);
    const [taken] = await importUsers([imported(100, 'other@example.com')]);
    assert.equal(taken.result, 'conflict');
    assert.match(taken.detail, /100/);
    assert.equal(await store.get('sync', 'other@example.com'), null);
    const many = Array.from({ length: MAX_BATCH_ITEMS }, (_, i) => imported(i + 1));
    assert.equal((await importUsers(many, true)).length, MAX_BATCH_ITEMS);
    await assert.rejects(importUsers([...many, imported(99)], true), refused(new RegExp(`^at most ${MAX_BATCH_ITEMS} users per call$`)));
  } finally {
    await close();
  }
});

test('a write lost MAX_ATTEMPTS times in a row is a 503 asking to try again, after exactly that many attempts, for logins, assignments, retirements and reservations', async () => {
  const inner = SqliteUserStore.open(':memory:');
  // ReserveUids needs a store that has handed out no uid.
  const empty = SqliteUserStore.open(':memory:');
  const email = 'busy@example.com';
  await applyLogin(inner, { service: 'sync', email, clientState: '', allowNewUsers: true, generation: 1 }, POLICY);
  const { uid } = (await inner.get('sync', email))!;
  // Every compare-and-set loses, as if another writer always came first.
  const attempts = { replace: 0, setUidCounter: 0 };
  const store: SqliteUserStore = Object.create(inner);
  store.replace = async () => (attempts.replace++, false);
  const emptyStore: SqliteUserStore = Object.create(empty);
  emptyStore.setUidCounter = async () => (attempts.setUidCounter++, false);
  const busy = (e: unknown) => e instanceof ServiceUnavailable && e.message === 'too many concurrent updates of one user, try again';
  try {
    const runs: Array<[string, () => Promise<unknown>, keyof typeof attempts]> = [
      ['login', () => applyLogin(store, { service: 'sync', email, clientState: '', allowNewUsers: true, generation: 2 }, POLICY), 'replace'],
      ['assignNode', () => assignNodeOn(store, { service: 'sync', email, uid, node: 'https://n.example' }), 'replace'],
      ['retireUser', () => retireUser(store, { email, service: '' }), 'replace'],
      ['reserveUids', () => reserveUids(emptyStore, { upTo: 10, dryRun: false }), 'setUidCounter'],
    ];
    for (const [name, run, counted] of runs) {
      attempts[counted] = 0;
      await assert.rejects(run(), busy, name);
      assert.equal(attempts[counted], 50, name);
    }
  } finally {
    await inner.close();
    await empty.close();
  }
});

test('ImportUsers races: a uid another import wrote meanwhile is a conflict naming its holder; an account another writer created meanwhile is decided on its record', async () => {
  const inner = SqliteUserStore.open(':memory:');
  await reserveUids(inner, { upTo: 100, dryRun: false });
  const store: SqliteUserStore = Object.create(inner);
  try {
    // The uid index refuses the insert: another account took uid 7 between the check and the write.
    store.insert = async () => {
      throw new UidTaken([{ service: 'sync', email: 'first@example.com', uid: 7 }]);
    };
    assert.deepEqual((await importUsers(store, { users: [imported(7, 'second@example.com')], dryRun: false })).results, [
      { result: 'conflict', detail: "uid 7 is another account's here (sync first@example.com)" },
    ]);
    // A failure other than the uid index is the call's.
    store.insert = async () => {
      throw new Error('disk full');
    };
    await assert.rejects(importUsers(store, { users: [imported(8, 'third@example.com')], dryRun: false }), /disk full/);
    // The account was created by another writer first, with the same record: unchanged, not created twice.
    store.insert = async (record) => {
      await inner.insert(record);
      return false;
    };
    assert.deepEqual((await importUsers(store, { users: [imported(9, 'fourth@example.com')], dryRun: false })).results, [{ result: 'unchanged', detail: '' }]);
  } finally {
    await inner.close();
  }
});

test('RetireUser of one service leaves the account\'s other services live', async () => {
  const email = freshEmail();
  const sync = await login(email);
  const notes = await call(client, client.login, { service: 'notes', email, clientState: '', allowNewUsers: true }, opts).then((r) => r.user!);
  assert.deepEqual(
    (await call(client, client.retireUser, { email, service: 'sync' }, opts)).retired.map((r) => [r.service, r.uid]),
    [['sync', sync.uid]],
  );
  assert.equal((await call(client, client.getUser, { service: 'notes', email }, opts)).user?.uid, notes.uid);
});
