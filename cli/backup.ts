// `backup <file>`: an online, consistent copy of the SQLite store through
// SQLite's backup API (services keep running; a plain file copy could catch a
// half-written page or miss the WAL), verified with PRAGMA integrity_check.
import Database from 'better-sqlite3';
import { closeSync, existsSync, lstatSync, mkdirSync, openSync, realpathSync, renameSync, rmSync, type Stats } from 'node:fs';
import path from 'node:path';

export interface BackupResult {
  source: string;
  file: string;
  pages: number;
  bytes: number;
  integrity: 'ok';
}

export class BackupFailure extends Error {}

/** The files SQLite keeps for a store beside its own: overwriting any of them corrupts it. */
const STORE_COMPANIONS = ['', '-wal', '-shm', '-journal'];

const sameFile = (a: Stats, b: Stats) => a.dev === b.dev && a.ino === b.ino;

/**
 * Refuses a target that is the store being copied or one of its companion
 * files: the copy would be renamed over the running database. Compared by
 * path (with the folders' links resolved) and, for existing files, by inode,
 * so another spelling of the same file is refused too.
 */
function refuseLiveStore(source: string, file: string): void {
  const store = realpathSync(source);
  let target: string;
  try {
    target = path.join(realpathSync(path.dirname(path.resolve(file))), path.basename(file));
  } catch {
    throw new BackupFailure(`${file}: its folder does not exist`);
  }
  const targetStat = lstatSync(target, { throwIfNoEntry: false });
  for (const suffix of STORE_COMPANIONS) {
    const live = `${store}${suffix}`;
    const liveStat = lstatSync(live, { throwIfNoEntry: false });
    if (target === live || (targetStat && liveStat && sameFile(targetStat, liveStat))) {
      throw new BackupFailure(`${file} is the live store${suffix ? `'s ${suffix.slice(1)} file` : ''} (${source}): write the backup elsewhere`);
    }
  }
}

export async function backupSqlite(source: string, file: string): Promise<BackupResult> {
  if (!existsSync(source)) throw new BackupFailure(`${source}: no such store file (STORE_URL / DATA_DIR)`);
  refuseLiveStore(source, file);
  // Written in a folder of its own beside the target and renamed once verified: a failed run never
  // leaves a file that looks like a backup. mkdir makes it new (an existing path, a link included, is
  // refused) and private, so the copy and the journal, WAL and shm files SQLite makes next to it are
  // never opened through a link someone planted.
  const work = `${file}.partial`;
  try {
    mkdirSync(work, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    throw new BackupFailure(`${work} already exists (another backup running, or one that was killed): remove it if no backup is running`);
  }
  const partial = path.join(work, path.basename(file));
  try {
    // The users' records: the operator's only from the first byte. SQLite gives its journal,
    // WAL and shm files the database file's mode.
    closeSync(openSync(partial, 'wx', 0o600));
    const db = new Database(source, { fileMustExist: true });
    let pages = 0;
    try {
      db.pragma('busy_timeout = 5000');
      const progress = await db.backup(partial);
      pages = progress.totalPages;
    } finally {
      db.close();
    }
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
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
