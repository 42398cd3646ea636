// The NodeAssign service over real gRPC on a loopback port, on a temp SQLite file.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { NodeAssignClient, NodeAssignService, type LoadCheck, type Node, type UpdateNodeRequest } from '../../lib/gen/nodeassign.js';
import { call, grpcClient, startServer } from '../../lib/grpc.js';
import { logger } from '../../lib/log.js';
import { NodeAssignMetrics } from '../../lib/metrics.js';
import { BadRequest, Conflict, NoNodeAvailable, ProtocolError, RecordNotFound, ServiceUnavailable } from '../../lib/errors.js';
import { eventually, healthStatus, tempStoreUrl, TEST_AUTH, UNAUTHENTICATED, WRONG_AUTHS } from '../../tests/support/services.js';
import { startNodeAssign, type RunningNodeAssign } from './server.js';
import { allocate, importNode, MAX_LOAD_CHECKS, MAX_ROUNDS, nodeAssignService, reconcileLoad } from './service.js';
import { SqliteNodeStore } from './store-sqlite.js';
import type { NodeStore } from './store.js';
import { sampleNode } from './store.contract.js';

const RELEASE_RATE = 0.1;
const temp = tempStoreUrl('nodeassign-service-');
let server: RunningNodeAssign;
let client: NodeAssignClient;

before(async () => {
  server = await startNodeAssign({ storeUrl: temp.storeUrl, port: 0, releaseRate: RELEASE_RATE, auth: TEST_AUTH });
  client = grpcClient(NodeAssignClient, `127.0.0.1:${server.port}`, TEST_AUTH);
});

after(async () => {
  client.close();
  await server.close();
  temp.cleanup();
});

const opts = { deadlineMs: 10_000, retryAfter: 7 };
let services = 0;
/** Each test works on its own application, so tests do not see each other's nodes. */
const freshService = () => `app${++services}`;

const addNode = (service: string, url: string, capacity: number) =>
  call(client, client.addNode, { service, url, capacity }, opts).then((r) => r.node!);
const updateNode = (req: UpdateNodeRequest) => call(client, client.updateNode, req, opts).then((r) => r.node!);
const listNodes = (service: string) => call(client, client.listNodes, { service }, opts).then((r) => r.nodes);
const removeNode = (service: string, url: string) => call(client, client.removeNode, { service, url }, opts).then((r) => r.node!);
const allocateNode = (service: string) => call(client, client.allocate, { service }, opts).then((r) => r.node!);

async function settle(promises: Array<Promise<Node>>): Promise<{ nodes: Node[]; errors: ProtocolError[] }> {
  const results = await Promise.allSettled(promises);
  const nodes: Node[] = [];
  const errors: ProtocolError[] = [];
  for (const r of results) {
    if (r.status === 'fulfilled') nodes.push(r.value);
    else {
      assert.ok(r.reason instanceof ProtocolError, String(r.reason));
      errors.push(r.reason);
    }
  }
  return { nodes, errors };
}

test('health check answers SERVING for the server and the NodeAssign service', async () => {
  assert.equal(await healthStatus(server.port, ''), 'SERVING');
  assert.equal(await healthStatus(server.port, 'tokenserver.nodeassign.v1.NodeAssign'), 'SERVING');
});

test('without the internal secret, or with a wrong one, every call is UNAUTHENTICATED and adds nothing', async () => {
  const service = freshService();
  for (const { name, auth } of WRONG_AUTHS) {
    const stranger = grpcClient(NodeAssignClient, `127.0.0.1:${server.port}`, auth);
    try {
      await assert.rejects(call(stranger, stranger.addNode, { service, url: 'https://evil.example', capacity: 1000 }, opts), UNAUTHENTICATED, name);
      await assert.rejects(call(stranger, stranger.listNodes, { service }, opts), UNAUTHENTICATED, name);
      await assert.rejects(call(stranger, stranger.allocate, { service }, opts), UNAUTHENTICATED, name);
      const node = { service, url: 'https://evil.example', capacity: 1000, currentLoad: 0, available: 1000, downed: false, backoff: false };
      await assert.rejects(call(stranger, stranger.importNode, { node, dryRun: false }, opts), UNAUTHENTICATED, name);
    } finally {
      stranger.close();
    }
  }
  assert.deepEqual(await listNodes(service), []);
  // The same call with the secret works.
  await call(client, client.addNode, { service, url: 'https://node.example', capacity: 10 }, opts);
  assert.deepEqual((await listNodes(service)).map((n) => n.url), ['https://node.example']);
});

