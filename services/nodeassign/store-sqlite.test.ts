import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteNodeStore } from './store-sqlite.js';
import { SqliteUserStore } from '../directory/store-sqlite.js';
import { openNodeStore } from './open-store.js';
import { nodeStoreContract, sampleNode } from './store.contract.js';
import { sampleUser } from '../directory/store.contract.js';

const root = mkdtempSync(path.join(tmpdir(), 'nodes-sqlite-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshFile = () => path.join(root, String(++n), 'nodes.db');

nodeStoreContract('sqlite', async () => SqliteNodeStore.open(freshFile()));

test('sqlite: candidates are read from the partial index, without a sort or a table scan', () => {
  const store = SqliteNodeStore.open(freshFile());
  try {
    const plan = store.candidatesPlan().join('\n');
    assert.match(plan, /USING INDEX na_nodes_candidates/);
    assert.doesNotMatch(plan, /TEMP B-TREE/);
    assert.doesNotMatch(plan, /^SCAN na_nodes$/m);
  } finally {
    void store.close();
  }
});

test('sqlite: the nodes and users stores share one file through openNodeStore', async () => {
  const file = freshFile();
  const nodes = await openNodeStore(`sqlite:${file}`);
  const users = SqliteUserStore.open(file);
  assert.equal(await nodes.add(sampleNode()), true);
  assert.equal(await users.insert(sampleUser()), true);
  assert.equal((await nodes.list()).length, 1);
  assert.equal((await users.get('sync', 'alice@example.com'))?.uid, 1);
  await nodes.close();
  await users.close();
});

test('sqlite: a file with the older exhausted index (backoff excluded) gets the releasable one instead', async () => {
  const file = freshFile();
  const older = SqliteNodeStore.open(file);
  await older.close();
  const db = new Database(file);
  db.exec('DROP INDEX na_nodes_releasable; CREATE INDEX na_nodes_exhausted ON na_nodes (service, url) WHERE available <= 0 AND downed = 0 AND backoff = 0');
  db.close();
  const store = SqliteNodeStore.open(file);
  await store.add(sampleNode({ available: 0, backoff: true }));
  assert.equal((await store.releasable('sync')).length, 1);
  await store.close();
  const check = new Database(file, { readonly: true });
  try {
    const names = (check.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'na_nodes'").all() as Array<{ name: string }>).map((r) => r.name);
    assert.ok(names.includes('na_nodes_releasable') && !names.includes('na_nodes_exhausted'), names.join());
  } finally {
    check.close();
  }
});
