// The directory's metrics rules: what each counted RPC answer adds, and the gauge's sums.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { incrementsOf, recordCounts } from './metrics.js';

test('retireUser: one increment per application, by the records retired there', () => {
  const reply = { retired: [{ service: 'sync' }, { service: 'notes' }, { service: 'sync' }] };
  assert.deepEqual(incrementsOf('retireUser', { service: '' }, reply), [
    { counter: 'retired', labels: { application: 'sync' }, by: 2 },
    { counter: 'retired', labels: { application: 'notes' }, by: 1 },
  ]);
  assert.deepEqual(incrementsOf('retireUser', { service: 'sync' }, { retired: [] }), []);
  assert.deepEqual(incrementsOf('retireUser', { service: 'sync' }, {}), []);
});

test('claimReplaced: outcome ok when claimed, else the reason', () => {
  assert.deepEqual(incrementsOf('claimReplaced', { service: 'sync' }, { claimed: true, reason: '' }), [
    { counter: 'purgeClaims', labels: { application: 'sync', outcome: 'ok' }, by: 1 },
  ]);
  assert.deepEqual(incrementsOf('claimReplaced', { service: 'sync' }, { claimed: false, reason: 'too-recent' }), [
    { counter: 'purgeClaims', labels: { application: 'sync', outcome: 'too-recent' }, by: 1 },
  ]);
});

test('deleteReplaced: counted only when a record was deleted', () => {
  assert.deepEqual(incrementsOf('deleteReplaced', { service: 'sync' }, { deleted: true }), [{ counter: 'purged', labels: { application: 'sync' }, by: 1 }]);
  assert.deepEqual(incrementsOf('deleteReplaced', { service: 'sync' }, { deleted: false, reason: 'gone' }), []);
});

test('trimClientStates: by the states removed, nothing when none', () => {
  assert.deepEqual(incrementsOf('trimClientStates', { service: 'sync' }, { removed: 3 }), [
    { counter: 'trimmedClientStates', labels: { application: 'sync' }, by: 3 },
  ]);
  assert.deepEqual(incrementsOf('trimClientStates', { service: 'sync' }, { removed: 0 }), []);
});

test('recordCounts: live and replaced per application, summed over nodes', () => {
  assert.deepEqual(
    recordCounts([
      { service: 'notes', node: '', live: 1, replaced: 0, unreleased: 0 },
      { service: 'sync', node: '', live: 2, replaced: 0, unreleased: 0 },
      { service: 'sync', node: 'https://n1', live: 3, replaced: 4, unreleased: 0 },
    ]),
    [
      { application: 'notes', state: 'live', count: 1 },
      { application: 'notes', state: 'replaced', count: 0 },
      { application: 'sync', state: 'live', count: 5 },
      { application: 'sync', state: 'replaced', count: 4 },
    ],
  );
  assert.deepEqual(recordCounts([]), []);
});