test('AddNode opens ceil(capacity × release rate) slots; a duplicate → Conflict', async () => {
  const service = freshService();
  const node = await addNode(service, 'https://n1.example.com', 95);
  assert.deepEqual(node, { service, url: 'https://n1.example.com', capacity: 95, currentLoad: 0, available: 10, downed: false, backoff: false });
  await assert.rejects(addNode(service, 'https://n1.example.com', 5), (e: unknown) => e instanceof Conflict && e.status === 409 && e.message === `node https://n1.example.com exists already for ${service}`);
  assert.equal((await listNodes(service))[0].capacity, 95, 'the first node stays');
});

test('admin RPCs reject bad input with BadRequest', async () => {
  const service = freshService();
  await assert.rejects(addNode(service, 'https://n.example.com/', 5), BadRequest);
  await assert.rejects(addNode(service, 'not a url', 5), BadRequest);
  await assert.rejects(addNode(service, 'https://n.example.com', -1), BadRequest);
  await assert.rejects(addNode('', 'https://n.example.com', 5), BadRequest);
  await assert.rejects(updateNode({ service, url: 'https://n.example.com', capacity: -5 }), BadRequest);
  await assert.rejects(removeNode(service, ''), BadRequest);
  await assert.rejects(allocateNode(''), BadRequest);
  assert.deepEqual(await listNodes(service), []);
});

test('UpdateNode changes capacity, downed and backoff; a missing node → RecordNotFound', async () => {
  const service = freshService();
  const url = 'https://n.example.com';
  await addNode(service, url, 10);
  assert.equal((await updateNode({ service, url, downed: true })).downed, true);
  const n = await updateNode({ service, url, capacity: 20, backoff: true });
  assert.deepEqual([n.capacity, n.downed, n.backoff], [20, true, true], 'fields not given are kept');
  const back = await updateNode({ service, url, downed: false, backoff: false });
  assert.deepEqual([back.capacity, back.downed, back.backoff], [20, false, false]);
  await assert.rejects(updateNode({ service, url: 'https://missing.example.com', downed: true }), (e: unknown) => e instanceof RecordNotFound && e.message === `no node https://missing.example.com for ${service}`);
});

test('ListNodes by service and for every service; RemoveNode returns the node, then RecordNotFound', async () => {
  const a = freshService();
  const b = freshService();
  await addNode(a, 'https://y.example.com', 1);
  await addNode(a, 'https://x.example.com', 1);
  await addNode(b, 'https://x.example.com', 1);
  assert.deepEqual((await listNodes(a)).map((n) => n.url), ['https://x.example.com', 'https://y.example.com']);
  const all = (await listNodes('')).filter((n) => n.service === a || n.service === b).map((n) => `${n.service} ${n.url}`);
  assert.deepEqual(all, [`${a} https://x.example.com`, `${a} https://y.example.com`, `${b} https://x.example.com`]);
  assert.equal((await removeNode(a, 'https://x.example.com')).url, 'https://x.example.com');
  await assert.rejects(removeNode(a, 'https://x.example.com'), (e: unknown) => e instanceof RecordNotFound && e.status === 404 && e.message === `no node https://x.example.com for ${a}`);
  assert.equal((await listNodes(b)).length, 1);
});

test('Allocate: no node → NoNodeAvailable (503) with the caller\'s Retry-After', async () => {
  const err = await allocateNode(freshService()).catch((e: unknown) => e);
  assert.ok(err instanceof NoNodeAvailable, String(err));
  assert.equal(err.status, 503);
  assert.equal(err.headers['Retry-After'], '7');
});

test('Allocate: downed, backed-off and full nodes are never chosen', async () => {
  const service = freshService();
  await addNode(service, 'https://down.example.com', 100);
  await addNode(service, 'https://back.example.com', 100);
  await addNode(service, 'https://zero.example.com', 0);
  await updateNode({ service, url: 'https://down.example.com', downed: true });
  await updateNode({ service, url: 'https://back.example.com', backoff: true });
  await assert.rejects(allocateNode(service), NoNodeAvailable);
  await updateNode({ service, url: 'https://back.example.com', backoff: false });
  assert.equal((await allocateNode(service)).url, 'https://back.example.com');
});

