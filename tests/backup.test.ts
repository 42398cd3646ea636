// `backup <file>` (issue #10 item 4): an online SQLite backup taken while
// logins run, verified by the CLI, restored into a fresh data folder under a
// new stack, where every user logs in with the uid it had.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Env } from '../lib/config.js';
import { runCli } from '../cli/run.js';
import { startTestStack } from './support/stack.js';

async function cli(argv: string[], env: Env): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await runCli(argv, env, { stdout: (t) => (out += t), stderr: (t) => (out += t) });
  return { code, out };
}

/** A SQLite store of about 4 MB (1 000 pages): its backup takes several steps, with the event loop free between them. */
function bigStore(dir: string): string {
  const file = path.join(dir, 'store.db');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE t (x BLOB)');
  const insert = db.prepare('INSERT INTO t VALUES (?)');
  db.transaction(() => {
    for (let i = 0; i < 1000; i++) insert.run(Buffer.alloc(4000, i));
  })();
  db.close();
  return file;
}

test('a backup taken under load restores into a fresh data folder and serves logins with the same uids', async () => {
  const spare = mkdtempSync(path.join(tmpdir(), 'backup-'));
  const file = path.join(spare, 'backup.db');
  const stack = await startTestStack();
  const uids = new Map<string, number>();
  try {
    const login = async (email: string) => {
      const res = await stack.login(email);
      assert.equal(res.status, 200, res.text);
      uids.set(email, (res.json as { uid: number }).uid);
    };
    for (let i = 0; i < 10; i++) await login(`before${i}@example.com`);
    let out = '';
    // Logins keep writing while the backup runs.
    const load = Promise.all(Array.from({ length: 20 }, (_, i) => login(`during${i}@example.com`)));
    const code = await runCli(['backup', file, '--json'], stack.env, { stdout: (t) => (out += t), stderr: (t) => (out += t) });
    await load;
    assert.equal(code, 0, out);
    const result = JSON.parse(out);
    assert.equal(result.integrity, 'ok');
    assert.equal(statSync(file).mode & 0o777, 0o600, 'the copy is the operator’s only');
  } finally {
    await stack.close();
  }

  // Restore: the copy becomes the store of a new data folder.
  const restoredDir = mkdtempSync(path.join(tmpdir(), 'restored-'));
  copyFileSync(file, path.join(restoredDir, 'tokenserver.db'));
  const restored = await startTestStack({ STORE_URL: `sqlite:${path.join(restoredDir, 'tokenserver.db')}` });
  try {
    // Every user of before the backup is in it; those written during it are either in it or new.
    for (let i = 0; i < 10; i++) {
      const email = `before${i}@example.com`;
      const res = await restored.login(email);
      assert.equal(res.status, 200, res.text);
      assert.equal((res.json as { uid: number }).uid, uids.get(email), `${email} keeps its uid`);
    }
    const restoredUids = new Set<number>();
    for (let i = 0; i < 20; i++) {
      const res = await restored.login(`during${i}@example.com`);
      assert.equal(res.status, 200, res.text);
      restoredUids.add((res.json as { uid: number }).uid);
    }
    assert.equal(restoredUids.size, 20, 'no uid handed out twice after the restore');
  } finally {
    await restored.close();
    rmSync(restoredDir, { recursive: true, force: true });
    rmSync(spare, { recursive: true, force: true });
  }
});

