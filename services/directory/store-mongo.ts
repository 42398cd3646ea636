// UserStore on MongoDB. Every write is one single-document atomic operation
// (insert under a unique index, replace guarded by the version, $inc on a
// counter), so it is correct on a replica set or a sharded cluster; the batch
// methods send many such operations in one command. Collections
// `users` and `counters` share the database with the nodes store.
import { Long, MongoBulkWriteError, type AnyBulkWriteOperation, type BulkWriteResult, type Collection, type Filter } from 'mongodb';
import { InternalError } from '../../lib/errors.js';
import { ensureIndexes, isDuplicateKey, mongoCall, openMongo, type MongoHandle } from '../../lib/mongo.js';
import {
  duplicateUidsMessage,
  mergeCounts,
  recordUids,
  safeCounter,
  UidTaken,
  type GuardedWrite,
  type ListQuery,
  type NodeCount,
  type ReplacedUser,
  type UidCounter,
  type UidHolder,
  type UserKey,
  type UserRecord,
  type UserStore,
} from './store.js';

/** Documents written before these fields existed lack them. */
type UserDoc = Omit<UserRecord, 'stateChanges' | 'replaced' | 'keysChangedAt'> & {
  stateChanges?: number[];
  keysChangedAt?: number | null;
  replaced: Array<Omit<ReplacedUser, 'released'> & { released?: boolean }>;
};

/** A claimed security event token (DESIGN §10), kept until `expiresAt`. */
interface EventTokenDoc {
  _id: string;
  expiresAt: Date;
}

/** The uid index: one document per uid, keyed by it, naming the account that holds it. */
interface UidDoc {
  _id: number;
  service: string;
  email: string;
}

interface CounterDoc {
  _id: string;
  value: Long | number;
  /** The uid counter only: how far imports reserved it; missing until the first import. */
  imported?: Long | number;
}

/** The driver hands back a number while it is below 2^53 (promoteLongs); beyond, a Long, which is refused rather than rounded. */
function counterNumber(v: Long | number | undefined): number {
  return v === undefined ? 0 : typeof v === 'number' ? safeCounter(v) : safeCounter(v.toBigInt());
}

/** The counters document that says the uid index was built from the records. */
const UID_INDEX_BUILT = 'uid_index';
/** How many duplicate uids the start-up error names. */
const LISTED_DUPLICATES = 20;

const UID_COUNTER = 'uid';

/** Exactly the record's fields, so nothing else (an _id, a stray property) is stored or returned. */
function toDoc(r: UserRecord): UserRecord {
  return fromDoc(r);
}

function fromDoc(r: UserDoc): UserRecord {
  return {
    service: r.service,
    email: r.email,
    uid: r.uid,
    node: r.node,
    generation: r.generation,
    // Documents without the field read as "none" (DESIGN §9.2).
    keysChangedAt: r.keysChangedAt ?? null,
    clientState: r.clientState,
    seenClientStates: [...r.seenClientStates],
    replaced: r.replaced.map((x) => ({
      uid: x.uid,
      node: x.node,
      replacedAt: x.replacedAt,
      released: x.released ?? false,
      ...(x.claim ? { claim: { by: x.claim.by, until: x.claim.until } } : {}),
    })),
    stateChanges: [...(r.stateChanges ?? [])],
    createdAt: r.createdAt,
    version: r.version,
  };
}

/** Records are read without the _id the server adds: fromDoc drops it anyway. */
const NO_ID = { projection: { _id: 0 } } as const;

const keyOf = (k: UserKey) => JSON.stringify([k.service, k.email]);

/** One find for many keys: per service, its e-mails by $in (the unique (service, email) index serves each branch). */
function manyKeysFilter(keys: readonly UserKey[]): Filter<UserDoc> {
  const byService = new Map<string, Set<string>>();
  for (const { service, email } of keys) {
    let emails = byService.get(service);
    if (!emails) byService.set(service, (emails = new Set()));
    emails.add(email);
  }
  const branches = [...byService].map(([service, emails]) => ({ service, email: { $in: [...emails] } }));
  return branches.length === 1 ? branches[0] : { $or: branches };
}