test('Allocate: spreads users to the least loaded node by load/capacity', async () => {
  const service = freshService();
  await addNode(service, 'https://big.example.com', 300);
  await addNode(service, 'https://small.example.com', 100);
  const picks: string[] = [];
  for (let i = 0; i < 8; i++) picks.push((await allocateNode(service)).url);
  const nodes = await listNodes(service);
  const load = Object.fromEntries(nodes.map((n) => [n.url, n.currentLoad]));
  assert.deepEqual(load, { 'https://big.example.com': 6, 'https://small.example.com': 2 });
  assert.equal(picks[0], 'https://big.example.com', 'ties (both empty) go to the lowest url');
});

test('Allocate under concurrency never exceeds capacity, and fills it completely', async () => {
  const service = freshService();
  await addNode(service, 'https://a.example.com', 7);
  await addNode(service, 'https://b.example.com', 5);
  const { nodes, errors } = await settle(Array.from({ length: 30 }, () => allocateNode(service)));
  assert.equal(nodes.length, 12);
  assert.equal(errors.length, 18);
  assert.ok(errors.every((e) => e instanceof NoNodeAvailable), errors.map((e) => e.name).join());
  const after = await listNodes(service);
  for (const n of after) assert.equal(n.currentLoad, n.capacity, n.url);
  // Each successful reply saw its own increment: no load value was handed out twice per node.
  for (const url of ['https://a.example.com', 'https://b.example.com']) {
    const loads = nodes.filter((n) => n.url === url).map((n) => n.currentLoad).sort((x, y) => x - y);
    assert.deepEqual(loads, Array.from({ length: loads.length }, (_, i) => i + 1), url);
  }
});

test('Allocate releases ceil(capacity × rate) slots, at most the room left, when every node is exhausted', async () => {
  const service = freshService();
  const url = 'https://r.example.com';
  await addNode(service, url, 25); // 3 slots to start with
  const loads: number[] = [];
  for (let i = 0; i < 4; i++) loads.push((await allocateNode(service)).currentLoad);
  assert.deepEqual(loads, [1, 2, 3, 4]);
  let [n] = await listNodes(service);
  assert.equal(n.available, 2, 'the 4th allocation released 3 more slots and took one');
  for (let i = 0; i < 21; i++) await allocateNode(service);
  [n] = await listNodes(service);
  assert.equal(n.currentLoad, 25);
  assert.equal(n.available, 0, 'released slots never go beyond capacity');
  await assert.rejects(allocateNode(service), NoNodeAvailable);
});

test('Allocate releases slots on nodes in backoff too, so one has slots the moment its backoff ends', async () => {
  const service = freshService();
  const [open, back] = ['https://open.example.com', 'https://back.example.com'];
  await addNode(service, open, 20); // 2 slots each
  await addNode(service, back, 20);
  for (let i = 0; i < 4; i++) await allocateNode(service);
  await updateNode({ service, url: back, backoff: true });
  // No slots anywhere: the release round opens slots on both, and the user goes to the open node.
  assert.equal((await allocateNode(service)).url, open);
  const released = Object.fromEntries((await listNodes(service)).map((n) => [n.url, n.available]));
  assert.deepEqual(released, { [open]: 1, [back]: 2 });
  // Back from backoff with slots of its own: it is chosen (less loaded) without another release round.
  await updateNode({ service, url: back, backoff: false });
  const next = await allocateNode(service);
  assert.equal(next.url, back);
  assert.equal(next.available, 1);
});

test('Allocate on an exhausted node under concurrency: releases never push the load beyond capacity', async () => {
  const service = freshService();
  const url = 'https://rc.example.com';
  await addNode(service, url, 40); // 4 slots
  for (let i = 0; i < 4; i++) await allocateNode(service);
  const { nodes, errors } = await settle(Array.from({ length: 50 }, () => allocateNode(service)));
  assert.equal(nodes.length, 36);
  assert.equal(errors.length, 14);
  const [n] = await listNodes(service);
  assert.equal(n.currentLoad, 40);
});

