// The NodeStore contract: one suite every implementation (SQLite, MongoDB)
// must pass. A store file's test calls nodeStoreContract() with an opener that
// returns a fresh, empty store per test, or null when its backend is missing
// (then each test is skipped with the reason printed).
import assert from 'node:assert/strict';
import { storeTest, type StoreOpener } from '../directory/store.contract.js';
import { BadRequest } from '../../lib/errors.js';
import { importNode } from './service.js';
import type { NodeRecord, NodeStore } from './store.js';

export function sampleNode(overrides: Partial<NodeRecord> = {}): NodeRecord {
  return {
    service: 'sync',
    url: 'https://node1.example.com',
    capacity: 100,
    currentLoad: 0,
    available: 10,
    downed: false,
    backoff: false,
    ...overrides,
  };
}

export function nodeStoreContract(
  name: string,
  open: StoreOpener<NodeStore>,
  skipReason?: () => string | undefined,
  deviations?: Readonly<Record<string, string>>,
): void {
  const it = (title: string, fn: (store: NodeStore) => Promise<void>) => storeTest(name, open, skipReason, title, fn, deviations);

  it('get on an empty store is null; list is empty; ping answers', async (store) => {
    await store.ping();
    assert.equal(await store.get('sync', 'https://node1.example.com'), null);
    assert.deepEqual(await store.list(), []);
    assert.deepEqual(await store.list('sync'), []);
  });

  it('add then get returns the node field for field', async (store) => {
    const node = sampleNode({ capacity: 7, currentLoad: 3, available: 2, downed: true, backoff: true });
    assert.equal(await store.add(node), true);
    assert.deepEqual(await store.get('sync', node.url), node);
  });

  it('add of an existing (service, url) is refused and keeps the first node', async (store) => {
    const first = sampleNode();
    assert.equal(await store.add(first), true);
    assert.equal(await store.add(sampleNode({ capacity: 5 })), false);
    assert.deepEqual(await store.get('sync', first.url), first);
  });

  it('the same url may serve two services as two nodes', async (store) => {
    assert.equal(await store.add(sampleNode()), true);
    assert.equal(await store.add(sampleNode({ service: 'notes', capacity: 3 })), true);
    assert.equal((await store.get('notes', 'https://node1.example.com'))?.capacity, 3);
    assert.equal((await store.get('sync', 'https://node1.example.com'))?.capacity, 100);
  });

  it('list orders by service then url and filters by service', async (store) => {
    const nodes = [
      sampleNode({ service: 'sync', url: 'https://c.example.com' }),
      sampleNode({ service: 'notes', url: 'https://b.example.com' }),
      sampleNode({ service: 'sync', url: 'https://a.example.com' }),
      sampleNode({ service: 'notes', url: 'https://a.example.com' }),
    ];
    for (const n of nodes) await store.add(n);
    const key = (n: NodeRecord) => `${n.service} ${n.url}`;
    assert.deepEqual((await store.list()).map(key), [
      'notes https://a.example.com',
      'notes https://b.example.com',
      'sync https://a.example.com',
      'sync https://c.example.com',
    ]);
    assert.deepEqual((await store.list('sync')).map(key), ['sync https://a.example.com', 'sync https://c.example.com']);
    assert.deepEqual(await store.list('other'), []);
  });

  it('update applies only the given fields and returns the updated node', async (store) => {
    const node = sampleNode({ currentLoad: 4, available: 6 });
    await store.add(node);
    const a = await store.update('sync', node.url, { downed: true });
    assert.deepEqual(a, { ...node, downed: true });
    const b = await store.update('sync', node.url, { capacity: 50, backoff: true, downed: false });
    assert.deepEqual(b, { ...node, capacity: 50, backoff: true });
    assert.deepEqual(await store.get('sync', node.url), b);
    assert.deepEqual(await store.update('sync', node.url, {}), b, 'an empty patch changes nothing');
  });

  it('update of a missing node is null and creates nothing', async (store) => {
    assert.equal(await store.update('sync', 'https://nope.example.com', { downed: true }), null);
    assert.deepEqual(await store.list(), []);
  });

  it('remove returns the removed node; a second remove is null', async (store) => {
    const node = sampleNode();
    await store.add(node);
    await store.add(sampleNode({ service: 'notes' }));
    assert.deepEqual(await store.remove('sync', node.url), node);
    assert.equal(await store.get('sync', node.url), null);
    assert.equal(await store.remove('sync', node.url), null);
    assert.ok(await store.get('notes', node.url), 'the other service keeps its node');
  });

  it('candidates: only eligible nodes of the service, lowest load ratio first, at most limit', async (store) => {
    const add = (url: string, o: Partial<NodeRecord>) => store.add(sampleNode({ url: `https://${url}.example.com`, ...o }));
    await add('half', { capacity: 10, currentLoad: 5, available: 3 }); // 0.5
    await add('empty', { capacity: 1000, currentLoad: 0, available: 1 }); // 0
    await add('tenth', { capacity: 100, currentLoad: 10, available: 5 }); // 0.1
    await add('most', { capacity: 4, currentLoad: 3, available: 1 }); // 0.75
    await add('quarter', { capacity: 4, currentLoad: 1, available: 1 }); // 0.25
    // Not eligible, each for one reason:
    await add('noslots', { capacity: 100, currentLoad: 0, available: 0 });
    await add('full', { capacity: 10, currentLoad: 10, available: 5 });
    await add('zerocap', { capacity: 0, currentLoad: 0, available: 5 });
    await add('downed', { capacity: 100, currentLoad: 0, available: 5, downed: true });
    await add('backoff', { capacity: 100, currentLoad: 0, available: 5, backoff: true });
    await store.add(sampleNode({ service: 'notes', url: 'https://other.example.com', currentLoad: 0, available: 5 }));

    const urls = (ns: NodeRecord[]) => ns.map((n) => n.url.replace(/^https:\/\/|\.example\.com$/g, ''));
    assert.deepEqual(urls(await store.candidates('sync', 10)), ['empty', 'tenth', 'quarter', 'half', 'most']);
    assert.deepEqual(urls(await store.candidates('sync', 2)), ['empty', 'tenth']);
    assert.deepEqual(urls(await store.candidates('notes', 10)), ['other']);
    assert.deepEqual(await store.candidates('nothing', 10), []);
    const [first] = await store.candidates('sync', 1);
    assert.deepEqual(first, sampleNode({ url: 'https://empty.example.com', capacity: 1000, currentLoad: 0, available: 1 }));
  });

  it('claim counts one user, takes one slot and returns the updated node', async (store) => {
    const node = sampleNode({ capacity: 10, currentLoad: 2, available: 3 });
    await store.add(node);
    const claimed = await store.claim('sync', node.url);
    assert.deepEqual(claimed, { ...node, currentLoad: 3, available: 2 });
    assert.deepEqual(await store.get('sync', node.url), claimed);
  });

  it('claim refuses a node that is not eligible and leaves it unchanged', async (store) => {
    const cases: Array<Partial<NodeRecord>> = [
      { url: 'https://noslots.example.com', available: 0 },
      { url: 'https://full.example.com', capacity: 5, currentLoad: 5, available: 2 },
      { url: 'https://downed.example.com', downed: true },
      { url: 'https://backoff.example.com', backoff: true },
    ];
    for (const c of cases) {
      const node = sampleNode(c);
      await store.add(node);
      assert.equal(await store.claim('sync', node.url), null, node.url);
      assert.deepEqual(await store.get('sync', node.url), node);
    }
    assert.equal(await store.claim('sync', 'https://missing.example.com'), null);
    assert.equal(await store.claim('notes', 'https://noslots.example.com'), null);
  });

  it('parallel claims never exceed available', async (store) => {
    const node = sampleNode({ capacity: 100, currentLoad: 0, available: 5 });
    await store.add(node);
    const results = await Promise.all(Array.from({ length: 30 }, () => store.claim('sync', node.url)));
    assert.equal(results.filter((r) => r !== null).length, 5);
    const loads = results.filter((r) => r !== null).map((r) => r!.currentLoad).sort((a, b) => a - b);
    assert.deepEqual(loads, [1, 2, 3, 4, 5], 'each claim saw its own increment');
    const after = await store.get('sync', node.url);
    assert.equal(after?.currentLoad, 5);
    assert.equal(after?.available, 0);
  });

  it('parallel claims never exceed capacity', async (store) => {
    const node = sampleNode({ capacity: 4, currentLoad: 1, available: 50 });
    await store.add(node);
    const results = await Promise.all(Array.from({ length: 30 }, () => store.claim('sync', node.url)));
    assert.equal(results.filter((r) => r !== null).length, 3);
    const after = await store.get('sync', node.url);
    assert.equal(after?.currentLoad, 4);
    assert.equal(after?.available, 47);
  });

  it('setLoad is a compare-and-set on the load; slots move with it, never below 0', async (store) => {
    const node = sampleNode({ capacity: 10, currentLoad: 7, available: 0 });
    await store.add(node);
    const lowered = await store.setLoad('sync', node.url, 7, 4);
    assert.equal(lowered?.currentLoad, 4);
    assert.equal(lowered?.available, 3, 'three leaked slots come back');
    assert.deepEqual(await store.get('sync', node.url), lowered);
    // The node is a candidate again, ranked by its new load.
    assert.deepEqual((await store.candidates('sync', 5)).map((n) => n.url), [node.url]);
    assert.equal(await store.setLoad('sync', node.url, 7, 2), null, 'the load is not 7 any more');
    await store.claim('sync', node.url);
    assert.equal(await store.setLoad('sync', node.url, 4, 2), null, 'a claim since the read is not lost');
    assert.equal((await store.get('sync', node.url))?.currentLoad, 5);
    const raised = await store.setLoad('sync', node.url, 5, 9);
    assert.equal(raised?.currentLoad, 9);
    assert.equal(raised?.available, 0, 'slots never go below 0');
    assert.equal(await store.setLoad('sync', 'https://missing.example.com', 0, 1), null);
  });

  it('setAvailable is a compare-and-set on load and available', async (store) => {
    const node = sampleNode({ capacity: 10, currentLoad: 4, available: 0 });
    await store.add(node);
    assert.equal(await store.setAvailable(node, 3), true);
    assert.equal((await store.get('sync', node.url))?.available, 3);
    assert.equal(await store.setAvailable(node, 6), false, 'available changed since node was read');
    const now = (await store.get('sync', node.url))!;
    await store.claim('sync', node.url);
    assert.equal(await store.setAvailable(now, 6), false, 'load changed since now was read');
    const final = await store.get('sync', node.url);
    assert.equal(final?.available, 2);
    assert.equal(final?.currentLoad, 5);
    assert.equal(await store.setAvailable(sampleNode({ url: 'https://missing.example.com' }), 1), false);
  });

  it('parallel setAvailable from the same read: exactly one wins', async (store) => {
    const node = sampleNode({ capacity: 100, currentLoad: 10, available: 0 });
    await store.add(node);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => store.setAvailable(node, i + 1)));
    assert.equal(results.filter(Boolean).length, 1);
    assert.equal((await store.get('sync', node.url))?.available, results.indexOf(true) + 1);
  });

  it('releasable lists the nodes of the service without slots but with room that are not down, in backoff or not, by url', async (store) => {
    const add = (url: string, o: Partial<NodeRecord>) => store.add(sampleNode({ url: `https://${url}.example.com`, ...o }));
    await add('b-exhausted', { capacity: 10, currentLoad: 0, available: 0 });
    await add('a-exhausted', { capacity: 10, currentLoad: 3, available: 0 });
    await add('c-backoff', { capacity: 10, currentLoad: 3, available: 0, backoff: true });
    await add('d-overdrawn', { capacity: 10, currentLoad: 9, available: -2 });
    await add('has-slots', { capacity: 10, currentLoad: 3, available: 1 });
    await add('downed', { capacity: 10, currentLoad: 3, available: 0, downed: true });
    await add('full', { capacity: 10, currentLoad: 10, available: 0 });
    await add('over', { capacity: 10, currentLoad: 12, available: 0 });
    await add('zerocap', { capacity: 0, currentLoad: 0, available: 0 });
    await store.add(sampleNode({ service: 'notes', url: 'https://other.example.com', available: 0 }));
    const urls = (ns: NodeRecord[]) => ns.map((n) => n.url.replace(/^https:\/\/|\.example\.com$/g, ''));
    assert.deepEqual(urls(await store.releasable('sync')), ['a-exhausted', 'b-exhausted', 'c-backoff', 'd-overdrawn']);
    const [a] = await store.releasable('sync');
    assert.deepEqual(a, sampleNode({ url: 'https://a-exhausted.example.com', capacity: 10, currentLoad: 3, available: 0 }));
    assert.deepEqual(urls(await store.releasable('notes')), ['other']);
    assert.deepEqual(await store.releasable('nothing'), []);
  });

  it('release gives back one slot: load − 1, available + 1; at load 0 nothing changes; a missing node is null', async (store) => {
    const node = sampleNode({ capacity: 10, currentLoad: 2, available: 0 });
    await store.add(node);
    assert.deepEqual(await store.release('sync', node.url), { ...node, currentLoad: 1, available: 1 });
    assert.deepEqual(await store.release('sync', node.url), { ...node, currentLoad: 0, available: 2 });
    assert.deepEqual(await store.release('sync', node.url), { ...node, currentLoad: 0, available: 2 });
    assert.deepEqual(await store.get('sync', node.url), { ...node, currentLoad: 0, available: 2 });
    assert.equal(await store.release('sync', 'https://missing.example.com'), null);
    assert.equal((await store.candidates('sync', 5)).length, 1, 'a released node is a candidate again');
  });

  it('parallel releases and claims keep the load exact', async (store) => {
    const node = sampleNode({ capacity: 100, currentLoad: 50, available: 50 });
    await store.add(node);
    await Promise.all([
      ...Array.from({ length: 20 }, () => store.release('sync', node.url)),
      ...Array.from({ length: 10 }, () => store.claim('sync', node.url)),
    ]);
    assert.deepEqual(await store.get('sync', node.url), { ...node, currentLoad: 40, available: 60 });
  });

  it('replace writes every field when the stored node still equals the expected one, and nothing otherwise', async (store) => {
    const node = sampleNode({ capacity: 10, currentLoad: 2, available: 3 });
    await store.add(node);
    const next = { ...node, capacity: 500, currentLoad: 120, available: 7, downed: true, backoff: true };
    assert.equal(await store.replace(next, { ...node, currentLoad: 3 }), false, 'a stale load fails the guard');
    assert.deepEqual(await store.get('sync', node.url), node);
    assert.equal(await store.replace(next, node), true);
    assert.deepEqual(await store.get('sync', node.url), next);
    assert.equal(await store.replace(node, sampleNode({ url: 'https://missing.example.com' })), false);
    // The candidate index follows the new load and flags.
    assert.deepEqual(await store.candidates('sync', 5), []);
    assert.equal(await store.replace({ ...next, downed: false, backoff: false }, next), true);
    assert.deepEqual((await store.candidates('sync', 5)).map((n) => n.currentLoad), [120]);
  });

  it('importNode adds a node with its load and slots, overwrites a differing one, and reports an equal one unchanged', async (store) => {
    const node = sampleNode({ capacity: 800, currentLoad: 640, available: 12, backoff: true });
    assert.deepEqual(await importNode(store, { node, dryRun: true }), { result: 'created', node });
    assert.equal(await store.get('sync', node.url), null, 'a dry run writes nothing');
    assert.deepEqual(await importNode(store, { node, dryRun: false }), { result: 'created', node });
    assert.deepEqual(await store.get('sync', node.url), node);
    assert.deepEqual(await importNode(store, { node, dryRun: false }), { result: 'unchanged', node });
    const registered = { ...node, capacity: 1000, currentLoad: 0, available: 100, backoff: false };
    await store.replace(registered, node);
    assert.deepEqual(await importNode(store, { node, dryRun: true }), { result: 'updated', node: registered });
    assert.deepEqual(await importNode(store, { node, dryRun: false }), { result: 'updated', node });
    assert.deepEqual(await store.get('sync', node.url), node);
    await assert.rejects(importNode(store, { node: { ...node, url: 'https://n.example.com/' }, dryRun: false }), BadRequest);
    await assert.rejects(importNode(store, { node: { ...node, currentLoad: -1 }, dryRun: false }), /current_load must be a non-negative integer/);
  });
}
