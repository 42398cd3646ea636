import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Node } from '../lib/gen/nodeassign.js';
import type { User } from '../lib/gen/directory.js';
import { formatNode, formatNodes, formatRemoved, formatSetup, formatUser,
  formatUserList, nodeState, table } from './format.js';

const node = (over: Partial<Node> = {}): Node => ({
  service: 'sync',
  url: 'https://n1.example',
  capacity: 100,
  currentLoad: 3,
  available: 97,
  downed: false,
  backoff: false,
  ...over,
});

test('nodeState: up, down, backoff, both', () => {
  assert.equal(nodeState({ downed: false, backoff: false }), 'up');
  assert.equal(nodeState({ downed: true, backoff: false }), 'down');
  assert.equal(nodeState({ downed: false, backoff: true }), 'backoff');
  assert.equal(nodeState({ downed: true, backoff: true }), 'down,backoff');
});

test('table aligns columns and leaves the last one unpadded', () => {
  assert.equal(table([['A', 'BB', 'C'], ['long', 'x', 'yy']]), 'A     BB  C\nlong  x   yy\n');
});

test('formatNodes: a header and one row per node, or "no nodes"', () => {
  assert.equal(formatNodes([]), 'no nodes\n');
  const text = formatNodes([{ ...node(), liveUsers: 2 }, { ...node({ service: 'notes', url: 'https://n2.example', downed: true }), liveUsers: 0 }]);
  const lines = text.trimEnd().split('\n');
  assert.equal(lines.length, 3);
  assert.match(lines[0], /^APP\s+URL\s+CAPACITY\s+LOAD\s+AVAILABLE\s+USERS\s+STATE$/);
  assert.match(lines[1], /^sync\s+https:\/\/n1\.example\s+100\s+3\s+97\s+2\s+up$/);
  assert.match(lines[2], /^notes\s+https:\/\/n2\.example\s+100\s+3\s+97\s+0\s+down$/);
});

test('formatNode and formatSetup', () => {
  assert.equal(formatNode('registered', node()), 'registered sync https://n1.example: capacity 100, load 3, available 97, up\n');
  assert.equal(
    formatSetup([
      { node: node(), created: true },
      { node: node({ service: 'notes' }), created: false },
    ]),
    'registered sync https://n1.example: capacity 100, load 3, available 97, up\n' +
      'already registered notes https://n1.example: capacity 100, load 3, available 97, up\n',
  );
});

test('formatRemoved: removed or already gone, singular and plural', () => {
  assert.equal(formatRemoved('sync', 'http://n', true, 1), 'removed sync http://n; 1 user unassigned (they get a new node at their next login)\n');
  assert.match(formatRemoved('sync', 'http://n', false, 3), /^sync http:\/\/n was not registered \(already removed\?\); 3 users unassigned/);
});

test('formatUser shows every field, with placeholders for empty ones', () => {
  const user: User = {
    service: 'sync',
    email: 'a@example.com',
    uid: 7,
    node: '',
    generation: 0,
    clientState: '',
    seenClientStates: [],
    replaced: [],
    createdAt: 0,
  };
  const empty = formatUser(user);
  assert.match(empty, /^uid:\s+7$/m);
  assert.match(empty, /^keys changed:\s+\(none\)$/m);
  assert.match(formatUser({ ...user, uid: 0 }), /^uid:\s+\(none: account deleted\)$/m);
  assert.match(empty, /^node:\s+\(none: assigned at next login\)$/m);
  assert.match(empty, /^client state:\s+\(none\)$/m);
  assert.match(empty, /^seen states:\s+\(none\)$/m);
  assert.match(empty, /^created:\s+-$/m);
  assert.match(empty, /^replaced:\s+\(none\)$/m);

  const full = formatUser({
    ...user,
    uid: 9,
    node: 'https://n1.example',
    generation: 12,
    keysChangedAt: 1_700_000_000_000,
    clientState: 'bbbb',
    seenClientStates: ['aaaa', 'cccc'],
    replaced: [{ uid: 7, node: 'https://n0.example', replacedAt: Date.UTC(2024, 0, 2), released: false }],
    createdAt: Date.UTC(2024, 0, 1),
  });
  assert.match(full, /^node:\s+https:\/\/n1\.example$/m);
  assert.match(full, /^generation:\s+12$/m);
  assert.match(full, /^keys changed:\s+1700000000000$/m);
  assert.match(full, /^client state:\s+bbbb$/m);
  assert.match(full, /^seen states:\s+aaaa, cccc$/m);
  assert.match(full, /^created:\s+2024-01-01T00:00:00\.000Z$/m);
  assert.match(full, /^replaced:$/m);
  assert.match(full, /^ {2}uid 7 on https:\/\/n0\.example, replaced 2024-01-02T00:00:00\.000Z$/m);
});

test('formatUserList: live users, or replaced records (of one node), then the cursor when there is more', () => {
  const u = (email: string, uid: number, node: string, replaced: Array<{ uid: number; node: string }> = []) => ({
    service: 'sync', email, uid, node, generation: 3, clientState: '', seenClientStates: [], createdAt: 0,
    replaced: replaced.map((r) => ({ ...r, replacedAt: 0, released: false })),
  });
  const users = [u('a@x', 1, 'https://n1', [{ uid: 7, node: 'https://n1' }, { uid: 8, node: 'https://n2' }]), u('b@x', 2, '')];
  assert.match(formatUserList(users, '', false), /^EMAIL\s+UID\s+NODE\s+GENERATION\s+CREATED\na@x\s+1\s+https:\/\/n1\s+3\s+-\nb@x\s+2\s+-\s+3\s+-\n$/);
  assert.match(formatUserList(users, 'CUR', true, 'https://n2'), /^EMAIL\s+OLD UID\s+NODE\s+REPLACED\na@x\s+8\s+https:\/\/n2\s+-\nmore: --after CUR\n$/);
  assert.equal(formatUserList([], '', false), 'no users\n');
  assert.equal(formatUserList([], '', true), 'no replaced records\n');
});
