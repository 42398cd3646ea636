// tests/support/children.ts: the children a test process started are stopped when it exits, and, when
// it is killed outright, by the next test process's reaping; a recorded pid that now names another
// process is never signalled.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { isRunning, reapOrphans, RECORDS, startTime, stopOnExit } from './support/children.js';
import { eventually } from './support/services.js';

const PROGRAM = path.join(import.meta.dirname, 'support', 'child-owner-program.ts');

/** Runs the owner program; resolves with it and its child's pid once it has printed it. */
async function owner(args: string[]): Promise<{ proc: ChildProcess; child: number }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', PROGRAM, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = await new Promise<string[]>((resolve) => createInterface({ input: proc.stdout! }).once('line', (l) => resolve([l])));
  return { proc, child: (JSON.parse(line) as { child: number }).child };
}

/** A process that runs until signalled, started without stopOnExit. */
const sleeper = () => spawn(process.execPath, ['-e', 'setInterval(() => {}, 1e9)'], { stdio: 'ignore' });
const POLL = { timeoutMs: 5000, pollMs: 25 };

const exited = (p: ChildProcess) => new Promise((r) => (p.exitCode !== null || p.signalCode !== null ? r(null) : p.once('exit', r)));

test('a child whose test process was killed outright is stopped by the next reaping, and its folder removed', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'children-test-'));
  const { proc, child } = await owner([dir]);
  const record = path.join(RECORDS, `${proc.pid}-${child}`);
  assert.ok(existsSync(record), 'the child is recorded');
  proc.kill('SIGKILL');
  await exited(proc);
  assert.ok(isRunning(child), 'killed outright, the owner stopped nothing');
  // Another test process starting a child may reap it first: either way it stops.
  reapOrphans();
  await eventually('the orphan stops', () => !isRunning(child), POLL);
  assert.equal(existsSync(dir), false, 'its folder is removed');
  assert.equal(existsSync(record), false, 'its record is removed');
});

test('a test process that exits stops its children', async () => {
  const { proc, child } = await owner(['', 'exit']);
  await exited(proc);
  await eventually('the child stops', () => !isRunning(child), POLL);
});

test('the children of a test process that still runs are left alone, and their record goes when they end', async () => {
  const child = sleeper();
  stopOnExit(child);
  const record = path.join(RECORDS, `${process.pid}-${child.pid}`);
  try {
    assert.deepEqual(reapOrphans().filter((pid) => pid === child.pid), []);
    await new Promise((r) => setTimeout(r, 200));
    assert.ok(isRunning(child.pid!));
    assert.ok(existsSync(record));
  } finally {
    const closed = new Promise((r) => child.once('close', r));
    child.kill('SIGKILL');
    await closed;
  }
  assert.equal(existsSync(record), false);
});

test('a recorded pid that now names another process is not signalled', async () => {
  const other = sleeper();
  const dir = mkdtempSync(path.join(tmpdir(), 'children-test-'));
  try {
    await eventually('the process has a start time', () => startTime(other.pid!) !== undefined, POLL);
    mkdirSync(RECORDS, { recursive: true });
    // An owner that is gone (its start time is not this process's) and a child whose start time is not this one's.
    const record = path.join(RECORDS, `${process.pid}-${other.pid}-reused`);
    writeFileSync(record, JSON.stringify({ owner: process.pid, ownerStart: 'gone', pid: other.pid, start: 'earlier', dir }));
    assert.deepEqual(reapOrphans().filter((pid) => pid === other.pid), []);
    await new Promise((r) => setTimeout(r, 200));
    assert.ok(isRunning(other.pid!), 'the process with the reused pid still runs');
    assert.equal(existsSync(record), false, 'the stale record is removed');
    assert.equal(existsSync(dir), false, 'with its folder');
  } finally {
    other.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('startTime tells this process from one that is gone', async () => {
  assert.match(startTime(process.pid) ?? '', /^\d+$/);
  const gone = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  await exited(gone);
  assert.equal(startTime(gone.pid!), undefined);
});
