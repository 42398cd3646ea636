// SQLite connections for the embedded stores: one file may hold both the
// users and the nodes tables, each store with its own connection.
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

/** Opens (creating folders and schema as needed) a SQLite database shared by the stores. */
export function openSqlite(file: string, schema: string): Database.Database {
  if (file !== ':memory:') mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const db = new Database(file);
  // Another process (or the other store) may hold the write lock for a moment.
  db.pragma('busy_timeout = 5000');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(schema);
  return db;
}
