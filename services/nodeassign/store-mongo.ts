// NodeStore on MongoDB. Every write is one single-document atomic operation
// whose filter carries the expected state (the eligibility guard for claim, the
// read load and slots for setAvailable), so it is correct on a replica set or
// a sharded cluster. The collection `nodes` shares the database with the users
// store.
//
// Candidates come from a partial index holding only nodes with free slots that
// are neither downed nor backed off, keyed by (service, ratio, url), where
// `ratio` = currentLoad / capacity is a stored field kept in step by every
// write that changes the load or the capacity: the query reads the index in
// order and stops after `limit` entries, whatever the number of nodes.
import type { Collection, Document, Filter } from 'mongodb';
import { ServiceUnavailable } from '../../lib/errors.js';
import { ensureIndexes, isDuplicateKey, mongoCall, openMongo, type MongoHandle } from '../../lib/mongo.js';
import { correctedAvailable } from './rules.js';
import type { NodePatch, NodeRecord, NodeStore } from './store.js';

interface NodeDoc extends NodeRecord {
  ratio: number;
}

/** The stored sort key of candidates; 1 or more means full (a node without capacity is always full). */
export function loadRatio(currentLoad: number, capacity: number): number {
  return capacity > 0 ? currentLoad / capacity : 1;
}

function toDoc(n: NodeRecord): NodeDoc {
  return {
    service: n.service,
    url: n.url,
    capacity: n.capacity,
    currentLoad: n.currentLoad,
    available: n.available,
    downed: n.downed,
    backoff: n.backoff,
    ratio: loadRatio(n.currentLoad, n.capacity),
  };
}

/** Exactly the record's fields, without _id and ratio. */
function fromDoc(d: NodeRecord): NodeRecord {
  return {
    service: d.service,
    url: d.url,
    capacity: d.capacity,
    currentLoad: d.currentLoad,
    available: d.available,
    downed: d.downed,
    backoff: d.backoff,
  };
}

/** The part of eligibility that the partial index holds; load < capacity is the `ratio < 1` range. */
const HAS_SLOTS_AND_UP = { available: { $gt: 0 }, downed: false, backoff: false } as const;

/** How often update() re-reads a node whose load moved under a capacity change before giving up. */
const MAX_UPDATE_ATTEMPTS = 20;

export class MongoNodeStore implements NodeStore {
  private constructor(
    private readonly handle: MongoHandle,
    private readonly nodes: Collection<NodeDoc>,
  ) {}

  /** Connects (sharing the process's client for that server) and creates the indexes if missing. */
  static async open(url: string): Promise<MongoNodeStore> {
    const handle = await openMongo(url);
    const store = new MongoNodeStore(handle, handle.db.collection<NodeDoc>('nodes'));
    try {
      await mongoCall(() =>
        ensureIndexes(store.nodes, [
          { key: { service: 1, url: 1 }, name: 'service_url', unique: true },
          { key: { service: 1, ratio: 1, url: 1 }, name: 'candidates', partialFilterExpression: HAS_SLOTS_AND_UP },
          // releasable: the nodes of a service without slots.
          { key: { service: 1, available: 1 }, name: 'service_available' },
        ]),
      );
    } catch (err) {
      await handle.release();
      throw err;
    }
    return store;
  }

