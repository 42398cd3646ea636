import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequest } from '../../lib/errors.js';
import {
  importedNodeProblem,
  nodeImportOutcome,
  capacityProblem,
  correctedAvailable,
  initialAvailable,
  isEligible,
  isReleasable,
  loadDrift,
  nodeInputProblem,
  pickNode,
  rankNodes,
  reconcileNodes,
  releasedAvailable,
  serviceProblem,
  nodeUrlForm,
  urlProblem,
} from './rules.js';
import type { NodeRecord } from './store.js';

function node(o: Partial<NodeRecord> = {}): NodeRecord {
  return { service: 'sync', url: 'https://n.example.com', capacity: 100, currentLoad: 10, available: 5, downed: false, backoff: false, ...o };
}

test('isEligible: every condition can exclude a node', () => {
  assert.equal(isEligible(node()), true);
  assert.equal(isEligible(node({ available: 0 })), false, 'no slots');
  assert.equal(isEligible(node({ available: -1 })), false, 'negative slots');
  assert.equal(isEligible(node({ currentLoad: 100 })), false, 'full');
  assert.equal(isEligible(node({ currentLoad: 101 })), false, 'over capacity');
  assert.equal(isEligible(node({ capacity: 0, currentLoad: 0 })), false, 'zero capacity');
  assert.equal(isEligible(node({ downed: true })), false, 'downed');
  assert.equal(isEligible(node({ backoff: true })), false, 'backoff');
});

test('isReleasable: no slots, room below capacity and not down; backoff is no bar', () => {
  assert.equal(isReleasable(node({ available: 0 })), true);
  assert.equal(isReleasable(node({ available: -3 })), true, 'overdrawn slots');
  assert.equal(isReleasable(node({ available: 0, backoff: true })), true, 'backoff');
  assert.equal(isReleasable(node({ available: 1 })), false, 'slots left');
  assert.equal(isReleasable(node({ available: 0, currentLoad: 100 })), false, 'full');
  assert.equal(isReleasable(node({ available: 0, currentLoad: 101 })), false, 'over capacity');
  assert.equal(isReleasable(node({ available: 0, capacity: 0, currentLoad: 0 })), false, 'zero capacity');
  assert.equal(isReleasable(node({ available: 0, downed: true })), false, 'downed');
});

test('pickNode: lowest load ratio wins, not lowest load', () => {
  const big = node({ url: 'https://big.example.com', capacity: 1000, currentLoad: 50 }); // 0.05
  const small = node({ url: 'https://small.example.com', capacity: 10, currentLoad: 1 }); // 0.1
  assert.equal(pickNode([small, big])?.url, big.url);
});

test('pickNode: ties go to the lowest url, whatever the input order', () => {
  const a = node({ url: 'https://a.example.com', capacity: 10, currentLoad: 5 });
  const b = node({ url: 'https://b.example.com', capacity: 100, currentLoad: 50 });
  assert.equal(pickNode([b, a])?.url, a.url);
  assert.equal(pickNode([a, b])?.url, a.url);
});

test('pickNode: skips ineligible nodes; null when none is left', () => {
  const downed = node({ url: 'https://a.example.com', currentLoad: 0, downed: true });
  const ok = node({ url: 'https://b.example.com', currentLoad: 90 });
  assert.equal(pickNode([downed, ok])?.url, ok.url);
  assert.equal(pickNode([downed]), null);
  assert.equal(pickNode([]), null);
});

test('rankNodes: the whole eligible list in allocation order', () => {
  const nodes = [
    node({ url: 'https://c.example.com', currentLoad: 30 }),
    node({ url: 'https://a.example.com', currentLoad: 20, backoff: true }),
    node({ url: 'https://b.example.com', currentLoad: 30 }),
    node({ url: 'https://d.example.com', currentLoad: 0 }),
  ];
  assert.deepEqual(rankNodes(nodes).map((n) => n.url), ['https://d.example.com', 'https://b.example.com', 'https://c.example.com']);
});

