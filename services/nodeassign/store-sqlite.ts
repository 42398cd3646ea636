// NodeStore on SQLite (better-sqlite3). Every method is one statement, so each
// write is atomic even when several processes share the file. The file may
// also hold the users store, hence the `na_` table prefix.
import type Database from 'better-sqlite3';
import { openSqlite } from '../../lib/sqlite.js';
import type { NodePatch, NodeRecord, NodeStore } from './store.js';

// The eligibility test and load ratio appear verbatim in the partial
// expression index and in the candidates query: SQLite only uses the index
// when the query repeats them exactly.
const ELIGIBLE = 'available > 0 AND current_load < capacity AND downed = 0 AND backoff = 0';
// rules.ts isReleasable, likewise repeated in its partial index and its query.
const RELEASABLE = 'available <= 0 AND current_load < capacity AND downed = 0';
const LOAD_RATIO = 'CAST(current_load AS REAL) / capacity';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS na_nodes (
  service TEXT NOT NULL,
  url TEXT NOT NULL,
  capacity INTEGER NOT NULL,
  current_load INTEGER NOT NULL,
  available INTEGER NOT NULL,
  downed INTEGER NOT NULL,
  backoff INTEGER NOT NULL,
  PRIMARY KEY (service, url)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS na_nodes_candidates ON na_nodes (service, (${LOAD_RATIO}), url) WHERE ${ELIGIBLE};
DROP INDEX IF EXISTS na_nodes_exhausted;
CREATE INDEX IF NOT EXISTS na_nodes_releasable ON na_nodes (service, url) WHERE ${RELEASABLE};
`;

interface NodeRow {
  service: string;
  url: string;
  capacity: number;
  current_load: number;
  available: number;
  downed: number;
  backoff: number;
}

function fromRow(row: NodeRow): NodeRecord {
  return {
    service: row.service,
    url: row.url,
    capacity: row.capacity,
    currentLoad: row.current_load,
    available: row.available,
    downed: row.downed !== 0,
    backoff: row.backoff !== 0,
  };
}

const bit = (b: boolean | undefined) => (b === undefined ? null : b ? 1 : 0);

/** capacity, current_load, available, downed, backoff: what replace() writes and guards. */
type NodeState = [number, number, number, number, number];

function state(n: NodeRecord): NodeState {
  return [n.capacity, n.currentLoad, n.available, bit(n.downed)!, bit(n.backoff)!];
}

function toRow(node: NodeRecord): NodeRow {
  return {
    service: node.service,
    url: node.url,
    capacity: node.capacity,
    current_load: node.currentLoad,
    available: node.available,
    downed: bit(node.downed)!,
    backoff: bit(node.backoff)!,
  };
}

export class SqliteNodeStore implements NodeStore {
  private readonly stmts;

  private constructor(private readonly db: Database.Database) {
    this.stmts = {
      add: db.prepare<[NodeRow]>(
        `INSERT INTO na_nodes (service, url, capacity, current_load, available, downed, backoff)
         VALUES (@service, @url, @capacity, @current_load, @available, @downed, @backoff)
         ON CONFLICT (service, url) DO NOTHING`,
      ),
      get: db.prepare<[string, string], NodeRow>('SELECT * FROM na_nodes WHERE service = ? AND url = ?'),
      listAll: db.prepare<[], NodeRow>('SELECT * FROM na_nodes ORDER BY service, url'),
      listService: db.prepare<[string], NodeRow>('SELECT * FROM na_nodes WHERE service = ? ORDER BY url'),
      update: db.prepare<[{ service: string; url: string; capacity: number | null; downed: number | null; backoff: number | null }], NodeRow>(
        `UPDATE na_nodes SET capacity = coalesce(@capacity, capacity), downed = coalesce(@downed, downed),
           backoff = coalesce(@backoff, backoff)
         WHERE service = @service AND url = @url RETURNING *`,
      ),
      remove: db.prepare<[string, string], NodeRow>('DELETE FROM na_nodes WHERE service = ? AND url = ? RETURNING *'),
      candidates: db.prepare<[string, number], NodeRow>(
        `SELECT * FROM na_nodes WHERE service = ? AND ${ELIGIBLE} ORDER BY ${LOAD_RATIO}, url LIMIT ?`,
      ),
      claim: db.prepare<[string, string], NodeRow>(
        `UPDATE na_nodes SET current_load = current_load + 1, available = available - 1
         WHERE service = ? AND url = ? AND ${ELIGIBLE} RETURNING *`,
      ),
      release: db.prepare<[string, string], NodeRow>(
        `UPDATE na_nodes SET current_load = current_load - 1, available = available + 1
         WHERE service = ? AND url = ? AND current_load > 0 RETURNING *`,
      ),
      setAvailable: db.prepare<[number, string, string, number, number]>(
        'UPDATE na_nodes SET available = ? WHERE service = ? AND url = ? AND current_load = ? AND available = ?',
      ),
      replace: db.prepare<[...NodeState, string, string, ...NodeState]>(
        `UPDATE na_nodes SET capacity = ?, current_load = ?, available = ?, downed = ?, backoff = ?
         WHERE service = ? AND url = ? AND capacity = ? AND current_load = ? AND available = ? AND downed = ? AND backoff = ?`,
      ),
      // max(a, b) with two arguments is SQLite's scalar maximum: rules.ts correctedAvailable.
      setLoad: db.prepare<[{ service: string; url: string; from: number; to: number }], NodeRow>(
        `UPDATE na_nodes SET current_load = @to, available = max(0, available + @from - @to)
         WHERE service = @service AND url = @url AND current_load = @from RETURNING *`,
      ),
      releasable: db.prepare<[string], NodeRow>(`SELECT * FROM na_nodes WHERE service = ? AND ${RELEASABLE} ORDER BY url`),
      ping: db.prepare('SELECT 1'),
    };
  }

  /** `file` is a path (parent folders are created) or `:memory:`. */
  static open(file: string): SqliteNodeStore {
    return new SqliteNodeStore(openSqlite(file, SCHEMA));
  }

  /** The query plan of `candidates`, so a test can check that the index serves it. */
  candidatesPlan(): string[] {
    const rows = this.db.prepare(`EXPLAIN QUERY PLAN ${this.stmts.candidates.source}`).all('sync', 1) as Array<{ detail: string }>;
    return rows.map((r) => r.detail);
  }

  async add(node: NodeRecord): Promise<boolean> {
    return this.stmts.add.run(toRow(node)).changes === 1;
  }

  async get(service: string, url: string): Promise<NodeRecord | null> {
    const row = this.stmts.get.get(service, url);
    return row ? fromRow(row) : null;
  }

  async list(service?: string): Promise<NodeRecord[]> {
    const rows = service === undefined ? this.stmts.listAll.all() : this.stmts.listService.all(service);
    return rows.map(fromRow);
  }

  async update(service: string, url: string, patch: NodePatch): Promise<NodeRecord | null> {
    const row = this.stmts.update.get({
      service,
      url,
      capacity: patch.capacity ?? null,
      downed: bit(patch.downed),
      backoff: bit(patch.backoff),
    });
    return row ? fromRow(row) : null;
  }

  async remove(service: string, url: string): Promise<NodeRecord | null> {
    const row = this.stmts.remove.get(service, url);
    return row ? fromRow(row) : null;
  }

  async candidates(service: string, limit: number): Promise<NodeRecord[]> {
    return this.stmts.candidates.all(service, limit).map(fromRow);
  }

  async claim(service: string, url: string): Promise<NodeRecord | null> {
    const row = this.stmts.claim.get(service, url);
    return row ? fromRow(row) : null;
  }

  async release(service: string, url: string): Promise<NodeRecord | null> {
    const row = this.stmts.release.get(service, url) ?? this.stmts.get.get(service, url);
    return row ? fromRow(row) : null;
  }

  async setAvailable(node: NodeRecord, available: number): Promise<boolean> {
    return this.stmts.setAvailable.run(available, node.service, node.url, node.currentLoad, node.available).changes === 1;
  }

  async replace(node: NodeRecord, expected: NodeRecord): Promise<boolean> {
    return this.stmts.replace.run(...state(node), expected.service, expected.url, ...state(expected)).changes === 1;
  }

  async setLoad(service: string, url: string, from: number, to: number): Promise<NodeRecord | null> {
    const row = this.stmts.setLoad.get({ service, url, from, to });
    return row ? fromRow(row) : null;
  }

  async releasable(service: string): Promise<NodeRecord[]> {
    return this.stmts.releasable.all(service).map(fromRow);
  }

  async ping(): Promise<void> {
    this.stmts.ping.get();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
