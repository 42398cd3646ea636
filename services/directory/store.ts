// The users store interface. Rules live above it (rules.ts); a store only
// reads and writes records, each write a single-record atomic operation, so
// the same logic is correct on SQLite, one MongoDB or a sharded cluster.

export interface ReplacedUser {
  uid: number;
  node: string;
  /** ms since epoch */
  replacedAt: number;
  /** Its node slot was given back (the user's new uid landed on the same node). Missing in old records: false. */
  released: boolean;
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

export interface UserStore {
  get(service: string, email: string): Promise<UserRecord | null>;
  /** Inserts a new record; false when (service, email) exists already. */
  insert(record: UserRecord): Promise<boolean>;
  /**
   * Writes `record` if the stored one still has version `expectedVersion`
   * (record.version must be expectedVersion + 1); false when another write came first.
   */
  replace(record: UserRecord, expectedVersion: number): Promise<boolean>;
  /** A new uid: unique, increasing, never reused. */
  nextUid(): Promise<number>;
  /** Every record of `email`, in any service. */
  listByEmail(email: string): Promise<UserRecord[]>;
  /** Clears `node` (and bumps version) on every user of `service` on that node; returns how many. */
  unassignNode(service: string, node: string): Promise<number>;
  /** Reachability check for health endpoints. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