test('initialAvailable: ceil(capacity × rate), bounded by capacity, free of float noise', () => {
  assert.equal(initialAvailable(100, 0.1), 10);
  assert.equal(initialAvailable(101, 0.1), 11);
  assert.equal(initialAvailable(3, 0.1), 1);
  assert.equal(initialAvailable(100, 0.7), 70);
  assert.equal(initialAvailable(10, 1), 10);
  assert.equal(initialAvailable(0, 0.5), 0);
  assert.equal(initialAvailable(1_000_001, 0.1), 100_001);
});

test('releasedAvailable: ceil(capacity × rate), at most the room left, never negative', () => {
  assert.equal(releasedAvailable(node({ capacity: 100, currentLoad: 10 }), 0.1), 10);
  assert.equal(releasedAvailable(node({ capacity: 100, currentLoad: 95 }), 0.1), 5);
  assert.equal(releasedAvailable(node({ capacity: 100, currentLoad: 100 }), 0.1), 0);
  assert.equal(releasedAvailable(node({ capacity: 100, currentLoad: 120 }), 0.1), 0);
  assert.equal(releasedAvailable(node({ capacity: 100, currentLoad: 0 }), 0.7), 70);
});

test('serviceProblem and capacityProblem', () => {
  assert.equal(serviceProblem('sync'), null);
  assert.ok(serviceProblem('') instanceof BadRequest);
  assert.ok(serviceProblem('s'.repeat(256)) instanceof BadRequest);
  assert.equal(capacityProblem(0), null);
  assert.equal(capacityProblem(10_000), null);
  for (const bad of [-1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 1]) assert.ok(capacityProblem(bad) instanceof BadRequest, String(bad));
});

test('urlProblem: absolute http(s) without trailing slash, query, fragment or credentials', () => {
  for (const ok of ['https://node1.example.com', 'http://127.0.0.1:8080', 'https://example.com/storage', 'http://[::1]:8000', 'https://xn--e1afmkfd.example', 'https://a-b.example/x/y']) {
    assert.equal(urlProblem(ok), null, ok);
  }
  const bad: Array<[string, RegExp]> = [
    ['', /1 to 2048/],
    ['https://' + 'a'.repeat(2048), /1 to 2048/],
    ['node1.example.com', /absolute http or https URL/],
    ['ftp://node1.example.com', /http or https/],
    ['https://node1.example.com/', /^url must not end with a slash: write it as https:\/\/node1\.example\.com$/],
    ['https://node1.example.com/storage/', /slash: write it as https:\/\/node1\.example\.com\/storage$/],
    [' https://node1.example.com', /must be written as https:\/\/node1\.example\.com,/],
    ['https://node1.example.com?x=1', /query or fragment/],
    ['https://node1.example.com?', /query or fragment/],
    ['https://node1.example.com#top', /query or fragment/],
    ['https://user:pw@node1.example.com', /credentials/],
  ];
  for (const [url, why] of bad) {
    const problem = urlProblem(url);
    assert.ok(problem instanceof BadRequest, url);
    assert.match(problem.message, why, url);
  }
});

