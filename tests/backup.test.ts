// `backup <file>` (issue #10 item 4): an online SQLite backup taken while
// logins run, verified by the CLI, restored into a fresh data folder under a
// new stack, where every user logs in with the uid it had.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCli } from '../cli/run.js';
import { startTestStack } from './support/stack.js';

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

test('backup of a missing store fails with a message, and refuses a MongoDB store', async () => {
  let out = '';
  const io = { stdout: (t: string) => (out += t), stderr: (t: string) => (out += t) };
  assert.equal(await runCli(['backup', '/tmp/i-ops-never.db'], { DATA_DIR: '/nonexistent-i-ops' }, io), 1);
  assert.match(out, /no such store file/);
  out = '';
  assert.equal(await runCli(['backup', '/tmp/x.db'], { STORE_URL: 'mongodb://127.0.0.1/x' }, io), 2);
  assert.match(out, /mongodump/);
});