test('allocate on a store with 10,000 nodes reads only a few candidates', async () => {
  const t = tempStoreUrl('nodeassign-many-');
  const store = SqliteNodeStore.open(t.storeUrl.slice('sqlite:'.length));
  try {
    for (let i = 0; i < 10_000; i++) {
      await store.add(sampleNode({ url: `https://n${String(i).padStart(5, '0')}.example.com`, capacity: 100, currentLoad: 50 + (i % 50), available: 5 }));
    }
    await store.add(sampleNode({ url: 'https://emptiest.example.com', capacity: 1000, currentLoad: 1, available: 5 }));
    let read = 0;
    const candidates = store.candidates.bind(store);
    store.candidates = async (service, limit) => {
      const found = await candidates(service, limit);
      read += found.length;
      return found;
    };
    const node = await allocate(store, 'sync', RELEASE_RATE);
    assert.equal(node.url, 'https://emptiest.example.com');
    assert.ok(read <= 8, `read ${read} candidates`);
  } finally {
    await store.close();
    t.cleanup();
  }
});

/** A store whose `candidates` or `claim` waits at a gate the test opens: a store slower than the caller's deadline. */
function gatedStore(inner: SqliteNodeStore, at: 'candidates' | 'claim') {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let reached!: () => void;
  const waiting = new Promise<void>((resolve) => (reached = resolve));
  const calls = { claim: 0, release: 0 };
  const store: NodeStore = Object.create(inner);
  store.candidates = async (service, limit) => {
    if (at === 'candidates') {
      reached();
      await gate;
    }
    return inner.candidates(service, limit);
  };
  store.claim = async (service, url) => {
    calls.claim++;
    const claimed = await inner.claim(service, url);
    if (at === 'claim') {
      reached();
      await gate;
    }
    return claimed;
  };
  store.release = async (service, url) => {
    calls.release++;
    return inner.release(service, url);
  };
  return { store, open, waiting, calls };
}

for (const { at, ending } of [
  { at: 'candidates', ending: 'deadline' },
  { at: 'candidates', ending: 'cancel' },
  { at: 'claim', ending: 'deadline' },
  { at: 'claim', ending: 'cancel' },
] as const) {
  test(`Allocate whose caller is gone (${ending}) while the store is slow in ${at} leaves the load unchanged, counted as abandoned`, async () => {
    const inner = SqliteNodeStore.open(':memory:');
    const gated = gatedStore(inner, at);
    const metrics = new NodeAssignMetrics();
    const running = await startServer([{ definition: NodeAssignService, implementation: nodeAssignService(gated.store, logger('nodeassign'), RELEASE_RATE, metrics), name: 'x' }], '127.0.0.1', 0, TEST_AUTH);
    const c = grpcClient(NodeAssignClient, `127.0.0.1:${running.port}`, TEST_AUTH);
    try {
      await inner.add(sampleNode({ url: 'https://n.example', capacity: 10, currentLoad: 0, available: 10 }));
      const failed = new Promise<grpc.ServiceError>((resolve, reject) => {
        // Long enough to reach the gate on a loaded machine; the gate holds until the deadline passed.
        const pending = c.allocate({ service: 'sync' }, new grpc.Metadata(), { deadline: Date.now() + (ending === 'deadline' ? 1000 : 60_000) }, (err) =>
          err ? resolve(err) : reject(new Error('allocate succeeded')),
        );
        if (ending === 'cancel') void gated.waiting.then(() => pending.cancel());
      });
      await gated.waiting;
      const err = await failed;
      assert.equal(err.code, ending === 'deadline' ? grpc.status.DEADLINE_EXCEEDED : grpc.status.CANCELLED);
      // The client gives up at once; its RST_STREAM reaches the server a moment later, and the server's own
      // deadline, counted from when the call arrived, passes a moment later too (under load, tens of ms).
      await new Promise((r) => setTimeout(r, 200));
      gated.open();
      if (at === 'claim') {
        // The claim landed after the caller left: it is given back.
        await eventually('the slot to be given back', () => gated.calls.release === 1, { timeoutMs: 3000, pollMs: 10 });
      } else {
        // Give the handler time to go on after the gate: it must not claim.
        await new Promise((r) => setTimeout(r, 200));
        assert.equal(gated.calls.claim, 0, 'no claim for a caller that is gone');
      }
      const node = await inner.get('sync', 'https://n.example');
      assert.equal(node?.currentLoad, 0);
      assert.equal(node?.available, 10);
      // Once, under the caller's application.
      assert.match((await metrics.page()).body, /^nodeassign_abandoned_claims_total\{application="sync",service="nodeassign"\} 1$/m);
    } finally {
      c.close();
      await running.close();
      await inner.close();
    }
  });
}