test('urlProblem: text that parsers read differently is refused, naming the form it must take (the review\'s cases)', () => {
  const cases: Array<[string, string]> = [
    ['https://sync.exa\tmple.com', 'https://sync.example.com'],
    ['https://sync.example\\@evil.example', 'https://sync.example/@evil.example'],
    ['https://sync.example/%2e%2e', 'https://sync.example'],
    ['https://sync.example/a/%2E%2e/b', 'https://sync.example/b'],
    ['https://sync.example/.', 'https://sync.example'],
    ['https://sync.example/a/./b', 'https://sync.example/a/b'],
    ['https://0x7f.1', 'https://127.0.0.1'],
    ['http://2130706433:8080', 'http://127.0.0.1:8080'],
    ['HTTPS://sync.example', 'https://sync.example'],
    ['https://Sync.Example', 'https://sync.example'],
    ['https://sync.example:443', 'https://sync.example'],
    ['https://\u0441ync.example', 'https://xn--ync-3ed.example'],
    ['https://sync.example/a b', 'https://sync.example/a%20b'],
    ['http://[0:0::1]', 'http://[::1]'],
  ];
  for (const [url, form] of cases) {
    assert.equal(nodeUrlForm(new URL(url)), form, url);
    const problem = urlProblem(url);
    assert.ok(problem instanceof BadRequest, url);
    assert.equal(problem.message, `url must be written as ${form}, the form every parser reads alike (its WHATWG serialisation), got ${JSON.stringify(url)}`);
    assert.equal(urlProblem(form), null, `the named form is accepted: ${form}`);
  }
  const host = urlProblem('https://sync_node.example');
  assert.match(host!.message, /^url's host must be letters, digits, '-' and '\.', or an IP address, got "sync_node\.example"$/);
});

test('nodeInputProblem: the first problem of service, url and (when given) capacity', () => {
  assert.equal(nodeInputProblem({ service: 'sync', url: 'https://a.example.com', capacity: 5 }), null);
  assert.equal(nodeInputProblem({ service: 'sync', url: 'https://a.example.com' }), null);
  assert.match(nodeInputProblem({ service: '', url: 'nope', capacity: -1 })!.message, /service/);
  assert.match(nodeInputProblem({ service: 'sync', url: 'nope', capacity: -1 })!.message, /url/);
  assert.match(nodeInputProblem({ service: 'sync', url: 'https://a.example.com', capacity: -1 })!.message, /capacity/);
});

test('importedNodeProblem: a whole node passes; the node fields, a negative or fractional load or slot count do not', () => {
  const n = node({ url: 'https://a.example.com', currentLoad: 5, capacity: 10, available: 2 });
  assert.equal(importedNodeProblem(n), null);
  assert.equal(importedNodeProblem({ ...n, currentLoad: 0, available: 0 }), null);
  assert.match(importedNodeProblem({ ...n, url: 'ftp://a.example.com' })?.message ?? '', /url/);
  assert.match(importedNodeProblem({ ...n, capacity: -1 })?.message ?? '', /capacity must be a non-negative integer/);
  assert.match(importedNodeProblem({ ...n, currentLoad: -1 })?.message ?? '', /current_load must be a non-negative integer/);
  assert.match(importedNodeProblem({ ...n, currentLoad: 1.5 })?.message ?? '', /current_load/);
  assert.match(importedNodeProblem({ ...n, available: -1 })?.message ?? '', /available must be a non-negative integer/);
});

test('nodeImportOutcome: created when missing, unchanged when equal, updated on any difference', () => {
  const n = node({ url: 'https://a.example.com', currentLoad: 5, capacity: 10, available: 2 });
  assert.equal(nodeImportOutcome(null, n), 'created');
  assert.equal(nodeImportOutcome({ ...n }, n), 'unchanged');
  for (const d of [{ capacity: 11 }, { currentLoad: 6 }, { available: 3 }, { downed: true }, { backoff: true }]) {
    assert.equal(nodeImportOutcome({ ...n, ...d }, n), 'updated', JSON.stringify(d));
  }
});

test('reconcileNodes: expected load = live + unreleased of the same (service, node); none recorded → 0; unknown nodes left out', () => {
  const holders = [
    { service: 'sync', node: 'https://a', live: 3, unreleased: 2 },
    { service: 'sync', node: 'https://b', live: 1, unreleased: 0 },
    // The same url under another application is another node.
    { service: 'notes', node: 'https://a', live: 7, unreleased: 0 },
    // Records without a node, and on a node that is not registered, correct nothing.
    { service: 'sync', node: '', live: 4, unreleased: 0 },
    { service: 'sync', node: 'https://gone', live: 9, unreleased: 9 },
  ];
  const nodes = [
    { service: 'sync', url: 'https://a', currentLoad: 6 },
    { service: 'sync', url: 'https://b', currentLoad: 1 },
    { service: 'sync', url: 'https://c', currentLoad: 2 },
    { service: 'notes', url: 'https://a', currentLoad: 5 },
  ];
  assert.deepEqual(reconcileNodes(holders, nodes), [
    { service: 'sync', url: 'https://a', load: 6, expected: 5 },
    { service: 'sync', url: 'https://b', load: 1, expected: 1 },
    { service: 'sync', url: 'https://c', load: 2, expected: 0 },
    { service: 'notes', url: 'https://a', load: 5, expected: 7 },
  ]);
  assert.deepEqual(reconcileNodes([], []), []);
});

test('reconcileNodes: several counts of one node add up', () => {
  const holders = [
    { service: 'sync', node: 'https://a', live: 1, unreleased: 0 },
    { service: 'sync', node: 'https://a', live: 0, unreleased: 2 },
  ];
  assert.deepEqual(reconcileNodes(holders, [{ service: 'sync', url: 'https://a', currentLoad: 3 }]), [{ service: 'sync', url: 'https://a', load: 3, expected: 3 }]);
});

test('loadDrift: load minus expected, either sign', () => {
  assert.equal(loadDrift({ service: 's', url: 'u', load: 7, expected: 5 }), 2);
  assert.equal(loadDrift({ service: 's', url: 'u', load: 5, expected: 5 }), 0);
  assert.equal(loadDrift({ service: 's', url: 'u', load: 3, expected: 5 }), -2);
});

test('correctedAvailable: slots come back with a lower load, go with a higher one, never below 0', () => {
  assert.equal(correctedAvailable(0, 7, 5), 2);
  assert.equal(correctedAvailable(3, 5, 7), 1);
  assert.equal(correctedAvailable(1, 5, 7), 0);
  assert.equal(correctedAvailable(4, 5, 5), 4);
});

// Found missing by mutation testing (npm run mutation -- services/nodeassign/rules.ts).

test('rankNodes: equal ratios in url order however many nodes and whatever the input order', () => {
  // The url decides every place among equals, not only the first (V8 sorts more than 64 elements by merging runs).
  const urls = Array.from({ length: 200 }, (_, i) => `https://n${String(i).padStart(3, '0')}.example`);
  const shuffled = urls.map((_, i) => urls[(i * 7919) % urls.length]);
  assert.deepEqual(rankNodes(shuffled.map((url) => node({ url }))).map((n) => n.url), urls);
  assert.deepEqual(rankNodes([...urls].reverse().map((url) => node({ url }))).map((n) => n.url), urls);
});

test('serviceProblem, urlProblem: the length limits themselves are allowed', () => {
  assert.equal(serviceProblem('s'.repeat(255)), null);
  const longest = 'https://n.example/' + 'a'.repeat(2048 - 'https://n.example/'.length);
  assert.equal(longest.length, 2048);
  assert.equal(urlProblem(longest), null);
  assert.match(urlProblem(longest + 'a')?.message ?? 'null', /1 to 2048/);
});

test('urlProblem: a user name alone or a password alone is credentials too', () => {
  for (const url of ['https://user@n.example', 'https://:pw@n.example']) assert.match(urlProblem(url)?.message ?? 'null', /credentials/, url);
});

test('nodeUrlForm, urlProblem: every trailing slash goes', () => {
  assert.equal(nodeUrlForm(new URL('https://n.example//')), 'https://n.example');
  assert.equal(nodeUrlForm(new URL('https://n.example/storage///')), 'https://n.example/storage');
  assert.match(urlProblem('https://n.example//')?.message ?? 'null', /^url must not end with a slash: write it as https:\/\/n\.example$/);
});