export class MongoUserStore implements UserStore {
  private constructor(
    private readonly handle: MongoHandle,
    private readonly users: Collection<UserDoc>,
    private readonly counters: Collection<CounterDoc>,
    private readonly eventTokens: Collection<EventTokenDoc>,
    private readonly uids: Collection<UidDoc>,
  ) {}

  /** Connects (sharing the process's client for that server) and creates indexes and the uid counter if missing. */
  static async open(url: string): Promise<MongoUserStore> {
    const handle = await openMongo(url);
    const store = new MongoUserStore(
      handle,
      handle.db.collection<UserDoc>('users'),
      handle.db.collection<CounterDoc>('counters'),
      handle.db.collection<EventTokenDoc>('eventTokens'),
      handle.db.collection<UidDoc>('uids'),
    );
    try {
      await mongoCall(async () => {
        await ensureIndexes(store.users, [
          { key: { service: 1, email: 1 }, name: 'service_email', unique: true },
          // unassignNode: the users of one node.
          { key: { service: 1, node: 1 }, name: 'service_node' },
          // RetireUser and RaiseGeneration: every record of one account.
          { key: { email: 1 }, name: 'email' },
        ]);
        // claimEventToken sweeps expired claims itself (as on SQLite): a TTL index would do it too on
        // MongoDB, but FerretDB has none, and account events are rare enough for a sweep per claim.
        await ensureIndexes(store.eventTokens, [{ key: { expiresAt: 1 }, name: 'expires_at' }]);
        await store.ensureUidCounter();
        await store.buildUidIndex();
      });
    } catch (err) {
      await handle.release();
      throw err;
    }
    return store;
  }

  private async ensureUidCounter(): Promise<void> {
    try {
      // A 64-bit counter, so $inc never wraps at 2^31.
      await this.counters.updateOne({ _id: UID_COUNTER }, { $setOnInsert: { value: Long.fromNumber(0) } }, { upsert: true });
    } catch (err) {
      // Another process created it at the same moment.
      if (!isDuplicateKey(err)) throw err;
    }
  }