test('ReconcileLoads: dry run reports the drift and changes nothing; then sets the load by compare-and-set, counting the drift in the gauge', async () => {
  const metrics = new NodeAssignMetrics();
  const store = SqliteNodeStore.open(':memory:');
  const running = await startServer([{ definition: NodeAssignService, implementation: nodeAssignService(store, logger('nodeassign'), RELEASE_RATE, metrics), name: 'x' }], '127.0.0.1', 0, TEST_AUTH);
  const c = grpcClient(NodeAssignClient, `127.0.0.1:${running.port}`, TEST_AUTH);
  const reconcile = (checks: LoadCheck[], dryRun: boolean) => call(c, c.reconcileLoads, { checks, dryRun }, opts).then((r) => r.results.map((x) => x.outcome));
  try {
    await store.add(sampleNode({ url: 'https://a.example', capacity: 10, currentLoad: 7, available: 0 }));
    await store.add(sampleNode({ url: 'https://b.example', capacity: 10, currentLoad: 2, available: 3 }));
    const checks = [
      { service: 'sync', url: 'https://a.example', load: 7, expected: 4 },
      { service: 'sync', url: 'https://b.example', load: 2, expected: 2 },
      { service: 'sync', url: 'https://missing.example', load: 1, expected: 0 },
    ];
    assert.deepEqual(await reconcile(checks, true), ['found', 'ok', 'found']);
    assert.equal((await store.get('sync', 'https://a.example'))?.currentLoad, 7, 'a dry run changes nothing');
    const page = (await metrics.page()).body;
    assert.match(page, /nodeassign_load_drift\{[^}]*application="sync"[^}]*node="https:\/\/a\.example"[^}]*\} 3/);
    assert.match(page, /nodeassign_load_drift\{[^}]*node="https:\/\/b\.example"[^}]*\} 0/);
    // A claim between the caller's read and the write is not lost: that node is reported changed.
    await store.claim('sync', 'https://b.example');
    const stale = { service: 'sync', url: 'https://b.example', load: 2, expected: 1 };
    assert.deepEqual(await reconcile([...checks.slice(0, 1), stale, checks[2]!], false), ['corrected', 'changed', 'gone']);
    const a = await store.get('sync', 'https://a.example');
    assert.equal(a?.currentLoad, 4);
    assert.equal(a?.available, 3);
    assert.equal((await store.get('sync', 'https://b.example'))?.currentLoad, 3);
    await assert.rejects(reconcile([{ service: 'sync', url: 'https://a.example', load: -1, expected: 0 }], false), BadRequest);
  } finally {
    c.close();
    await running.close();
    await store.close();
  }
});

// Found missing by mutation testing (npm run mutation -- services/nodeassign/service.ts).

test('ImportNode: a dry run stores nothing; then created, unchanged and updated, each as given; no node → BadRequest', async () => {
  const service = freshService();
  const url = 'https://imported.example.com';
  const node = sampleNode({ service, url, capacity: 50, currentLoad: 20, available: 3 });
  // Over gRPC, unlike the importNode() of service.js the tests below call directly.
  const importOverGrpc = (n: Node | undefined, dryRun: boolean) => call(client, client.importNode, { node: n, dryRun }, opts);
  assert.deepEqual(await importOverGrpc(node, true), { result: 'created', node });
  assert.deepEqual(await listNodes(service), [], 'a dry run stores nothing');
  assert.deepEqual(await importOverGrpc(node, false), { result: 'created', node });
  assert.deepEqual(await importOverGrpc(node, false), { result: 'unchanged', node });
  const changed = { ...node, currentLoad: 30, downed: true };
  assert.deepEqual(await importOverGrpc(changed, true), { result: 'updated', node }, 'a dry run answers with the node as stored');
  assert.deepEqual(await listNodes(service), [node]);
  assert.deepEqual(await importOverGrpc(changed, false), { result: 'updated', node: changed });
  assert.deepEqual(await listNodes(service), [changed]);
  await assert.rejects(importOverGrpc(undefined, false), (e: unknown) => e instanceof BadRequest && e.message === 'node is required');
});

