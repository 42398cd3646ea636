// The users store interface. Rules live above it (rules.ts); a store only
// reads and writes records, each write a single-record atomic operation, so
// the same logic is correct on SQLite, one MongoDB or a sharded cluster. The
// batch methods (getMany, replaceMany) save round trips, not atomicity: each
// record in them is read or written on its own, as get and replace do it.
import { InternalError } from '../../lib/errors.js';

export interface ReplacedUser {
  uid: number;
  node: string;
  /** ms since epoch */
  replacedAt: number;
  /** Its node slot was given back (the user's new uid landed on the same node). Missing in old records: false. */
  released: boolean;
  /** A purger working on it (purge-rules.ts): who, and until when (ms since epoch) others keep off. */
  claim?: { by: string; until: number };
}

export interface UserRecord {
  service: string;
  email: string;
  uid: number;
  /** '' while no node is assigned. */
  node: string;
  generation: number;
  clientState: string;
  /** Client states this user had before the current one. */
  seenClientStates: string[];
  /** Old uid/node pairs left behind by client-state changes, for clean-up; the newest MAX_REPLACED. */
  replaced: ReplacedUser[];
  /** DESIGN §9.2, ms; null when none was ever supplied (and in records made before it existed). */
  keysChangedAt: number | null;
  /** When (ms since epoch) the client-state changes of the last 24 hours happened, oldest first. Missing in old records: []. */
  stateChanges: number[];
  /** ms since epoch */
  createdAt: number;
  /** Bumped by every write; the guard of compare-and-set updates. */
  version: number;
}

/** Where a listing resumes: after this (service, email), in that order. */
export interface ListPosition {
  service: string;
  email: string;
}

export interface ListQuery {
  /** '' lists every application. */
  service: string;
  /** Only users whose live record is on this node, or (with `replaced`) who have a replaced record on it. */
  node?: string;
  /** Only users with replaced records. */
  replaced?: boolean;
  after?: ListPosition;
  limit: number;
}

/** Records on one node (node '' = live records without a node). */
export interface NodeCount {
  service: string;
  node: string;
  live: number;
  replaced: number;
  /** Of `replaced`: those whose slot was not given back, so the node still counts them in its load. */
  unreleased: number;
}

/** The uid counter: the last uid handed out or reserved, and the highest uid an import reserved (0: none). */
export interface UidCounter {
  value: number;
  imported: number;
}

/** A user's key: (service, email). */
export interface UserKey {
  service: string;
  email: string;
}

/** One compare-and-set of replaceMany: as `replace(record, expectedVersion)`. */
export interface GuardedWrite {
  record: UserRecord;
  expectedVersion: number;
}

/** A uid and the account (service, email) that holds it, live or replaced. */
export interface UidHolder {
  uid: number;
  service: string;
  email: string;
}

/**
 * An insert that would give a record a uid another account holds: one uid
 * is one account's data on its node, so two accounts may never share one.
 */
export class UidTaken extends Error {
  constructor(readonly holders: UidHolder[]) {
    super(`uid ${holders.map((h) => `${h.uid} is held by ${h.service} ${h.email}`).join(', uid ')}`);
  }
}

/**
 * Every uid, live or replaced, on more than one account, as a store found
 * them when it built its uid index on a database made before the index
 * existed: starting would let those accounts read and write each other's data.
 */
export function duplicateUidsMessage(duplicates: Array<{ uid: number; holders: string[] }>, more: boolean): string {
  const listed = duplicates.map((d) => `uid ${d.uid}: ${d.holders.join(', ')}`).join('; ');
  return (
    `the users store holds uids on more than one account (${listed}${more ? '; and more' : ''}): each would log in as that uid and ` +
    'read and write the other\'s data on the node. Decide which account keeps each uid: restore the store from a backup taken before ' +
    'the import that brought the second one in, or remove the other record by hand (SQLite: table dir_users; MongoDB: collection users), then start again'
  );
}

