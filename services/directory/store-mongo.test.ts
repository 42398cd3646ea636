// The UserStore contract on MongoDB: at MONGODB_URL (the compatible server
// npm test starts) and on a real mongo:7 through testcontainers; each test on
// a fresh database. Without a server, each test is skipped with the reason.
// (How the compatible server differs from MongoDB: see
// services/nodeassign/store-mongo.test.ts. For users: racing upserts of the
// counter returned duplicate values there, so the uid counter is created at
// open and nextUid only ever $inc's an existing document.)
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { MongoUserStore } from './store-mongo.js';
import { openUserStore } from './open-store.js';
import { sampleUser, userStoreContract } from './store.contract.js';
import { containerMongo, envFerret, envMongo, freshDatabase, type MongoTarget } from '../../tests/support/mongo.js';

const targets = [envMongo(), envFerret(), await containerMongo()];
after(() => Promise.all(targets.map((t) => t.stop())));

for (const target of targets) {
  const skipReason = () => target.skipReason;
  const open = async () => (target.url ? MongoUserStore.open(freshDatabase(target, 'users')) : null);

  userStoreContract(target.name, open, skipReason, target.deviations);

  const it = (title: string, fn: (target: MongoTarget) => Promise<void>) =>
    test(`${target.name}: ${title}`, async (t) => {
      const reason = target.url ? target.deviations?.[title] : target.skipReason;
      if (reason) {
        t.skip(reason);
        return;
      }
      await fn(target);
    });

  it('openUserStore(mongodb://…) keeps records and the uid counter across reopen', async (target) => {
    const url = freshDatabase(target, 'reopen');
    const store = await openUserStore(url);
    await store.insert(sampleUser({ uid: 5 }));
    const uid = await store.nextUid();
    await store.close();
    const again = await openUserStore(url);
    assert.equal((await again.get('sync', 'alice@example.com'))?.uid, 5);
    assert.ok((await again.nextUid()) > uid, 'the uid counter survives a reopen');
    await again.close();
  });

  it('two stores on one database never share a uid and see each other’s inserts', async (target) => {
    const url = freshDatabase(target, 'two');
    const [a, b] = await Promise.all([MongoUserStore.open(url), MongoUserStore.open(url)]);
    const uids = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).nextUid()));
    assert.equal(new Set(uids).size, 20);
    assert.equal(await a.insert(sampleUser()), true);
    assert.equal(await b.insert(sampleUser({ uid: 2 })), false);
    await a.close();
    await b.close();
  });

  it('a database from before the uid index gets it built from its records; records sharing a uid stop the start, named', async (target) => {
    const url = freshDatabase(target, 'uidindex');
    const old = (uid: number) => ({ uid, node: 'https://n.example', replacedAt: 1, released: false });
    const store = await MongoUserStore.open(url);
    await store.insert(sampleUser({ email: 'alice@x', uid: 17 }));
    await store.insert(sampleUser({ email: 'alice2@x', uid: 18 }));
    await store.insert(sampleUser({ email: 'bob@x', uid: 20, replaced: [old(21)] }));
    await store.close();
    const client = new MongoClient(url);
    try {
      const db = client.db();
      const forget = async () => {
        await db.collection('uids').deleteMany({});
        await db.collection<{ _id: string }>('counters').deleteOne({ _id: 'uid_index' });
      };
      await forget();
      const rebuilt = await MongoUserStore.open(url);
      assert.deepEqual((await rebuilt.uidHolders([17, 21])).map((h) => [h.uid, h.email]), [
        [17, 'alice@x'],
        [21, 'bob@x'],
      ]);
      await rebuilt.close();
      await forget();
      await db.collection('users').updateOne({ email: 'bob@x' }, { $set: { uid: 17, replaced: [old(18)] } });
      await assert.rejects(MongoUserStore.open(url), (e: Error) => /^the users store holds uids on more than one account \(uid 17: .*alice@x.*; uid 18: .*alice2@x/.test(e.message) && /bob@x/.test(e.message));
      await assert.rejects(MongoUserStore.open(url), /uid 17/, 'it refuses again');
    } finally {
      await client.close();
    }
  });

  it('stored documents hold only the record fields (no stray properties from the caller)', async (target) => {
    const url = freshDatabase(target, 'fields');
    const store = await MongoUserStore.open(url);
    const extra = { ...sampleUser(), password: 'not stored' } as ReturnType<typeof sampleUser>;
    assert.equal(await store.insert(extra), true);
    assert.deepEqual(await store.get('sync', 'alice@example.com'), sampleUser());
    await store.close();
  });

  it('documents written before keysChangedAt (or stateChanges) existed read as none', async (target) => {
    const url = freshDatabase(target, 'oldkca');
    const store = await MongoUserStore.open(url);
    const client = new MongoClient(url);
    try {
      const { keysChangedAt: _k, stateChanges: _s, ...old } = sampleUser({ email: 'old@example.com', generation: 3 });
      await client.db().collection('users').insertOne({ ...old });
      const rec = await store.get('sync', 'old@example.com');
      assert.equal(rec?.keysChangedAt, null);
      assert.deepEqual(rec?.stateChanges, []);
      assert.equal(await store.replace({ ...rec!, keysChangedAt: 1234, version: 2 }, 1), true);
      assert.equal((await store.get('sync', 'old@example.com'))?.keysChangedAt, 1234);
    } finally {
      await client.close();
      await store.close();
    }
  });

  it('uids go past 2^31 (the counter is 64-bit)', async (target) => {
    const url = freshDatabase(target, 'biguid');
    const store = await MongoUserStore.open(url);
    const client = new MongoClient(url);
    try {
      // Jump the fresh counter close to 2^31 the way later increments would get there.
      await client.db().collection<{ _id: string; value: number }>('counters').updateOne({ _id: 'uid' }, { $inc: { value: 2 ** 31 - 3 } });
      const uids = [await store.nextUid(), await store.nextUid(), await store.nextUid(), await store.nextUid()];
      assert.deepEqual(uids, [2 ** 31 - 2, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1]);
    } finally {
      await client.close();
      await store.close();
    }
  });
}
