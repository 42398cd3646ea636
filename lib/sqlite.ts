// SQLite connections for the embedded stores: one file may hold both the
// users and the nodes tables, each store with its own connection.
import Database from 'better-sqlite3';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';

const OPEN_ATTEMPTS = 50;
const OPEN_RETRY_MS = 100;

function isBusy(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}

/**
 * Runs `step`, retrying while another connection holds the lock. Switching a
 * new file to WAL can answer SQLITE_BUSY at once, without the busy handler,
 * when two stores open the same new file at the same moment.
 */
export function retryWhileBusy<T>(step: () => T, attempts = OPEN_ATTEMPTS): T {
  for (let i = 1; ; i++) {
    try {
      return step();
    } catch (err) {
      if (!isBusy(err) || i >= attempts) throw err;
      // Start-up only: a synchronous pause keeps the opener synchronous.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, OPEN_RETRY_MS);
    }
  }
}

/** Opens (creating folders and schema as needed) a SQLite database shared by the stores. */
export function openSqlite(file: string, schema: string): Database.Database {
  if (file !== ':memory:') {
    mkdirSync(path.dirname(path.resolve(file)), { recursive: true, mode: 0o700 });
    // Created 0600 before SQLite opens it: SQLite would use the umask (often 0644), and
    // it gives the -wal and -shm files the database file's mode.
    closeSync(openSync(file, 'a', 0o600));
  }
  const db = new Database(file);
  // Another process (or the other store) may hold the write lock for a moment.
  db.pragma('busy_timeout = 5000');
  retryWhileBusy(() => db.pragma('journal_mode = WAL'));
  db.pragma('synchronous = NORMAL');
  retryWhileBusy(() => db.exec(schema));
  return db;
}
