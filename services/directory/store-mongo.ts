// UserStore on MongoDB. Every write is one single-document atomic operation
// (insert under a unique index, replace guarded by the version, $inc on a
// counter), so it is correct on a replica set or a sharded cluster. Collections
// `users` and `counters` share the database with the nodes store.
import { Long, type Collection, type Filter } from 'mongodb';
import { InternalError } from '../../lib/errors.js';
import { ensureIndexes, isDuplicateKey, mongoCall, openMongo, type MongoHandle } from '../../lib/mongo.js';
import { mergeCounts, type ListQuery, type NodeCount, type ReplacedUser, type UserRecord, type UserStore } from './store.js';

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

interface CounterDoc {
  _id: string;
  value: Long | number;
}

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

export class MongoUserStore implements UserStore {
  private constructor(
    private readonly handle: MongoHandle,
    private readonly users: Collection<UserDoc>,
    private readonly counters: Collection<CounterDoc>,
    private readonly eventTokens: Collection<EventTokenDoc>,
  ) {}

  /** Connects (sharing the process's client for that server) and creates indexes and the uid counter if missing. */
  static async open(url: string): Promise<MongoUserStore> {
    const handle = await openMongo(url);
    const store = new MongoUserStore(
      handle,
      handle.db.collection<UserDoc>('users'),
      handle.db.collection<CounterDoc>('counters'),
      handle.db.collection<EventTokenDoc>('eventTokens'),
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

  get(service: string, email: string): Promise<UserRecord | null> {
    return mongoCall(async () => {
      const doc = await this.users.findOne({ service, email });
      return doc ? fromDoc(doc) : null;
    });
  }

  insert(record: UserRecord): Promise<boolean> {
    return mongoCall(async () => {
      try {
        await this.users.insertOne(toDoc(record));
        return true;
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    });
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

  listByEmail(email: string): Promise<UserRecord[]> {
    return mongoCall(async () => (await this.users.find({ email }).sort({ service: 1 }).toArray()).map(fromDoc));
  }

  nextUid(): Promise<number> {
    return mongoCall(async () => {
      // The pre-image plus one, not the post-image: the compatible test server
      // (mongo-java-server) can return another writer's post-image under
      // concurrency, while its pre-image is exact; on MongoDB both are.
      const before = await this.counters.findOneAndUpdate({ _id: UID_COUNTER }, { $inc: { value: 1 } }, { returnDocument: 'before' });
      // open() created it; recreating it here could hand out used uids again.
      if (!before) throw new InternalError('the uid counter document is missing');
      // The driver hands back a number while it is below 2^53 (promoteLongs).
      const value = typeof before.value === 'number' ? before.value : before.value.toNumber();
      return value + 1;
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
      const docs = await this.users.find(filter).sort({ service: 1, email: 1 }).limit(q.limit).toArray();
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

  ping(): Promise<void> {
    return mongoCall(async () => {
      await this.handle.db.command({ ping: 1 });
    });
  }

  close(): Promise<void> {
    return this.handle.release();
  }
}