  /**
   * Fills the uid index from the records, once, for databases made before it
   * existed. Records that share a uid stop the start, naming them. (A
   * collection of its own keyed by the uid, not a unique index on users:
   * MongoDB allows no unique index but the shard key's on a sharded users.)
   */
  private async buildUidIndex(): Promise<void> {
    try {
      // Made at open, as the other collections are by their indexes, so the set of collections does not depend on the data.
      await this.handle.db.createCollection('uids');
    } catch (err) {
      // Made before, or by another process at this moment: NamespaceExists (48) on MongoDB; compatible
      // servers word that race otherwise (mongo-java-server: "Document with key … already existed"), so
      // any failure is taken as that when the collection is there now.
      const namespaceExists = (err as { code?: number }).code === 48;
      if (!namespaceExists && (await this.handle.db.listCollections({ name: 'uids' }, { nameOnly: true }).toArray()).length === 0) throw err;
    }
    if (await this.counters.findOne({ _id: UID_INDEX_BUILT })) return;
    const duplicates = new Map<number, Set<string>>();
    const cursor = this.users.find({}, { projection: { _id: 0, service: 1, email: 1, uid: 1, 'replaced.uid': 1 } });
    let batch: UidDoc[] = [];
    const flush = async () => {
      for (const taken of (await this.claimUids(batch)).taken) {
        const holders = duplicates.get(taken.uid) ?? new Set<string>();
        holders.add(`${taken.service} ${taken.email}`);
        holders.add(`${taken.claimant.service} ${taken.claimant.email}`);
        duplicates.set(taken.uid, holders);
      }
      batch = [];
    };
    for await (const doc of cursor) {
      for (const uid of recordUids(doc)) batch.push({ _id: uid, service: doc.service, email: doc.email });
      if (batch.length >= 1000) await flush();
    }
    await flush();
    if (duplicates.size > 0) {
      // Built again from scratch at the next start, after the records are fixed: no claim outlives a removed record.
      await this.uids.deleteMany({});
      const listed = [...duplicates].sort((a, b) => a[0] - b[0]);
      throw new Error(
        duplicateUidsMessage(
          listed.slice(0, LISTED_DUPLICATES).map(([uid, holders]) => ({ uid, holders: [...holders] })),
          listed.length > LISTED_DUPLICATES,
        ),
      );
    }
    try {
      await this.counters.insertOne({ _id: UID_INDEX_BUILT, value: 1 });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
  }

  /**
   * Puts `docs` into the uid index, each where its uid is free; answers the
   * uids this call added, and those another account holds, with that account
   * (nothing changes for them; a uid already this account's is neither).
   */
  private async claimUids(docs: UidDoc[]): Promise<{ added: number[]; taken: Array<UidHolder & { claimant: UserKey }> }> {
    if (docs.length === 0) return { added: [], taken: [] };
    let refused: number[] = [];
    try {
      await this.uids.insertMany(docs, { ordered: false });
    } catch (err) {
      if (!(err instanceof MongoBulkWriteError) || err.err !== undefined) throw err;
      const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
      if (!errors.every((e) => e.code === 11000)) throw err;
      refused = errors.map((e) => e.index);
      // A server that stops at the first error of an unordered bulk (FerretDB 1.24): the rest one by one.
      const answered = (err.result?.insertedCount ?? 0) + refused.length;
      if (answered < docs.length) {
        const seen = new Set(refused);
        const inserted = new Set(Object.values(err.result?.insertedIds ?? {}).map(Number));
        for (const [i, d] of docs.entries()) {
          if (seen.has(i) || inserted.has(d._id)) continue;
          try {
            await this.uids.insertOne(d);
          } catch (e) {
            if (!isDuplicateKey(e)) throw e;
            refused.push(i);
          }
        }
      }
    }
    const refusedSet = new Set(refused);
    const added = docs.filter((_, i) => !refusedSet.has(i)).map((d) => d._id);
    if (refused.length === 0) return { added, taken: [] };
    const held = await this.uids.find({ _id: { $in: refused.map((i) => docs[i]._id) } }).toArray();
    const holder = new Map(held.map((h) => [h._id, h]));
    const taken = refused.flatMap((i) => {
      const d = docs[i];
      const h = holder.get(d._id);
      if (!h || (h.service === d.service && h.email === d.email)) return [];
      return [{ uid: d._id, service: h.service, email: h.email, claimant: { service: d.service, email: d.email } }];
    });
    return { added, taken };
  }

  get(service: string, email: string): Promise<UserRecord | null> {
    return mongoCall(async () => {
      const doc = await this.users.findOne({ service, email }, NO_ID);
      return doc ? fromDoc(doc) : null;
    });
  }

  getMany(keys: readonly UserKey[]): Promise<Array<UserRecord | null>> {
    if (keys.length === 0) return Promise.resolve([]);
    return mongoCall(async () => {
      // batchSize: every record in the first reply, no getMore.
      const docs = await this.users.find(manyKeysFilter(keys), { ...NO_ID, batchSize: keys.length }).toArray();
      const found = new Map(docs.map((d) => [keyOf(d), d]));
      return keys.map((k) => {
        const doc = found.get(keyOf(k));
        return doc ? fromDoc(doc) : null;
      });
    });
  }

  insert(record: UserRecord): Promise<boolean> {
    return mongoCall(async () => {
      // The uids first: a record is never visible with a uid the index gives another account.
      const { added, taken } = await this.claimUids(recordUids(record).map((uid) => ({ _id: uid, service: record.service, email: record.email })));
      // What this call added to the index goes again when the record is not written, so no uid stays claimed for nothing.
      const undo = async () => {
        if (added.length > 0) await this.uids.deleteMany({ _id: { $in: added }, service: record.service, email: record.email });
      };
      if (taken.length > 0) {
        await undo();
        throw new UidTaken(taken.map(({ uid, service, email }) => ({ uid, service, email })));
      }
      try {
        await this.users.insertOne(toDoc(record));
        return true;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        await undo();
        return false;
      }
    });
  }

  uidHolders(uids: readonly number[]): Promise<UidHolder[]> {
    if (uids.length === 0) return Promise.resolve([]);
    return mongoCall(async () =>
      (await this.uids.find({ _id: { $in: [...uids] } }).sort({ _id: 1 }).toArray()).map((d) => ({ uid: d._id, service: d.service, email: d.email })),
    );
  }

  replace(record: UserRecord, expectedVersion: number): Promise<boolean> {
    return mongoCall(async () => {
      const res = await this.users.replaceOne(
        { service: record.service, email: record.email, version: expectedVersion },
        toDoc(record),
      );
      return res.matchedCount === 1;
    });
  }

  replaceMany(writes: readonly GuardedWrite[]): Promise<boolean[]> {
    if (writes.length === 0) return Promise.resolve([]);
    // A bulk write counts matches for the whole command, not per operation. Each replace is
    // therefore an upsert: where its guard loses, the upsert's insert meets the unique
    // (service, email) index and that operation alone fails with a duplicate key, which names
    // it. Unordered, so the others are still made.
    const ops: AnyBulkWriteOperation<UserDoc>[] = writes.map(({ record, expectedVersion }) => ({
      replaceOne: { filter: { service: record.service, email: record.email, version: expectedVersion }, replacement: toDoc(record), upsert: true },
    }));
    return mongoCall(async () => {
      const lost = new Set<number>();
      let result: BulkWriteResult;
      try {
        result = await this.users.bulkWrite(ops, { ordered: false });
      } catch (err) {
        if (!(err instanceof MongoBulkWriteError) || err.err !== undefined) throw err;
        const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
        if (!errors.every((e) => e.code === 11000)) throw err;
        for (const e of errors) lost.add(e.index);
        result = err.result;
      }
      // An upsert that inserted: the record was missing, and replace creates nothing. Users are
      // never deleted, so only a record removed by hand gets here.
      const inserted = Object.entries(result.upsertedIds);
      // Every write matched, lost or inserted. A server that stops at the first error of an
      // unordered bulk (FerretDB 1.24) leaves some unaccounted for: which were made is unknown.
      if (result.matchedCount + lost.size + inserted.length !== writes.length) {
        throw new InternalError(`bulk write answered for ${result.matchedCount + lost.size + inserted.length} of ${writes.length} writes`);
      }
      if (inserted.length > 0) {
        await this.users.deleteMany({ _id: { $in: inserted.map(([, id]) => id) } });
        for (const [index] of inserted) lost.add(Number(index));
      }
      return writes.map((_, i) => !lost.has(i));
    });
  }

  listByEmail(email: string): Promise<UserRecord[]> {
    return mongoCall(async () => (await this.users.find({ email }, NO_ID).sort({ service: 1 }).toArray()).map(fromDoc));
  }

  nextUid(): Promise<number> {
    return mongoCall(async () => {
      // The pre-image plus one, not the post-image: the compatible test server
      // (mongo-java-server) can return another writer's post-image under
      // concurrency, while its pre-image is exact; on MongoDB both are.
      const before = await this.counters.findOneAndUpdate({ _id: UID_COUNTER }, { $inc: { value: 1 } }, { returnDocument: 'before' });
      // open() created it; recreating it here could hand out used uids again.
      if (!before) throw new InternalError('the uid counter document is missing');
      // Past 2^53 - 1 the number would round onto another uid: refused (the counter stays moved, so every later call is too).
      return safeCounter(counterNumber(before.value) + 1);
    });
  }

  unassignNode(service: string, node: string): Promise<number> {
    // '' means "no node": clearing it would only bump versions.
    if (node === '') return Promise.resolve(0);
    return mongoCall(async () => {
      const res = await this.users.updateMany({ service, node }, { $set: { node: '' }, $inc: { version: 1 } });
      return res.modifiedCount;
    });
  }

  list(q: ListQuery): Promise<UserRecord[]> {
    const filter: Filter<UserDoc> = {};
    if (q.service !== '') filter.service = q.service;
    if (q.after) {
      const { service, email } = q.after;
      filter.$or = [{ service: { $gt: service } }, { service, email: { $gt: email } }];
    }
    if (q.replaced) filter['replaced.0'] = { $exists: true };
    if (q.node !== undefined) {
      if (q.replaced) filter['replaced.node'] = q.node;
      else filter.node = q.node;
    }
    return mongoCall(async () => {
      // The unique (service, email) index serves the sort, so the cursor is stable.
      const docs = await this.users.find(filter, NO_ID).sort({ service: 1, email: 1 }).limit(q.limit).toArray();
      return docs.map(fromDoc);
    });
  }

  counts(service: string): Promise<NodeCount[]> {
    const match = service === '' ? {} : { service };
    return mongoCall(async () => {
      type Group = { _id: { service: string; node: string; released?: boolean | null }; n: number };
      const flat = (g: Group[]) => g.map((x) => ({ service: x._id.service, node: x._id.node, released: x._id.released, n: x.n }));
      const live = await this.users
        // uid 0: a retired account (rules.ts RETIRED_UID), which has no live record.
        .aggregate<Group>([{ $match: { ...match, uid: { $ne: 0 } } }, { $group: { _id: { service: '$service', node: '$node' }, n: { $sum: 1 } } }])
        .toArray();
      const replaced = await this.users
        .aggregate<Group>([
          { $match: match },
          { $unwind: '$replaced' },
          { $group: { _id: { service: '$service', node: '$replaced.node', released: '$replaced.released' }, n: { $sum: 1 } } },
        ])
        .toArray();
      return mergeCounts(flat(live), flat(replaced));
    });
  }

  claimEventToken(key: string, expiresAt: number, now: number): Promise<boolean> {
    return mongoCall(async () => {
      await this.eventTokens.deleteMany({ expiresAt: { $lte: new Date(now) } });
      try {
        // Matches only an expired claim (taken over); otherwise the upsert inserts, and a live claim
        // of the same key makes that insert a duplicate key: a replay.
        await this.eventTokens.updateOne({ _id: key, expiresAt: { $lte: new Date(now) } }, { $set: { expiresAt: new Date(expiresAt) } }, { upsert: true });
        return true;
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    });
  }

  releaseEventToken(key: string): Promise<void> {
    return mongoCall(async () => {
      await this.eventTokens.deleteOne({ _id: key });
    });
  }

  uidCounter(): Promise<UidCounter> {
    return mongoCall(async () => {
      const doc = await this.counters.findOne({ _id: UID_COUNTER });
      if (!doc) throw new InternalError('the uid counter document is missing');
      return { value: counterNumber(doc.value), imported: counterNumber(doc.imported) };
    });
  }

  setUidCounter(expected: UidCounter, next: UidCounter): Promise<boolean> {
    return mongoCall(async () => {
      // One document holds both, so the guard and the write are one atomic update; a nextUid meanwhile fails the guard.
      const res = await this.counters.updateOne(
        { _id: UID_COUNTER, value: expected.value, imported: expected.imported === 0 ? { $not: { $gt: 0 } } : expected.imported },
        { $set: { value: Long.fromNumber(next.value), imported: Long.fromNumber(next.imported) } },
      );
      return res.matchedCount === 1;
    });
  }

  ping(): Promise<void> {
    return mongoCall(async () => {
      await this.handle.db.command({ ping: 1 });
    });
  }

  close(): Promise<void> {
    return this.handle.release();
  }
}
