import { test } from 'node:test';
import assert from 'node:assert/strict';
import { claimReplaced, removeReplaced, trimSeenClientStates } from './purge-rules.js';
import type { UserRecord } from './store.js';

const NOW = 1_700_000_000_000;
const record = (over: Partial<UserRecord> = {}): UserRecord => ({
  service: 'sync',
  email: 'a@example.com',
  uid: 9,
  node: 'https://n2.example',
  generation: 0,
  clientState: 'cc',
  seenClientStates: ['aa', 'bb'],
  replaced: [
    { uid: 3, node: 'https://n1.example', replacedAt: NOW - 10_000, released: false },
    { uid: 5, node: 'https://n2.example', replacedAt: NOW - 1_000, released: true },
  ],
  stateChanges: [],
  keysChangedAt: null,
  createdAt: NOW - 100_000,
  version: 4,
  ...over,
});

test('claimReplaced: claims an old enough record for the lease and bumps the version', () => {
  const out = claimReplaced(record(), 3, 'p1', NOW, 60_000, NOW - 5_000);
  assert.equal(out.claimed, true);
  if (!out.claimed) return;
  assert.deepEqual(out.entry.claim, { by: 'p1', until: NOW + 60_000 });
  assert.equal(out.record.version, 5);
  assert.deepEqual(out.record.replaced[0].claim, { by: 'p1', until: NOW + 60_000 });
  assert.equal(out.record.replaced[1].claim, undefined, 'other records untouched');
  assert.equal(out.record.uid, 9, 'the live uid is untouched');
});

test('claimReplaced: a missing uid is gone, a recent one too-recent, the live uid is never claimable', () => {
  assert.deepEqual(claimReplaced(record(), 4, 'p1', NOW, 1, NOW), { claimed: false, reason: 'gone' });
  assert.deepEqual(claimReplaced(record(), 9, 'p1', NOW, 1, NOW), { claimed: false, reason: 'gone' });
  assert.deepEqual(claimReplaced(record(), 5, 'p1', NOW, 1, NOW - 5_000), { claimed: false, reason: 'too-recent' });
});

test("claimReplaced: another purger's running lease refuses; an expired one or one's own is taken over", () => {
  const held = claimReplaced(record(), 3, 'p1', NOW, 60_000, NOW);
  assert.ok(held.claimed);
  if (!held.claimed) return;
  assert.deepEqual(claimReplaced(held.record, 3, 'p2', NOW + 59_999, 60_000, NOW), { claimed: false, reason: 'claimed' });
  const renewed = claimReplaced(held.record, 3, 'p1', NOW + 1, 60_000, NOW);
  assert.ok(renewed.claimed && renewed.entry.claim?.until === NOW + 60_001);
  const taken = claimReplaced(held.record, 3, 'p2', NOW + 60_000, 60_000, NOW);
  assert.ok(taken.claimed && taken.entry.claim?.by === 'p2');
});

test('removeReplaced: only the claimant removes; an unreleased slot on a node is to be given back', () => {
  const held = claimReplaced(record(), 3, 'p1', NOW, 60_000, NOW);
  assert.ok(held.claimed);
  if (!held.claimed) return;
  assert.deepEqual(removeReplaced(held.record, 3, 'p2'), { removed: false, reason: 'not-claimed' });
  assert.deepEqual(removeReplaced(record(), 3, 'p1'), { removed: false, reason: 'not-claimed' });
  assert.deepEqual(removeReplaced(held.record, 7, 'p1'), { removed: false, reason: 'gone' });
  const out = removeReplaced(held.record, 3, 'p1');
  assert.equal(out.removed, true);
  if (!out.removed) return;
  assert.equal(out.releaseSlot, true);
  assert.deepEqual(out.record.replaced.map((r) => r.uid), [5]);
  assert.equal(out.record.version, held.record.version + 1);
  assert.equal(out.record.uid, 9);
});

test('removeReplaced: a released slot, or a uid that never had a node, gives nothing back', () => {
  for (const r of [
    { uid: 5, node: 'https://n2.example', replacedAt: NOW - 1_000, released: true },
    { uid: 6, node: '', replacedAt: NOW - 1_000, released: false },
  ]) {
    const rec = record({ replaced: [{ ...r, claim: { by: 'p1', until: NOW } }] });
    const out = removeReplaced(rec, r.uid, 'p1');
    assert.ok(out.removed);
    if (out.removed) assert.equal(out.releaseSlot, false);
  }
});

test('trimSeenClientStates keeps the newest max (the list is oldest first); null when within it', () => {
  const rec = record({ seenClientStates: ['s1', 's2', 's3', 's4'] });
  assert.deepEqual(trimSeenClientStates(rec, 2)?.record.seenClientStates, ['s3', 's4']);
  assert.equal(trimSeenClientStates(rec, 2)?.removed, 2);
  assert.equal(trimSeenClientStates(rec, 2)?.record.version, 5);
  assert.deepEqual(trimSeenClientStates(rec, 0)?.record.seenClientStates, []);
  assert.equal(trimSeenClientStates(rec, 4), null);
  assert.equal(trimSeenClientStates(rec, 10), null);
});

// Found missing by mutation testing (npm run mutation -- services/directory/purge-rules.ts).

test('claimReplaced: a uid replaced exactly at the cut-off is old enough', () => {
  assert.equal(claimReplaced(record(), 3, 'p1', NOW, 1, NOW - 10_000).claimed, true);
  assert.deepEqual(claimReplaced(record(), 3, 'p1', NOW, 1, NOW - 10_001), { claimed: false, reason: 'too-recent' });
});
