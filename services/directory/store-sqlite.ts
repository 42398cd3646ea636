// UserStore on SQLite (better-sqlite3). Every method is one statement (the
// batch methods one per record, replaceMany's in one transaction), so each
// write is atomic even when several processes share the file. The file may
// also hold the nodes store, hence the `dir_` table prefix.
import type Database from 'better-sqlite3';
import { openSqlite, retryWhileBusy } from '../../lib/sqlite.js';
import { duplicateUidsMessage, mergeCounts, recordUids, safeCounter, UidTaken } from './store.js';
import type { GuardedWrite, ListQuery, NodeCount, ReplacedUser, UidCounter, UidHolder, UserKey, UserRecord, UserStore } from './store.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS dir_users (
  service TEXT NOT NULL,
  email TEXT NOT NULL,
  uid INTEGER NOT NULL,
  node TEXT NOT NULL,
  generation INTEGER NOT NULL,
  keys_changed_at INTEGER,
  client_state TEXT NOT NULL,
  seen_client_states TEXT NOT NULL,
  replaced TEXT NOT NULL,
  state_changes TEXT NOT NULL DEFAULT '[]',
  created_at INTEGER NOT NULL,
  version INTEGER NOT NULL,
  PRIMARY KEY (service, email)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS dir_users_node ON dir_users (service, node);
