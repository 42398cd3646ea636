// docs/scaling.md's index set is the one the MongoDB stores create: both stores
// open on a fresh database (as directory and nodeassign share one in
// production), the server lists what they made, and the table in the doc must
// say exactly that: every collection, every index, its keys in order, unique,
// partial filter and TTL. Shard keys are chosen from that table, so it must not
// drift from the code.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { MongoClient, type Document } from 'mongodb';
import { MongoUserStore } from '../services/directory/store-mongo.js';
import { MongoNodeStore } from '../services/nodeassign/store-mongo.js';
import { envMongo, freshDatabase } from './support/mongo.js';

const DOC = new URL('../docs/scaling.md', import.meta.url);
const HEADING = /^#{2,4} The index set\s*$/;
const HEADER = ['collection', 'index', 'keys', 'unique', 'options'];

interface IndexRow {
  collection: string;
  name: string;
  /** Fields and directions in index order. */
  key: Array<[string, unknown]>;
  unique: boolean;
  partial?: Document;
  ttlSeconds?: number;
}

/** `{ a: 1, b: { $gt: 0 } }` as written in the doc (bare keys) to a document. */
function looseDocument(text: string, where: string): Document {
  const json = text.replace(/([{,]\s*)([$A-Za-z_][\w.$]*)\s*:/g, '$1"$2":');
  try {
    const value: unknown = JSON.parse(json);
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value as Document;
  } catch {
    // reported below
  }
  throw new Error(`${where}: not a document: ${text}`);
}

/** The rows of the table under the heading "The index set". */
function parseIndexTable(markdown: string): IndexRow[] {
  const lines = markdown.split('\n');
  const at = lines.findIndex((l) => HEADING.test(l));
  if (at < 0) throw new Error('no heading "The index set"');
  const start = lines.findIndex((l, i) => i > at && l.startsWith('|'));
  if (start < 0) throw new Error('no table under "The index set"');
  const cells = (line: string) => line.trim().replace(/^\||\|$/g, '').split('|').map((c) => c.trim().replace(/`/g, ''));
  assert.deepEqual(cells(lines[start]), HEADER, 'the index table has the columns collection | index | keys | unique | options');
  const rows: IndexRow[] = [];
  for (let i = start + 2; i < lines.length && lines[i].startsWith('|'); i++) {
    const [collection, name, keys, unique, options, ...rest] = cells(lines[i]);
    const where = `docs/scaling.md line ${i + 1}`;
    if (rest.length > 0 || options === undefined) throw new Error(`${where}: expected ${HEADER.length} cells`);
    if (unique !== 'yes' && unique !== 'no') throw new Error(`${where}: unique is yes or no, got ${JSON.stringify(unique)}`);
    const row: IndexRow = { collection, name, key: Object.entries(looseDocument(keys, where)), unique: unique === 'yes' };
    if (options !== '—') {
      for (const option of options.split(/;\s*/)) {
        const partial = /^partial: (\{.*\})$/.exec(option);
        const ttl = /^TTL: (\d+) s$/.exec(option);
        if (partial) row.partial = looseDocument(partial[1], where);
        else if (ttl) row.ttlSeconds = Number(ttl[1]);
        else throw new Error(`${where}: unknown option ${JSON.stringify(option)} (partial: {…} or TTL: N s)`);
      }
    }
    rows.push(row);
  }
  return rows;
}

const KNOWN = new Set(['v', 'key', 'name', 'ns', 'unique', 'partialFilterExpression', 'expireAfterSeconds']);

/** An index as listIndexes describes it, in the doc's terms. The _id index is unique without saying so. */
function fromListIndexes(collection: string, ix: Document): IndexRow {
  const other = Object.keys(ix).filter((k) => !KNOWN.has(k));
  if (other.length > 0) throw new Error(`${collection}.${ix.name} has options the index table cannot say: ${other.join(', ')}`);
  return {
    collection,
    name: ix.name,
    key: Object.entries(ix.key as Document),
    unique: ix.unique === true || ix.name === '_id_',
    ...(ix.partialFilterExpression ? { partial: ix.partialFilterExpression } : {}),
    ...(ix.expireAfterSeconds !== undefined ? { ttlSeconds: ix.expireAfterSeconds } : {}),
  };
}

const byName = (a: IndexRow, b: IndexRow) => `${a.collection}.${a.name}`.localeCompare(`${b.collection}.${b.name}`);

test('the index table parser: keys in order, unique, partial filter and TTL; anything else is refused', () => {
  const doc = [
    '## The index set',
    '',
    '| collection | index | keys | unique | options |',
    '|---|---|---|---|---|',
    '| `a` | `b_c` | `{ b: 1, c: -1 }` | yes | — |',
    '| `a` | `p` | `{ d: 1 }` | no | partial: `{ e: { $gt: 0 }, f: false }`; TTL: 60 s |',
    '',
  ].join('\n');
  assert.deepEqual(parseIndexTable(doc), [
    { collection: 'a', name: 'b_c', key: [['b', 1], ['c', -1]], unique: true },
    { collection: 'a', name: 'p', key: [['d', 1]], unique: false, partial: { e: { $gt: 0 }, f: false }, ttlSeconds: 60 },
  ]);
  assert.throws(() => parseIndexTable(doc.replace('TTL: 60 s', 'sparse')), /unknown option "sparse"/);
  assert.throws(() => parseIndexTable(doc.replace('| yes |', '| true |')), /unique is yes or no/);
  assert.throws(() => parseIndexTable(doc.replace('{ d: 1 }', '{ d: 1')), /not a document/);
  assert.throws(() => parseIndexTable(doc.replace('The index set', 'Indexes')), /no heading/);
});

const target = envMongo();
after(() => target.stop());

test(`${target.name}: docs/scaling.md's index set is exactly what the MongoDB stores create`, async (t) => {
  if (!target.url) {
    t.skip(target.skipReason);
    return;
  }
  const documented = parseIndexTable(readFileSync(DOC, 'utf8')).sort(byName);
  const url = freshDatabase(target, 'index_set');
  const users = await MongoUserStore.open(url);
  const nodes = await MongoNodeStore.open(url);
  const client = await new MongoClient(url, { serverSelectionTimeoutMS: 5000 }).connect();
  try {
    const db = client.db();
    const created: IndexRow[] = [];
    for (const { name } of await db.listCollections({}, { nameOnly: true }).toArray()) {
      for (const ix of await db.collection(name).listIndexes().toArray()) created.push(fromListIndexes(name, ix));
    }
    created.sort(byName);
    assert.deepEqual(
      [...new Set(documented.map((r) => r.collection))].sort(),
      [...new Set(created.map((r) => r.collection))].sort(),
      'the collections of the index table are the collections the stores create',
    );
    assert.deepEqual(documented, created, 'docs/scaling.md "The index set" lists the indexes the stores create');
  } finally {
    await client.close();
    await users.close();
    await nodes.close();
  }
});
