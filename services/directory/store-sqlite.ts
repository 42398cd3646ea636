// UserStore on SQLite (better-sqlite3). Every method is one statement, so each
// write is atomic even when several processes share the file. The file may
// also hold the nodes store, hence the `dir_` table prefix.
import type Database from 'better-sqlite3';
import { openSqlite, retryWhileBusy } from '../../lib/sqlite.js';
import { mergeCounts } from './store.js';
import type { ListQuery, NodeCount, ReplacedUser, UserRecord, UserStore } from './store.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS dir_users (
  service TEXT NOT NULL,
  email TEXT NOT NULL,
  uid INTEGER NOT NULL,
  node TEXT NOT NULL,
  generation INTEGER NOT NULL,
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
`;

interface UserRow {
  service: string;
  email: string;
  uid: number;
  node: string;
  generation: number;
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
    clientState: row.client_state,
    seenClientStates: JSON.parse(row.seen_client_states) as string[],
    replaced: (JSON.parse(row.replaced) as ReplacedUser[]).map((r) => ({ ...r, released: r.released ?? false })),
    stateChanges: JSON.parse(row.state_changes) as number[],
    createdAt: row.created_at,
    version: row.version,
  };
}

/** Files made before state_changes existed get the column; their users read as having made no change. */
function addStateChanges(db: Database.Database): void {
  const columns = db.prepare<[], { name: string }>('PRAGMA table_info(dir_users)').all();
  if (columns.some((c) => c.name === 'state_changes')) return;
  try {
    retryWhileBusy(() => db.exec("ALTER TABLE dir_users ADD COLUMN state_changes TEXT NOT NULL DEFAULT '[]'"));
  } catch (err) {
    // Another process sharing the file added it first.
    if (!/duplicate column/i.test((err as Error).message)) throw err;
  }
}

export class SqliteUserStore implements UserStore {
  private readonly stmts;

  private constructor(private readonly db: Database.Database) {
    this.stmts = {
      get: db.prepare<[string, string], UserRow>('SELECT * FROM dir_users WHERE service = ? AND email = ?'),
      insert: db.prepare<[UserRow]>(
        `INSERT INTO dir_users (service, email, uid, node, generation, client_state, seen_client_states, replaced, state_changes, created_at, version)
         VALUES (@service, @email, @uid, @node, @generation, @client_state, @seen_client_states, @replaced, @state_changes, @created_at, @version)
         ON CONFLICT (service, email) DO NOTHING`,
      ),
      replace: db.prepare<[UserRow & { expected: number }]>(
        `UPDATE dir_users SET uid = @uid, node = @node, generation = @generation, client_state = @client_state,
           seen_client_states = @seen_client_states, replaced = @replaced, state_changes = @state_changes, created_at = @created_at, version = @version
         WHERE service = @service AND email = @email AND version = @expected`,
      ),
      nextUid: db.prepare<[], { value: number }>("UPDATE dir_counters SET value = value + 1 WHERE name = 'uid' RETURNING value"),
      unassign: db.prepare<[string, string]>("UPDATE dir_users SET node = '', version = version + 1 WHERE service = ? AND node = ?"),
      liveCounts: db.prepare<[string, string], { service: string; node: string; n: number }>(
        "SELECT service, node, count(*) AS n FROM dir_users WHERE (? = '' OR service = ?) GROUP BY service, node",
      ),
      replacedCounts: db.prepare<[string, string], { service: string; node: string; n: number }>(
        `SELECT u.service AS service, json_extract(r.value, '$.node') AS node, count(*) AS n
         FROM dir_users u, json_each(u.replaced) r WHERE (? = '' OR u.service = ?) GROUP BY 1, 2`,
      ),
      ping: db.prepare('SELECT 1'),
    };
  }

  /** `file` is a path (parent folders are created) or `:memory:`. */
  static open(file: string): SqliteUserStore {
    const db = openSqlite(file, SCHEMA);
    addStateChanges(db);
    return new SqliteUserStore(db);
  }

  async get(service: string, email: string): Promise<UserRecord | null> {
    const row = this.stmts.get.get(service, email);
    return row ? fromRow(row) : null;
  }

  async insert(record: UserRecord): Promise<boolean> {
    return this.stmts.insert.run(toRow(record)).changes === 1;
  }

  async replace(record: UserRecord, expectedVersion: number): Promise<boolean> {
    return this.stmts.replace.run({ ...toRow(record), expected: expectedVersion }).changes === 1;
  }

  async nextUid(): Promise<number> {
    return this.stmts.nextUid.get()!.value;
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

  async ping(): Promise<void> {
    this.stmts.ping.get();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
