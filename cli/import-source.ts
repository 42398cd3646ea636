// `import`'s reading edge: Mozilla's tokenserver database on MySQL/MariaDB
// (mysql2) or PostgreSQL (pg), read-only. The users table is streamed in
// (email, created_at) order, which its lookup index serves, so memory stays
// flat however many rows there are and one account's rows arrive together.
import type { Readable } from 'node:stream';
import type { RawNode, RawUser } from './import-rules.js';

export interface MozillaSource {
  /** Mozilla's id of the service, or null when it has none of that name. */
  serviceId(name: string): Promise<number | null>;
  serviceNames(): Promise<string[]>;
  nodes(serviceId: number): Promise<RawNode[]>;
  /** How many users rows the service has, for the progress bar. */
  userRows(serviceId: number): Promise<number>;
  /** The highest uid of any service (0 when none): uids are one sequence there as here. Exact, beyond 2^53 too. */
  maxUid(): Promise<bigint>;
  /** The service's users rows, ordered by e-mail. */
  users(serviceId: number): AsyncIterable<RawUser>;
  /** The service's e-mails, one per row, streamed. */
  emails(serviceId: number): AsyncIterable<{ email: string }>;
  /** Uids held by more than one row (of any service), at most `limit`: Mozilla's primary key forbids them, a hand-made table may not. */
  duplicateUids(limit: number): Promise<string[]>;
  close(): Promise<void>;
}

const CONNECT_TIMEOUT_MS = 10_000;
/** Rows fetched per round trip while streaming. */
const FETCH_ROWS = 1000;

const NODES_COLUMNS = 'id, node, available, current_load, capacity, downed, backoff';
const USERS_COLUMNS = 'uid, email, generation, client_state, created_at, replaced_at, nodeid, keys_changed_at';

export function sourceKind(url: string): 'postgres' | 'mysql' | null {
  if (/^postgres(ql)?:\/\//i.test(url)) return 'postgres';
  if (/^mysql:\/\//i.test(url)) return 'mysql';
  return null;
}

export async function openSource(url: string): Promise<MozillaSource> {
  const kind = sourceKind(url);
  if (kind === 'postgres') return openPostgres(url);
  if (kind === 'mysql') return openMysql(url);
  throw new Error('expected a mysql:// or postgres:// URL');
}

function asNumber(v: unknown): number {
  return v === null || v === undefined ? 0 : Number(v);
}

type Rows = Array<Record<string, unknown>>;

/**
 * The queries, the same on both servers but for the placeholder: `$1` on
 * PostgreSQL, `?` on MySQL. `stream` runs the users query as a cursor.
 */
function mozillaSource(
  placeholder: string,
  query: (sql: string, params?: unknown[]) => Promise<Rows>,
  stream: <R>(sql: string, params: unknown[]) => AsyncIterable<R>,
  close: () => Promise<void>,
): MozillaSource {
  return {
    async serviceId(name) {
      const rows = await query(`SELECT id FROM services WHERE service = ${placeholder}`, [name]);
      return rows.length > 0 ? asNumber(rows[0].id) : null;
    },
    async serviceNames() {
      return (await query('SELECT service FROM services ORDER BY service')).map((r) => String(r.service));
    },
    async nodes(serviceId) {
      return (await query(`SELECT ${NODES_COLUMNS} FROM nodes WHERE service = ${placeholder} ORDER BY id`, [serviceId])) as unknown as RawNode[];
    },
    async userRows(serviceId) {
      return asNumber((await query(`SELECT count(*) AS n FROM users WHERE service = ${placeholder}`, [serviceId]))[0].n);
    },
    async maxUid() {
      const m = (await query('SELECT max(uid) AS m FROM users'))[0].m;
      return m === null || m === undefined ? 0n : BigInt(m as string | number | bigint);
    },
    users(serviceId) {
      return stream<RawUser>(`SELECT ${USERS_COLUMNS} FROM users WHERE service = ${placeholder} ORDER BY email, created_at`, [serviceId]);
    },
    emails(serviceId) {
      // Not DISTINCT: MySQL's usual collations call 'a@X.example' and 'a@x.example' equal and would keep one spelling.
      return stream<{ email: string }>(`SELECT email FROM users WHERE service = ${placeholder}`, [serviceId]);
    },
    async duplicateUids(limit) {
      // As text: a uid beyond 2^53 must not round onto another.
      const rows = await query(`SELECT uid FROM users GROUP BY uid HAVING count(*) > 1 ORDER BY uid LIMIT ${Number(limit)}`);
      return rows.map((r) => String(r.uid));
    },
    close,
  };
}

async function openPostgres(url: string): Promise<MozillaSource> {
  const { default: pg } = await import('pg');
  const { default: QueryStream } = await import('pg-query-stream');
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, application_name: 'tokenserver-import' });
  await client.connect();
  // A failure after connect (the server going away) arrives as an event; the pending query reports it.
  client.on('error', () => undefined);
  return mozillaSource(
    '$1',
    async (sql, params) => (await client.query(sql, params)).rows,
    // A cursor: the server hands the rows over FETCH_ROWS at a time, as the consumer reads them.
    <R>(sql: string, params: unknown[]) => client.query(new QueryStream(sql, params, { batchSize: FETCH_ROWS, highWaterMark: FETCH_ROWS })) as AsyncIterable<R>,
    () => client.end(),
  );
}

async function openMysql(url: string): Promise<MozillaSource> {
  const { default: mysql } = await import('mysql2');
  // BIGINT columns as strings: uids and generations may exceed 2^53 (a deleted account's is 2^63 - 1).
  const conn = mysql.createConnection({ uri: url, supportBigNumbers: true, bigNumberStrings: true, connectTimeout: CONNECT_TIMEOUT_MS });
  conn.on('error', () => undefined);
  const db = conn.promise();
  await db.connect();
  return mozillaSource(
    '?',
    async (sql, params) => (await db.query(sql, params))[0] as Rows,
    // Rows arrive as the server sends them; the stream pauses the socket while the consumer is busy.
    <R>(sql: string, params: unknown[]) => conn.query(sql, params).stream({ highWaterMark: FETCH_ROWS }) as Readable & AsyncIterable<R>,
    () => db.end(),
  );
}