export interface UserStore {
  get(service: string, email: string): Promise<UserRecord | null>;
  /** The records of `keys`, in their order; null where none exists. A key may repeat. */
  getMany(keys: readonly UserKey[]): Promise<Array<UserRecord | null>>;
  /**
   * Inserts a new record; false when (service, email) exists already. Its uids
   * (live and replaced) go into the store's uid index, whose key is the uid:
   * UidTaken, and nothing written, when another account holds one of them.
   * A record gets uids only here and from nextUid (which hands each out once),
   * so no two accounts ever hold one uid.
   */
  insert(record: UserRecord): Promise<boolean>;
  /**
   * The accounts holding any of `uids`, by the uid index: every uid a record
   * was inserted with (new accounts, imports) and every uid the records held
   * when the index was built, purged ones too (a uid is never another
   * account's). A client-state change's new uid comes from nextUid, beyond
   * every uid an import may bring (import-rules.ts uidReservation).
   */
  uidHolders(uids: readonly number[]): Promise<UidHolder[]>;
  /**
   * Writes `record` if the stored one still has version `expectedVersion`
   * (record.version must be expectedVersion + 1); false when another write came first.
   */
  replace(record: UserRecord, expectedVersion: number): Promise<boolean>;
  /**
   * Each write as `replace` does it, sent together; in their order, true where
   * that write was made, false where its guard lost (or the record is missing:
   * nothing is created). Two writes of one key from the same version: at most one is made.
   */
  replaceMany(writes: readonly GuardedWrite[]): Promise<boolean[]>;
  /** A new uid: unique, increasing, never reused. */
  nextUid(): Promise<number>;
  /** Every record of `email`, in any service. */
  listByEmail(email: string): Promise<UserRecord[]>;
  /** Clears `node` (and bumps version) on every user of `service` on that node; returns how many. */
  unassignNode(service: string, node: string): Promise<number>;
  /** Users in (service, email) order after `q.after`, at most `q.limit`: a stable cursor under inserts and deletes. */
  list(q: ListQuery): Promise<UserRecord[]>;
  /** Live, replaced and unreleased replaced records per (service, node); `service` '' counts every application. */
  counts(service: string): Promise<NodeCount[]>;
  /**
   * Claims a security event token's key until `expiresAt` (ms): true when no
   * unexpired claim of it exists (the first delivery), false for a replay. An
   * expired claim is taken over, so the table stays bounded by the window.
   */
  claimEventToken(key: string, expiresAt: number, now: number): Promise<boolean>;
  /** Drops a claim (its events were not applied); nothing when there is none. */
  releaseEventToken(key: string): Promise<void>;
  /** The uid counter and how far imports reserved it (ReserveUids). */
  uidCounter(): Promise<UidCounter>;
  /** Writes `next` if the counter is still `expected` (compare-and-set); false when it moved meanwhile. */
  setUidCounter(expected: UidCounter, next: UidCounter): Promise<boolean>;
  /** Reachability check for health endpoints. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** A record's uids: the live one (not 0, a retired account's) and the replaced ones. */
export function recordUids(r: { uid: number; replaced: ReadonlyArray<{ uid: number }> }): number[] {
  return [...(r.uid !== 0 ? [r.uid] : []), ...r.replaced.map((x) => x.uid)];
}

/** A counter value as a number: past 2^53 it would round onto another uid, so the store refuses to go on. */
export function safeCounter(value: bigint | number): number {
  if (typeof value === 'bigint' ? value > BigInt(Number.MAX_SAFE_INTEGER) : !Number.isSafeInteger(value)) {
    throw new InternalError(`the uid counter is at ${value}, past 2^53 - 1: no uid can be handed out exactly`);
  }
  return Number(value);
}

/**
 * Counts per (service, node), in (service, node) order, from the two groupings
 * a store makes: live records, and replaced records by their `released` flag
 * (missing in old records: not released).
 */
export function mergeCounts(
  live: Array<{ service: string; node: string; n: number }>,
  replaced: Array<{ service: string; node: string; released: boolean | number | null | undefined; n: number }>,
): NodeCount[] {
  const byKey = new Map<string, NodeCount>();
  const entry = (service: string, node: string) => {
    const key = JSON.stringify([service, node]);
    let c = byKey.get(key);
    if (!c) byKey.set(key, (c = { service, node, live: 0, replaced: 0, unreleased: 0 }));
    return c;
  };
  for (const r of live) entry(r.service, r.node).live += r.n;
  for (const r of replaced) {
    const c = entry(r.service, r.node);
    c.replaced += r.n;
    if (!r.released) c.unreleased += r.n;
  }
  return [...byKey.values()].sort((a, b) => (a.service === b.service ? (a.node < b.node ? -1 : 1) : a.service < b.service ? -1 : 1));
}