test('Release gives one slot back and answers the node; an unknown node → RecordNotFound; bad input → BadRequest', async () => {
  const service = freshService();
  const url = 'https://released.example.com';
  await addNode(service, url, 10);
  const taken = await allocateNode(service);
  assert.equal(taken.currentLoad, 1);
  const release = (u: string) => call(client, client.release, { service, url: u }, opts).then((r) => r.node!);
  const back = await release(url);
  assert.deepEqual([back.url, back.currentLoad, back.available], [url, 0, taken.available + 1]);
  await assert.rejects(release('https://missing.example.com'), (e: unknown) => e instanceof RecordNotFound && e.message === `no node https://missing.example.com for ${service}`);
  await assert.rejects(release('not a url'), BadRequest);
});

test('ReconcileLoads takes at most MAX_LOAD_CHECKS checks a call', async () => {
  const service = freshService();
  const check = { service, url: 'https://n.example.com', load: 0, expected: 0 };
  const reconcile = (n: number) => call(client, client.reconcileLoads, { checks: Array.from({ length: n }, () => check), dryRun: true }, opts);
  assert.equal((await reconcile(MAX_LOAD_CHECKS)).results.length, MAX_LOAD_CHECKS);
  await assert.rejects(reconcile(MAX_LOAD_CHECKS + 1), (e: unknown) => e instanceof BadRequest && e.message === `at most ${MAX_LOAD_CHECKS} checks per call`);
});

/** `inner` with `candidates` and `get` counted, and `claim` or `replace` always losing the race when told to. */
function losingStore(inner: SqliteNodeStore, loses: { claim?: boolean; replace?: boolean }) {
  const counts = { candidates: 0, get: 0 };
  const store: NodeStore = Object.create(inner);
  store.candidates = (service, limit) => {
    counts.candidates++;
    return inner.candidates(service, limit);
  };
  store.get = (service, url) => {
    counts.get++;
    return inner.get(service, url);
  };
  if (loses.claim) store.claim = async () => null;
  if (loses.replace) store.replace = async () => false;
  return { store, counts };
}

test('allocate: claims lost every round end after MAX_ROUNDS; a full service with no slot to release fails after one', async () => {
  const inner = SqliteNodeStore.open(':memory:');
  try {
    await inner.add(sampleNode({ service: 'contended', url: 'https://n.example', capacity: 10, currentLoad: 0, available: 5 }));
    const lost = losingStore(inner, { claim: true });
    await assert.rejects(allocate(lost.store, 'contended', RELEASE_RATE), NoNodeAvailable);
    assert.equal(lost.counts.candidates, MAX_ROUNDS);
    await inner.add(sampleNode({ service: 'full', url: 'https://n.example', capacity: 10, currentLoad: 10, available: 0 }));
    const full = losingStore(inner, {});
    await assert.rejects(allocate(full.store, 'full', RELEASE_RATE), (e: unknown) => e instanceof NoNodeAvailable && e.message === 'no node has room for new users of full');
    assert.equal(full.counts.candidates, 1);
  } finally {
    await inner.close();
  }
});

test('ImportNode whose compare-and-set loses every round gives up after MAX_ROUNDS with a 503', async () => {
  const inner = SqliteNodeStore.open(':memory:');
  try {
    const node = sampleNode({ url: 'https://busy.example' });
    await inner.add(node);
    const lost = losingStore(inner, { replace: true });
    await assert.rejects(
      importNode(lost.store, { node: { ...node, currentLoad: 5 }, dryRun: false }),
      (e: unknown) => e instanceof ServiceUnavailable && e.message === 'node https://busy.example is too busy to import now',
    );
    assert.equal(lost.counts.get, MAX_ROUNDS);
  } finally {
    await inner.close();
  }
});

test('reconcileLoad refuses a negative expected load; a correction is counted under its application', async () => {
  const inner = SqliteNodeStore.open(':memory:');
  try {
    await inner.add(sampleNode({ service: 'sync', url: 'https://drift.example', currentLoad: 3 }));
    const metrics = new NodeAssignMetrics();
    // The node counts 3; its records call for 2.
    const check = { service: 'sync', url: 'https://drift.example', load: 3, expected: 2 };
    await assert.rejects(reconcileLoad(inner, { ...check, expected: -1 }, false, metrics), (e: unknown) => e instanceof BadRequest && e.message === 'load and expected must be non-negative integers');
    assert.equal(await reconcileLoad(inner, check, false, metrics), 'corrected');
    assert.match((await metrics.page()).body, /^nodeassign_load_corrections_total\{application="sync",service="nodeassign"\} 1$/m);
  } finally {
    await inner.close();
  }
});
