import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteUserStore } from './store-sqlite.js';
import { openUserStore } from './open-store.js';
import { sampleUser, userStoreContract } from './store.contract.js';

const root = mkdtempSync(path.join(tmpdir(), 'users-sqlite-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshFile = () => path.join(root, String(++n), 'users.db');

userStoreContract('sqlite', async () => SqliteUserStore.open(freshFile()));

test('sqlite: openUserStore(sqlite:<path>) creates parent folders and keeps data across reopen', async () => {
  const file = freshFile();
  const store = await openUserStore(`sqlite:${file}`);
  assert.ok(existsSync(file));
  await store.insert(sampleUser({ uid: 5 }));
  const uid = await store.nextUid();
  await store.close();
  const again = await openUserStore(`sqlite:${file}`);
  assert.equal((await again.get('sync', 'alice@example.com'))?.uid, 5);
  assert.ok((await again.nextUid()) > uid, 'the uid counter survives a restart');
  await again.close();
});

test('sqlite: two connections on one file see each other and never share a uid', async () => {
  const file = freshFile();
  const a = SqliteUserStore.open(file);
  const b = SqliteUserStore.open(file);
  const uids = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).nextUid()));
  assert.equal(new Set(uids).size, 20);
  assert.equal(await a.insert(sampleUser()), true);
  assert.equal(await b.insert(sampleUser({ uid: 2 })), false);
  await a.close();
  await b.close();
});

test('sqlite: a file from before state_changes and keys_changed_at gets the columns; its users read as having made no change', async () => {
  const file = freshFile();
  mkdirSync(path.dirname(file), { recursive: true });
  const old = new Database(file);
  old.exec(`CREATE TABLE dir_users (service TEXT NOT NULL, email TEXT NOT NULL, uid INTEGER NOT NULL, node TEXT NOT NULL,
    generation INTEGER NOT NULL, client_state TEXT NOT NULL, seen_client_states TEXT NOT NULL, replaced TEXT NOT NULL,
    created_at INTEGER NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (service, email)) WITHOUT ROWID`);
  old.prepare('INSERT INTO dir_users VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').run(
    'sync', 'old@example.com', 3, 'https://n.example', 2, 'bbbb', '["aaaa"]', '[{"uid":1,"node":"https://n.example","replacedAt":5}]', 7, 4,
  );
  old.close();
  const store = SqliteUserStore.open(file);
  try {
    const rec = await store.get('sync', 'old@example.com');
    assert.deepEqual(rec?.stateChanges, []);
    assert.equal(rec?.keysChangedAt, null, 'no keys_changed_at column before: none');
    assert.deepEqual(rec?.replaced, [{ uid: 1, node: 'https://n.example', replacedAt: 5, released: false }]);
    assert.equal(await store.replace({ ...rec!, stateChanges: [9], keysChangedAt: 1234, version: 5 }, 4), true);
    assert.deepEqual((await store.get('sync', 'old@example.com'))?.stateChanges, [9]);
    assert.equal((await store.get('sync', 'old@example.com'))?.keysChangedAt, 1234);
    assert.equal((await store.listByEmail('old@example.com')).length, 1);
  } finally {
    await store.close();
  }
  // Opening again (the column exists now) is fine.
  await SqliteUserStore.open(file).close();
});

test('sqlite: a file from before the uid index gets it built from its records; records sharing a uid stop the start, named', async () => {
  const file = freshFile();
  const store = SqliteUserStore.open(file);
  const old = (uid: number) => ({ uid, node: 'https://n.example', replacedAt: 1, released: false });
  await store.insert(sampleUser({ email: 'alice@x', uid: 17 }));
  await store.insert(sampleUser({ email: 'alice2@x', uid: 18 }));
  await store.insert(sampleUser({ email: 'bob@x', uid: 20, replaced: [old(21)] }));
  await store.close();
  // As a file made before the index: no dir_uids rows, no mark that it was built.
  const raw = new Database(file);
  raw.exec("DELETE FROM dir_uids; DELETE FROM dir_counters WHERE name = 'uid_index'");
  raw.close();
  const rebuilt = SqliteUserStore.open(file);
  assert.deepEqual((await rebuilt.uidHolders([17, 21])).map((h) => [h.uid, h.email]), [
    [17, 'alice@x'],
    [21, 'bob@x'],
  ]);
  await rebuilt.close();
  // Two accounts on uid 17, and 18 both live and replaced, written past the index.
  const bad = new Database(file);
  bad.exec("DELETE FROM dir_uids; DELETE FROM dir_counters WHERE name = 'uid_index'");
  bad.prepare("UPDATE dir_users SET uid = 17, replaced = ? WHERE email = 'bob@x'").run(JSON.stringify([old(18)]));
  bad.close();
  assert.throws(
    () => SqliteUserStore.open(file),
    (e: Error) =>
      /^the users store holds uids on more than one account \(uid 17: sync (alice|bob)@x, sync (alice|bob)@x; uid 18: sync (alice2|bob)@x, sync (alice2|bob)@x\)/.test(e.message) &&
      /restore the store from a backup/.test(e.message),
  );
  // Nothing was changed by the refused start: it refuses again.
  assert.throws(() => SqliteUserStore.open(file), /uid 17/);
});
