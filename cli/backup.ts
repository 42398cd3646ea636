// `backup <file>`: an online, consistent copy of the SQLite store through
// SQLite's backup API (services keep running; a plain file copy could catch a
// half-written page or miss the WAL), verified with PRAGMA integrity_check.
import Database from 'better-sqlite3';
import { chmodSync, existsSync, renameSync, rmSync } from 'node:fs';

export interface BackupResult {
  source: string;
  file: string;
  pages: number;
  bytes: number;
  integrity: 'ok';
}

export class BackupFailure extends Error {}

export async function backupSqlite(source: string, file: string): Promise<BackupResult> {
  if (!existsSync(source)) throw new BackupFailure(`${source}: no such store file (STORE_URL / DATA_DIR)`);
  // Written beside the target and renamed once verified: a failed run never leaves a file that looks like a backup.
  const partial = `${file}.partial`;
  const db = new Database(source, { fileMustExist: true });
  let pages = 0;
  try {
    db.pragma('busy_timeout = 5000');
    const progress = await db.backup(partial);
    pages = progress.totalPages;
  } finally {
    db.close();
  }
  try {
    // The users' records: readable by the operator only, like the store itself.
    chmodSync(partial, 0o600);
    const copy = new Database(partial, { fileMustExist: true });
    let problems: string[];
    let bytes: number;
    try {
      problems = (copy.pragma('integrity_check') as Array<{ integrity_check: string }>).map((r) => r.integrity_check).filter((r) => r !== 'ok');
      // A self-contained file: no -wal beside it to carry along.
      copy.pragma('journal_mode = DELETE');
      bytes = (copy.pragma('page_count', { simple: true }) as number) * (copy.pragma('page_size', { simple: true }) as number);
    } finally {
      copy.close();
    }
    if (problems.length > 0) throw new BackupFailure(`the copy failed PRAGMA integrity_check: ${problems.slice(0, 3).join('; ')}`);
    renameSync(partial, file);
    return { source, file, pages, bytes, integrity: 'ok' };
  } catch (e) {
    rmSync(partial, { force: true });
    throw e;
  }
}
