// Child processes a test started (services, Redis, syncserver), stopped when the test process exits,
// however it ends: a test that fails before its stop() would otherwise leave them running. A test
// process killed outright (a mutation run's timeout) runs no exit handler, so each child is also
// recorded in a folder of records, and the next test process to start a child stops the children
// whose test process is gone.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** The records: one file per child, `<test pid>-<child pid>`. */
export const RECORDS = path.join(tmpdir(), 'test-children');
/** An orphan still running this long after its SIGTERM is killed (while the reaping process still runs). */
const KILL_AFTER_MS = 10_000;

interface ChildRecord {
  owner: number;
  ownerStart: string;
  pid: number;
  start: string;
  /** A folder of the child's own, removed with it (a Redis server's). */
  dir?: string;
}

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) {
    // A paused child (SIGSTOP) acts on SIGTERM only once it runs again.
    c.kill('SIGCONT');
    c.kill('SIGTERM');
  }
});

/**
 * The kernel's start time of `pid` (clock ticks since boot), which tells a process from a later one
 * given the same pid; undefined when there is no such process, or no /proc.
 */
export function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22; the fields after the command's closing parenthesis start at field 3.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

let reaped = false;
/** This process's own start time, in each of its records. */
const OWN_START = startTime(process.pid);

/**
 * Stops `child` when this process exits, unless it has ended by then; `dir`, a folder of the
 * child's own, goes with it if this process is killed before it could remove it.
 */
export function stopOnExit(child: ChildProcess, o: { dir?: string } = {}): void {
  if (!reaped) {
    reaped = true;
    reapOrphans();
  }
  const record = child.pid === undefined ? undefined : writeRecord(child.pid, o.dir);
  children.add(child);
  child.once('close', () => {
    children.delete(child);
    if (record) rmSync(record, { force: true });
  });
}

function writeRecord(pid: number, dir: string | undefined): string | undefined {
  const start = startTime(pid);
  // Without /proc nothing could tell the child from a later process with its pid: no record.
  if (OWN_START === undefined || start === undefined) return undefined;
  mkdirSync(RECORDS, { recursive: true });
  const file = path.join(RECORDS, `${process.pid}-${pid}`);
  const record: ChildRecord = { owner: process.pid, ownerStart: OWN_START, pid, start, ...(dir ? { dir } : {}) };
  // Written whole or not at all: another test process may be reading the folder.
  writeFileSync(`${file}.tmp`, JSON.stringify(record));
  renameSync(`${file}.tmp`, file);
  return file;
}

/**
 * Stops the children whose test process is gone, with SIGTERM (so a service stops its own workers),
 * then SIGKILL if one still runs 10 s later; removes their folders and records. A process is signalled
 * only while its start time is the recorded one. Returns the pids signalled.
 */
export function reapOrphans(): number[] {
  let names: string[];
  try {
    names = readdirSync(RECORDS);
  } catch {
    return [];
  }
  const signalled: number[] = [];
  for (const name of names) {
    if (name.endsWith('.tmp')) continue;
    const file = path.join(RECORDS, name);
    let r: ChildRecord;
    try {
      r = JSON.parse(readFileSync(file, 'utf8')) as ChildRecord;
    } catch {
      // Removed by another test process meanwhile.
      continue;
    }
    if (startTime(r.owner) === r.ownerStart) continue;
    if (startTime(r.pid) === r.start) {
      try {
        process.kill(r.pid, 'SIGCONT');
        process.kill(r.pid, 'SIGTERM');
        signalled.push(r.pid);
        setTimeout(() => {
          try {
            if (startTime(r.pid) === r.start) process.kill(r.pid, 'SIGKILL');
          } catch {
            // Gone between the two.
          }
        }, KILL_AFTER_MS).unref();
      } catch {
        // Gone meanwhile, or not ours to signal.
      }
    }
    if (r.dir) rmSync(r.dir, { recursive: true, force: true });
    rmSync(file, { force: true });
  }
  return signalled;
}

/** Whether a process with this pid exists (one this process may not signal counts too). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
