// The NodeStore contract on MongoDB: at MONGODB_URL (the compatible server
// npm test starts) and on a real mongo:7 through testcontainers; each test on
// a fresh database. Without a server, each test is skipped with the reason.
//
// Where the compatible server (mongo-java-server 1.47) differs from MongoDB in
// what these stores use; the code stays correct for MongoDB:
//  - findOneAndUpdate's post-image ('after') can show another writer's change
//    under concurrency (its pre-image is exact): the stores read the pre-image
//    and apply the known update; "parallel claims … each claim saw its own
//    increment" and "nextUid is unique under 50 parallel calls" catch a regression.
//  - no aggregation-pipeline updates: ratio moves by $inc of 1/capacity instead.
//  - no explain: the index-plan test below runs on a real MongoDB only.
//  - it announces wire version 8, below what driver v7 accepts; its launcher
//    (tools/compat-mongo) announces 5.0.
import { after, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, type Document } from 'mongodb';
import { loadRatio, MongoNodeStore } from './store-mongo.js';
import { openNodeStore } from './open-store.js';
import { nodeStoreContract, sampleNode } from './store.contract.js';
import { MongoUserStore } from '../directory/store-mongo.js';
import { sampleUser } from '../directory/store.contract.js';
import { containerMongo, envFerret, envMongo, freshDatabase, type MongoTarget } from '../../tests/support/mongo.js';

test('loadRatio: load over capacity; a node without capacity counts as full', () => {
  assert.equal(loadRatio(0, 10), 0);
  assert.equal(loadRatio(5, 10), 0.5);
  assert.equal(loadRatio(12, 10), 1.2);
  assert.equal(loadRatio(0, 0), 1);
  assert.equal(loadRatio(3, 0), 1);
});

// FerretDB 1.24 has no $expr comparisons in $match ("The operator $lt is not implemented yet"), which
// the allocation query needs (a node's load against its own capacity); MongoDB has had them since 3.6.
// So the nodes store runs on the other servers only, and says so once per test.
const NO_EXPR = 'FerretDB 1.24 implements no $expr comparisons in $match, which allocation needs (MongoDB: since 3.6)';
const ferret = envFerret();
const targets = [envMongo(), { ...ferret, url: null, skipReason: ferret.url ? NO_EXPR : ferret.skipReason }, await containerMongo()];
after(() => Promise.all(targets.map((t) => t.stop())));

/** Writes a node document directly, bypassing the store (to fake states the store never writes). */
async function rawUpdate(url: string, filter: Document, update: Document): Promise<void> {
  const client = new MongoClient(url);
  try {
    await client.db().collection('nodes').updateOne(filter, update);
  } finally {
    await client.close();
  }
}

for (const target of targets) {
  nodeStoreContract(target.name, async () => (target.url ? MongoNodeStore.open(freshDatabase(target, 'nodes')) : null), () => target.skipReason, target.deviations);

  const it = (title: string, fn: (target: MongoTarget, t: TestContext) => Promise<void>) =>
    test(`${target.name}: ${title}`, async (t) => {
      const reason = target.url ? target.deviations?.[title] : target.skipReason;
      if (reason) {
        t.skip(reason);
        return;
      }
      await fn(target, t);
    });

  const urls = (ns: Array<{ url: string }>) => ns.map((n) => n.url.replace(/^https:\/\/|\.example\.com$/g, ''));

  it('claims and capacity changes keep the candidates order in step with the load', async (target) => {
    const store = await MongoNodeStore.open(freshDatabase(target, 'order'));
    try {
      await store.add(sampleNode({ url: 'https://a.example.com', capacity: 10, available: 10 }));
      await store.add(sampleNode({ url: 'https://b.example.com', capacity: 10, currentLoad: 2, available: 10 }));
      assert.deepEqual(urls(await store.candidates('sync', 5)), ['a', 'b']);
      for (let i = 0; i < 3; i++) await store.claim('sync', 'https://a.example.com');
      assert.deepEqual(urls(await store.candidates('sync', 5)), ['b', 'a'], 'a at 3/10 is now above b at 2/10');
      await store.update('sync', 'https://a.example.com', { capacity: 100 });
      assert.deepEqual(urls(await store.candidates('sync', 5)), ['a', 'b'], 'a at 3/100 is below b again');
      await store.update('sync', 'https://b.example.com', { capacity: 2 });
      assert.deepEqual(urls(await store.candidates('sync', 5)), ['a'], 'b at 2/2 is full');
    } finally {
      await store.close();
    }
  });

  it('candidates check the load itself, not only the stored ratio', async (target) => {
    const url = freshDatabase(target, 'ratio');
    const store = await MongoNodeStore.open(url);
    try {
      await store.add(sampleNode({ url: 'https://full.example.com', capacity: 4, currentLoad: 4, available: 2 }));
      await store.add(sampleNode({ url: 'https://ok.example.com', capacity: 4, currentLoad: 1, available: 2 }));
      // A ratio a little off (a float sum of 1/capacity steps) must not let a full node through.
      await rawUpdate(url, { url: 'https://full.example.com' }, { $set: { ratio: 0.9999999999 } });
      assert.deepEqual(urls(await store.candidates('sync', 5)), ['ok']);
      assert.deepEqual(await store.candidates('sync', 0), [], 'limit 0 is no candidates, not "no limit"');
    } finally {
      await store.close();
    }
  });

  it('openNodeStore(mongodb://…) and the users store share one database', async (target) => {
    const url = freshDatabase(target, 'shared');
    const nodes = await openNodeStore(url);
    const users = await MongoUserStore.open(url);
    try {
      assert.equal(await nodes.add(sampleNode()), true);
      assert.equal(await users.insert(sampleUser()), true);
      await nodes.close();
      // The shared client stays open for the users store.
      assert.equal((await users.get('sync', 'alice@example.com'))?.uid, 1);
      const again = await openNodeStore(url);
      assert.equal((await again.list()).length, 1);
      await again.close();
    } finally {
      await users.close();
    }
  });

  it('candidates are served by the candidates index, without a sort stage', async (target, t) => {
    const store = await MongoNodeStore.open(freshDatabase(target, 'plan'));
    try {
      for (let i = 0; i < 20; i++) await store.add(sampleNode({ url: `https://n${i}.example.com`, currentLoad: i }));
      let plan: Document;
      try {
        plan = await store.explainCandidates('sync', 3);
      } catch (err) {
        // The compatible server (mongo-java-server) has no explain command; a real MongoDB runs this test.
        t.skip(`this server cannot explain queries (${(err as Error).message})`);
        return;
      }
      const winning = JSON.stringify(plan.queryPlanner.winningPlan);
      assert.match(winning, /"IXSCAN"/);
      assert.match(winning, /"indexName":"candidates"/);
      assert.doesNotMatch(winning, /"stage":"SORT"/);
      // 3 wanted out of 20 eligible: the scan stops early instead of reading them all.
      assert.ok(plan.executionStats.totalKeysExamined <= 5, `keys examined: ${plan.executionStats.totalKeysExamined}`);
    } finally {
      await store.close();
    }
  });
}