  add(node: NodeRecord): Promise<boolean> {
    return mongoCall(async () => {
      try {
        await this.nodes.insertOne(toDoc(node));
        return true;
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    });
  }

  get(service: string, url: string): Promise<NodeRecord | null> {
    return mongoCall(async () => {
      const doc = await this.nodes.findOne({ service, url });
      return doc ? fromDoc(doc) : null;
    });
  }

  list(service?: string): Promise<NodeRecord[]> {
    return mongoCall(async () => {
      const filter: Filter<NodeDoc> = service === undefined ? {} : { service };
      const docs = await this.nodes.find(filter).sort({ service: 1, url: 1 }).toArray();
      return docs.map(fromDoc);
    });
  }

  update(service: string, url: string, patch: NodePatch): Promise<NodeRecord | null> {
    return mongoCall(async () => {
      const set: Partial<NodeDoc> = {};
      if (patch.downed !== undefined) set.downed = patch.downed;
      if (patch.backoff !== undefined) set.backoff = patch.backoff;
      if (patch.capacity === undefined) {
        if (Object.keys(set).length === 0) return this.get(service, url);
        // The pre-image is exact on every server (see claim); the update is known.
        const before = await this.nodes.findOneAndUpdate({ service, url }, { $set: set }, { returnDocument: 'before' });
        return before ? { ...fromDoc(before), ...set } : null;
      }
      // A new capacity changes the ratio, which depends on the load: write both
      // only if the load is still the one the ratio was computed from.
      const capacity = patch.capacity;
      for (let attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++) {
        const current = await this.nodes.findOne({ service, url });
        if (!current) return null;
        const changes = { ...set, capacity, ratio: loadRatio(current.currentLoad, capacity) };
        const before = await this.nodes.findOneAndUpdate(
          { service, url, currentLoad: current.currentLoad },
          { $set: changes },
          { returnDocument: 'before' },
        );
        if (before) return fromDoc({ ...before, ...changes });
      }
      throw new ServiceUnavailable(`node ${url} is too busy to change its capacity now`);
    });
  }

  remove(service: string, url: string): Promise<NodeRecord | null> {
    return mongoCall(async () => {
      const doc = await this.nodes.findOneAndDelete({ service, url });
      return doc ? fromDoc(doc) : null;
    });
  }

  private candidatesCursor(service: string, limit: number) {
    return this.nodes
      .find({
        service,
        ...HAS_SLOTS_AND_UP,
        ratio: { $lt: 1 },
        // Exact check on the fetched entries: `ratio` is a float sum (see claim).
        $expr: { $lt: ['$currentLoad', '$capacity'] },
      })
      .sort({ ratio: 1, url: 1 })
      .limit(limit);
  }

  candidates(service: string, limit: number): Promise<NodeRecord[]> {
    // limit(0) would mean "no limit" to MongoDB.
    if (!(limit > 0)) return Promise.resolve([]);
    return mongoCall(async () => (await this.candidatesCursor(service, limit).toArray()).map(fromDoc));
  }

  /** The server's plan and statistics for `candidates`, so a test can check that the index serves it. */
  explainCandidates(service: string, limit: number): Promise<Document> {
    return mongoCall(() => this.candidatesCursor(service, limit).explain('executionStats'));
  }

  claim(service: string, url: string): Promise<NodeRecord | null> {
    return mongoCall(async () => {
      // $inc keeps the claim one atomic write without retries however many
      // logins race for the node; the ratio step 1/capacity needs the capacity,
      // so it is read first and guarded in the filter.
      for (let attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++) {
        const current = await this.nodes.findOne({ service, url }, { projection: { capacity: 1 } });
        if (!current) return null;
        const capacity = current.capacity;
        if (!(capacity > 0)) return null;
        // The pre-image, not the post-image: mongo-java-server (the compatible
        // test server) may return another writer's post-image under
        // concurrency; its pre-image is exact, and on MongoDB both are.
        const before = await this.nodes.findOneAndUpdate(
          { service, url, capacity, currentLoad: { $lt: capacity }, ...HAS_SLOTS_AND_UP },
          { $inc: { currentLoad: 1, available: -1, ratio: 1 / capacity } },
          { returnDocument: 'before' },
        );
        if (before) return fromDoc({ ...before, currentLoad: before.currentLoad + 1, available: before.available - 1 });
        // Refused: either not eligible, or the capacity changed since the read.
        const now = await this.nodes.findOne({ service, url }, { projection: { capacity: 1 } });
        if (!now || now.capacity === capacity) return null;
      }
      throw new ServiceUnavailable(`node ${url} is too busy to claim now`);
    });
  }

  release(service: string, url: string): Promise<NodeRecord | null> {
    return mongoCall(async () => {
      // As claim: $inc, with the capacity the ratio step needs read first and guarded.
      for (let attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++) {
        const current = await this.nodes.findOne({ service, url });
        if (!current) return null;
        if (!(current.currentLoad > 0)) return fromDoc(current);
        const capacity = current.capacity;
        const before = await this.nodes.findOneAndUpdate(
          { service, url, capacity, currentLoad: { $gt: 0 } },
          { $inc: { currentLoad: -1, available: 1, ratio: capacity > 0 ? -1 / capacity : 0 } },
          { returnDocument: 'before' },
        );
        if (before) return fromDoc({ ...before, currentLoad: before.currentLoad - 1, available: before.available + 1 });
      }
      throw new ServiceUnavailable(`node ${url} is too busy to release a slot now`);
    });
  }

  setAvailable(node: NodeRecord, available: number): Promise<boolean> {
    return mongoCall(async () => {
      const res = await this.nodes.updateOne(
        { service: node.service, url: node.url, currentLoad: node.currentLoad, available: node.available },
        { $set: { available } },
      );
      return res.matchedCount === 1;
    });
  }

  replace(node: NodeRecord, expected: NodeRecord): Promise<boolean> {
    return mongoCall(async () => {
      const { service, url, capacity, currentLoad, available, downed, backoff } = expected;
      const next = toDoc(node);
      const res = await this.nodes.updateOne(
        { service, url, capacity, currentLoad, available, downed, backoff },
        { $set: { capacity: next.capacity, currentLoad: next.currentLoad, available: next.available, downed: next.downed, backoff: next.backoff, ratio: next.ratio } },
      );
      return res.matchedCount === 1;
    });
  }

  setLoad(service: string, url: string, from: number, to: number): Promise<NodeRecord | null> {
    return mongoCall(async () => {
      // available and ratio follow from the fields read, so the write is guarded on all of them;
      // a change of anything but the load (a slot release, a capacity change) is read again.
      for (let attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++) {
        const current = await this.nodes.findOne({ service, url });
        if (!current || current.currentLoad !== from) return null;
        const changes = { currentLoad: to, available: correctedAvailable(current.available, from, to), ratio: loadRatio(to, current.capacity) };
        const before = await this.nodes.findOneAndUpdate(
          { service, url, currentLoad: from, available: current.available, capacity: current.capacity },
          { $set: changes },
          { returnDocument: 'before' },
        );
        if (before) return fromDoc({ ...before, ...changes });
      }
      throw new ServiceUnavailable(`node ${url} is too busy to correct its load now`);
    });
  }

  releasable(service: string): Promise<NodeRecord[]> {
    return mongoCall(async () => {
      // rules.ts isReleasable; backoff is no bar.
      const docs = await this.nodes
        .find({ service, available: { $lte: 0 }, downed: false, $expr: { $lt: ['$currentLoad', '$capacity'] } })
        .sort({ url: 1 })
        .toArray();
      return docs.map(fromDoc);
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