CREATE TABLE IF NOT EXISTS dir_counters (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO dir_counters (name, value) VALUES ('uid', 0);
INSERT OR IGNORE INTO dir_counters (name, value) VALUES ('uid_imported', 0);
CREATE TABLE IF NOT EXISTS dir_event_tokens (
  key TEXT PRIMARY KEY,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS dir_event_tokens_expiry ON dir_event_tokens (expires_at);
CREATE TABLE IF NOT EXISTS dir_uids (
  uid INTEGER PRIMARY KEY,
  service TEXT NOT NULL,
  email TEXT NOT NULL
);
`;

/** Every uid a record holds, live (not 0: retired) and replaced. */
const ALL_UIDS = `
  SELECT uid, service, email FROM dir_users WHERE uid != 0
  UNION ALL
  SELECT json_extract(r.value, '$.uid'), u.service, u.email FROM dir_users u, json_each(u.replaced) r`;

/** How many duplicate uids the start-up error names. */
const LISTED_DUPLICATES = 20;

interface UserRow {
  service: string;
  email: string;
  uid: number;
  node: string;
  generation: number;
  keys_changed_at: number | null;
  client_state: string;
  seen_client_states: string;
  replaced: string;
  state_changes: string;
  created_at: number;
  version: number;
}

function toRow(r: UserRecord): UserRow {
  return {
    service: r.service,
    email: r.email,
    uid: r.uid,
    node: r.node,
    generation: r.generation,
    keys_changed_at: r.keysChangedAt,
    client_state: r.clientState,
    seen_client_states: JSON.stringify(r.seenClientStates),
    replaced: JSON.stringify(r.replaced),
    state_changes: JSON.stringify(r.stateChanges),
    created_at: r.createdAt,
    version: r.version,
  };
}

function fromRow(row: UserRow): UserRecord {
  return {
    service: row.service,
    email: row.email,
    uid: row.uid,
    node: row.node,
    generation: row.generation,
    keysChangedAt: row.keys_changed_at,
    clientState: row.client_state,
    seenClientStates: JSON.parse(row.seen_client_states) as string[],
    replaced: (JSON.parse(row.replaced) as ReplacedUser[]).map((r) => ({ ...r, released: r.released ?? false })),
    stateChanges: JSON.parse(row.state_changes) as number[],
    createdAt: row.created_at,
    version: row.version,
  };
}

/** Rolls back a counter write whose second row moved (setUidCounter). */
class CounterMoved extends Error {}

/** Adds a column that files made before it existed lack, unless it is there. */
function addColumn(db: Database.Database, name: string, definition: string): void {
  const columns = db.prepare<[], { name: string }>('PRAGMA table_info(dir_users)').all();
  if (columns.some((c) => c.name === name)) return;
  try {
    retryWhileBusy(() => db.exec(`ALTER TABLE dir_users ADD COLUMN ${name} ${definition}`));
  } catch (err) {
    // Another process sharing the file added it first.
    if (!/duplicate column/i.test((err as Error).message)) throw err;
  }
}

/**
 * Files made before these columns existed get them: their users read as having
 * made no client-state change and supplied no keys_changed_at (NULL).
 */
function migrate(db: Database.Database): void {
  addColumn(db, 'state_changes', "TEXT NOT NULL DEFAULT '[]'");
  addColumn(db, 'keys_changed_at', 'INTEGER');
  // RetireUser and RaiseGeneration find an account's records by e-mail alone.
  db.exec('CREATE INDEX IF NOT EXISTS dir_users_email ON dir_users (email)');
  buildUidIndex(db);
}

/**
 * Fills dir_uids (the uid index: a uid is one account's) from the records, once,
 * for files made before it existed. Records that share a uid stop the start,
 * naming them: the index would have to pick one, and the other would lose its data.
 */
function buildUidIndex(db: Database.Database): void {
  const build = db.transaction(() => {
    if (db.prepare("SELECT 1 FROM dir_counters WHERE name = 'uid_index'").get()) return;
    const duplicates = db
      .prepare<[], { uid: number; holders: string; n: number }>(
        `SELECT uid, group_concat(service || ' ' || email, ', ') AS holders, count(*) AS n FROM (${ALL_UIDS}) GROUP BY uid HAVING count(*) > 1 ORDER BY uid LIMIT ${LISTED_DUPLICATES + 1}`,
      )
      .all();
    if (duplicates.length > 0) {
      throw new Error(
        duplicateUidsMessage(
          duplicates.slice(0, LISTED_DUPLICATES).map((d) => ({ uid: d.uid, holders: d.holders.split(', ') })),
          duplicates.length > LISTED_DUPLICATES,
        ),
      );
    }
    db.exec(`INSERT OR IGNORE INTO dir_uids (uid, service, email) ${ALL_UIDS}`);
    db.exec("INSERT INTO dir_counters (name, value) VALUES ('uid_index', 1)");
  });
  retryWhileBusy(() => build.immediate());
}

export class SqliteUserStore implements UserStore {
  private readonly stmts;
  /** One write lock and one commit for the whole batch (IMMEDIATE: the busy timeout applies to taking the lock). */
  private readonly replaceAll: (writes: readonly GuardedWrite[]) => boolean[];
  private readonly insertOne: (record: UserRecord) => boolean;

  private constructor(private readonly db: Database.Database) {
    this.stmts = {
      get: db.prepare<[string, string], UserRow>('SELECT * FROM dir_users WHERE service = ? AND email = ?'),
      insert: db.prepare<[UserRow]>(
        `INSERT INTO dir_users (service, email, uid, node, generation, keys_changed_at, client_state, seen_client_states, replaced, state_changes, created_at, version)
         VALUES (@service, @email, @uid, @node, @generation, @keys_changed_at, @client_state, @seen_client_states, @replaced, @state_changes, @created_at, @version)
         ON CONFLICT (service, email) DO NOTHING`,
      ),
      replace: db.prepare<[UserRow & { expected: number }]>(
        `UPDATE dir_users SET uid = @uid, node = @node, generation = @generation, keys_changed_at = @keys_changed_at, client_state = @client_state,
           seen_client_states = @seen_client_states, replaced = @replaced, state_changes = @state_changes, created_at = @created_at, version = @version
         WHERE service = @service AND email = @email AND version = @expected`,
      ),
      byEmail: db.prepare<[string], UserRow>('SELECT * FROM dir_users WHERE email = ? ORDER BY service'),
      // The counters as BigInt (safeIntegers): a value past 2^53 is refused, never rounded onto another uid.
      nextUid: db.prepare<[], { value: bigint }>("UPDATE dir_counters SET value = value + 1 WHERE name = 'uid' RETURNING value").safeIntegers(true),
      counter: db.prepare<[string], { value: bigint }>('SELECT value FROM dir_counters WHERE name = ?').safeIntegers(true),
      indexUid: db.prepare<[number, string, string]>('INSERT INTO dir_uids (uid, service, email) VALUES (?, ?, ?) ON CONFLICT (uid) DO NOTHING'),
      uidHolder: db.prepare<[number], UidHolder>('SELECT uid, service, email FROM dir_uids WHERE uid = ?'),
      uidHolders: db.prepare<[string], UidHolder>('SELECT uid, service, email FROM dir_uids WHERE uid IN (SELECT value FROM json_each(?)) ORDER BY uid'),
      setCounter: db.prepare<[number, string, number]>('UPDATE dir_counters SET value = ? WHERE name = ? AND value = ?'),
      unassign: db.prepare<[string, string]>("UPDATE dir_users SET node = '', version = version + 1 WHERE service = ? AND node = ?"),
      liveCounts: db.prepare<[string, string], { service: string; node: string; n: number }>(
        // uid 0: a retired account (rules.ts RETIRED_UID), which has no live record.
        "SELECT service, node, count(*) AS n FROM dir_users WHERE (? = '' OR service = ?) AND uid != 0 GROUP BY service, node",
      ),
      replacedCounts: db.prepare<[string, string], { service: string; node: string; released: number | null; n: number }>(
        `SELECT u.service AS service, json_extract(r.value, '$.node') AS node, json_extract(r.value, '$.released') AS released, count(*) AS n
         FROM dir_users u, json_each(u.replaced) r WHERE (? = '' OR u.service = ?) GROUP BY 1, 2, 3`,
      ),
      // Inserted, or an expired claim taken over: one row changed. A live claim: none.
      claimEvent: db.prepare<[{ key: string; expiresAt: number; now: number }]>(
        `INSERT INTO dir_event_tokens (key, expires_at) VALUES (@key, @expiresAt)
         ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at WHERE dir_event_tokens.expires_at <= @now`,
      ),
      releaseEvent: db.prepare<[string]>('DELETE FROM dir_event_tokens WHERE key = ?'),
      expireEvents: db.prepare<[number]>('DELETE FROM dir_event_tokens WHERE expires_at <= ?'),
      ping: db.prepare('SELECT 1'),
    };
    const replaceAll = db.transaction((writes: readonly GuardedWrite[]) =>
      writes.map(({ record, expectedVersion }) => this.stmts.replace.run({ ...toRow(record), expected: expectedVersion }).changes === 1),
    );
    this.replaceAll = (writes) => replaceAll.immediate(writes);
    // The record and its uids in the index, or neither.
    const insertOne = db.transaction((record: UserRecord) => {
      if (this.stmts.insert.run(toRow(record)).changes !== 1) return false;
      const taken: UidHolder[] = [];
      for (const uid of recordUids(record)) {
        this.stmts.indexUid.run(uid, record.service, record.email);
        const holder = this.stmts.uidHolder.get(uid)!;
        if (holder.service !== record.service || holder.email !== record.email) taken.push(holder);
      }
      if (taken.length > 0) throw new UidTaken(taken);
      return true;
    });
    this.insertOne = (record) => insertOne.immediate(record);
  }

  /** `file` is a path (parent folders are created) or `:memory:`. */
  static open(file: string): SqliteUserStore {
    const db = openSqlite(file, SCHEMA);
    migrate(db);
    return new SqliteUserStore(db);
  }

  async get(service: string, email: string): Promise<UserRecord | null> {
    const row = this.stmts.get.get(service, email);
    return row ? fromRow(row) : null;
  }

  async getMany(keys: readonly UserKey[]): Promise<Array<UserRecord | null>> {
    // Point lookups on the primary key: in-process, so a loop costs no round trips.
    return keys.map(({ service, email }) => {
      const row = this.stmts.get.get(service, email);
      return row ? fromRow(row) : null;
    });
  }

  async insert(record: UserRecord): Promise<boolean> {
    return this.insertOne(record);
  }

  async uidHolders(uids: readonly number[]): Promise<UidHolder[]> {
    return uids.length === 0 ? [] : this.stmts.uidHolders.all(JSON.stringify(uids));
  }

  async replace(record: UserRecord, expectedVersion: number): Promise<boolean> {
    return this.stmts.replace.run({ ...toRow(record), expected: expectedVersion }).changes === 1;
  }

  async replaceMany(writes: readonly GuardedWrite[]): Promise<boolean[]> {
    return writes.length === 0 ? [] : this.replaceAll(writes);
  }

  async listByEmail(email: string): Promise<UserRecord[]> {
    return this.stmts.byEmail.all(email).map(fromRow);
  }

  async nextUid(): Promise<number> {
    return safeCounter(this.stmts.nextUid.get()!.value);
  }

  async unassignNode(service: string, node: string): Promise<number> {
    // '' means "no node": clearing it would only bump versions.
    if (node === '') return 0;
    return this.stmts.unassign.run(service, node).changes;
  }

  async list(q: ListQuery): Promise<UserRecord[]> {
    const where: string[] = [];
    const params: Record<string, string | number> = { limit: q.limit };
    if (q.service !== '') {
      where.push('service = @service');
      params.service = q.service;
    }
    if (q.after) {
      // A row-value comparison walks the primary key from the cursor on.
      where.push('(service, email) > (@afterService, @afterEmail)');
      params.afterService = q.after.service;
      params.afterEmail = q.after.email;
    }
    if (q.replaced) where.push("replaced != '[]'");
    if (q.node !== undefined) {
      where.push(q.replaced ? "EXISTS (SELECT 1 FROM json_each(replaced) WHERE json_extract(value, '$.node') = @node)" : 'node = @node');
      params.node = q.node;
    }
    const sql = `SELECT * FROM dir_users ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY service, email LIMIT @limit`;
    return this.db.prepare<[typeof params], UserRow>(sql).all(params).map(fromRow);
  }

  async counts(service: string): Promise<NodeCount[]> {
    const live = this.stmts.liveCounts.all(service, service);
    const replaced = this.stmts.replacedCounts.all(service, service);
    return mergeCounts(live, replaced);
  }

  async claimEventToken(key: string, expiresAt: number, now: number): Promise<boolean> {
    // Claims of tokens nobody resends are dropped as new ones come, so the table holds one window.
    this.stmts.expireEvents.run(now);
    return this.stmts.claimEvent.run({ key, expiresAt, now }).changes === 1;
  }

  async releaseEventToken(key: string): Promise<void> {
    this.stmts.releaseEvent.run(key);
  }

  async uidCounter(): Promise<UidCounter> {
    return { value: safeCounter(this.stmts.counter.get('uid')!.value), imported: safeCounter(this.stmts.counter.get('uid_imported')!.value) };
  }

  async setUidCounter(expected: UidCounter, next: UidCounter): Promise<boolean> {
    // Both rows or neither: one immediate transaction, which also holds off other processes' nextUid.
    const write = this.db.transaction(() => {
      if (this.stmts.setCounter.run(next.value, 'uid', expected.value).changes !== 1) return false;
      if (this.stmts.setCounter.run(next.imported, 'uid_imported', expected.imported).changes !== 1) throw new CounterMoved();
      return true;
    });
    try {
      return write.immediate();
    } catch (err) {
      if (err instanceof CounterMoved) return false;
      throw err;
    }
  }

  async ping(): Promise<void> {
    this.stmts.ping.get();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