test('backup of a missing store or into a missing folder fails with a message, and refuses a MongoDB store', async () => {
  let out = '';
  const io = { stdout: (t: string) => (out += t), stderr: (t: string) => (out += t) };
  assert.equal(await runCli(['backup', '/tmp/i-ops-never.db'], { DATA_DIR: '/nonexistent-i-ops' }, io), 1);
  assert.match(out, /no such store file/);
  out = '';
  assert.equal(await runCli(['backup', '/tmp/x.db'], { STORE_URL: 'mongodb://127.0.0.1/x' }, io), 2);
  assert.match(out, /mongodump/);
  const dir = mkdtempSync(path.join(tmpdir(), 'backup-nofolder-'));
  try {
    const r = await cli(['backup', path.join(dir, 'no-such-folder', 'copy.db')], { STORE_URL: `sqlite:${bigStore(dir)}` });
    assert.equal(r.code, 1);
    assert.match(r.out, /no-such-folder\/copy\.db: its folder does not exist/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the copy and its journal are the operator’s only from their first byte, whatever the umask', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'backup-mode-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'out');
  mkdirSync(out);
  const source = bigStore(dir);
  // Every file and folder that appears under out/ while the backup runs, with the modes it had.
  const modes = new Map<string, Set<number>>();
  const watcher = watch(out, { recursive: true }, (_event, name) => {
    const st = lstatSync(path.join(out, String(name)), { throwIfNoEntry: false });
    if (!st) return;
    const seen = modes.get(String(name)) ?? new Set();
    modes.set(String(name), seen.add(st.mode & 0o777));
  });
  const umask = process.umask(0o022);
  try {
    const r = await cli(['backup', path.join(out, 'copy.db')], { STORE_URL: `sqlite:${source}` });
    assert.equal(r.code, 0, r.out);
    // Let the last events arrive.
    await new Promise((resolve) => setTimeout(resolve, 100));
  } finally {
    process.umask(umask);
    watcher.close();
  }
  const names = [...modes.keys()];
  assert.ok(names.some((n) => n.endsWith('-journal')), `the journal was seen while the copy was written: ${names.join(', ')}`);
  for (const [name, seen] of modes) {
    for (const mode of seen) assert.equal(mode & 0o077, 0, `${name} was ${mode.toString(8)} at some point`);
  }
  assert.equal(statSync(path.join(out, 'copy.db')).mode & 0o777, 0o600);
});

test('a link planted at <file>.partial is refused: nothing is written through it, and the link is left alone', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'backup-link-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const source = bigStore(dir);
  const elsewhere = path.join(dir, 'elsewhere');
  mkdirSync(elsewhere);
  const file = path.join(dir, 'copy.db');
  // A link to a file that does not exist yet (the copy would land where its planter reads it), and
  // one to an existing file of the operator's (the copy would overwrite it).
  const victim = path.join(elsewhere, 'authorized_keys');
  writeFileSync(victim, 'ssh-ed25519 AAAA… operator\n', { mode: 0o600 });
  for (const target of [path.join(elsewhere, 'stolen.db'), victim]) {
    symlinkSync(target, `${file}.partial`);
    const r = await cli(['backup', file], { STORE_URL: `sqlite:${source}` });
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /copy\.db\.partial already exists/);
    assert.ok(lstatSync(`${file}.partial`).isSymbolicLink(), 'the link is not removed');
    assert.equal(existsSync(file), false, 'no backup is left');
    rmSync(`${file}.partial`);
  }
  assert.equal(existsSync(path.join(elsewhere, 'stolen.db')), false, 'nothing was written through the link');
  assert.equal(readFileSync(victim, 'utf8'), 'ssh-ed25519 AAAA… operator\n');
  // Without the link the same command works.
  assert.equal((await cli(['backup', file], { STORE_URL: `sqlite:${source}` })).code, 0);
  assert.equal(existsSync(`${file}.partial`), false, 'the work folder is gone after a backup');
});

test('backup refuses to write over the running store or its WAL, under any spelling; the stack keeps serving', async (t) => {
  const stack = await startTestStack();
  const linked = mkdtempSync(path.join(tmpdir(), 'backup-live-'));
  t.after(() => rmSync(linked, { recursive: true, force: true }));
  try {
    const login = async (email: string) => {
      const res = await stack.login(email);
      assert.equal(res.status, 200, res.text);
      return (res.json as { uid: number }).uid;
    };
    const uid = await login('live-store@example.com');
    const store = path.join(stack.dataDir, 'tokenserver.db');
    const inode = statSync(store).ino;
    const linkedDir = path.join(linked, 'data');
    symlinkSync(stack.dataDir, linkedDir);
    for (const target of [store, path.join(stack.dataDir, '.', 'tokenserver.db'), path.join(linkedDir, 'tokenserver.db'), `${store}-wal`, `${store}-shm`]) {
      const r = await cli(['backup', target], stack.env);
      assert.equal(r.code, 1, `${target}: ${r.out}`);
      assert.match(r.out, /is the live store/, target);
    }
    assert.equal(statSync(store).ino, inode, 'the store file is the one the services opened');
    assert.equal(await login('live-store@example.com'), uid);
  } finally {
    await stack.close();
  }
});
