import { after, test } from 'node:test';
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
