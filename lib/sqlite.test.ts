import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openSqlite, retryWhileBusy } from './sqlite.js';

test('retryWhileBusy retries SQLITE_BUSY, gives up after its attempts, passes other errors through', () => {
  let calls = 0;
  const busy = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
  assert.equal(
    retryWhileBusy(() => {
      calls++;
      if (calls < 3) throw busy;
      return 'ok';
    }),
    'ok',
  );
  assert.equal(calls, 3);
  calls = 0;
  assert.throws(() => retryWhileBusy(() => { calls++; throw busy; }, 2), /locked/);
  assert.equal(calls, 2);
  calls = 0;
  assert.throws(() => retryWhileBusy(() => { calls++; throw new Error('other'); }), /other/);
  assert.equal(calls, 1);
});

test('openSqlite creates folders, switches to WAL, and two stores can share a new file', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sqlite-'));
  try {
    const file = path.join(dir, 'a', 'b', 'db.sqlite');
    const one = openSqlite(file, 'CREATE TABLE IF NOT EXISTS t1 (x INTEGER)');
    const two = openSqlite(file, 'CREATE TABLE IF NOT EXISTS t2 (y INTEGER)');
    assert.equal(one.pragma('journal_mode', { simple: true }), 'wal');
    one.prepare('INSERT INTO t2 (y) VALUES (1)').run();
    assert.deepEqual(two.prepare('SELECT count(*) AS n FROM t2').get(), { n: 1 });
    one.close();
    two.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('openSqlite creates the database (and its WAL files) readable by the owner only, in a 0700 folder', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sqlite-'));
  try {
    const file = path.join(dir, 'data', 'db.sqlite');
    const db = openSqlite(file, 'CREATE TABLE IF NOT EXISTS t (x INTEGER)');
    db.prepare('INSERT INTO t (x) VALUES (1)').run();
    const mode = (f: string) => statSync(f).mode & 0o777;
    assert.equal(mode(file), 0o600);
    assert.equal(mode(`${file}-wal`), 0o600);
    assert.equal(mode(path.dirname(file)), 0o700);
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
