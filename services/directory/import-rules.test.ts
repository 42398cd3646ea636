import { test } from 'node:test';
import assert from 'node:assert/strict';
import { highestUid, importedRecord, importOutcome, importProblem, MAX_IMPORTED_UID, sameImport, uidConflict, uidReservation, type ImportedUser } from './import-rules.js';
import { MAX_REPLACED, MAX_SEEN_CLIENT_STATES } from './rules.js';

function user(o: Partial<ImportedUser> = {}): ImportedUser {
  return {
    service: 'sync',
    email: 'a@example.com',
    uid: 7,
    node: 'https://n.example.com',
    generation: 10,
    keysChangedAt: 5,
    clientState: 'bb',
    seenClientStates: ['aa'],
    replaced: [{ uid: 3, node: 'https://n.example.com', replacedAt: 100, released: false }],
    createdAt: 50,
    ...o,
  };
}

test('importProblem: a well-formed record, a retired one and one without keys_changed_at pass', () => {
  assert.equal(importProblem(user()), null);
  assert.equal(importProblem(user({ uid: 0, node: '', clientState: '', seenClientStates: [] })), null);
  assert.equal(importProblem(user({ keysChangedAt: null })), null);
});

test('importProblem names each malformed field', () => {
  const cases: Array<[Partial<ImportedUser>, RegExp]> = [
    [{ email: '' }, /email must be 1 to 255/],
    [{ service: '' }, /service must be 1 to 255/],
    [{ clientState: 'no spaces' }, /client state must match/],
    [{ uid: -1 }, /uid must be a positive integer up to 4503599627370496 \(0: retired\), got -1/],
    [{ uid: MAX_IMPORTED_UID + 1 }, /uid must be a positive integer up to 4503599627370496 \(0: retired\), got 4503599627370497/],
    [{ uid: 1.5 }, /uid must be a positive integer/],
    [{ uid: 0 }, /a retired record \(uid 0\) has no node/],
    [{ uid: 0, node: '', clientState: 'bb', seenClientStates: [] }, /a retired record/],
    [{ uid: 0, node: '', clientState: '' }, /a retired record/],
    [{ generation: -1 }, /generation must be a non-negative integer/],
    [{ generation: 2 ** 63 }, /generation must be a non-negative integer/],
    [{ keysChangedAt: -5 }, /keys_changed_at must be a non-negative integer/],
    [{ createdAt: -1 }, /created_at must be a non-negative integer/],
    [{ seenClientStates: Array.from({ length: MAX_SEEN_CLIENT_STATES + 1 }, (_, i) => `s${i}`) }, /at most 100 seen client states/],
    [{ seenClientStates: ['bad state'] }, /seen client state must match/],
    [{ seenClientStates: [''] }, /seen client states are non-empty and differ from the current one/],
    [{ seenClientStates: ['bb'] }, /differ from the current one/],
    [{ replaced: Array.from({ length: MAX_REPLACED + 1 }, (_, i) => ({ uid: i + 100, node: '', replacedAt: 1, released: false })) }, /at most 100 replaced uids/],
    [{ replaced: [{ uid: 0, node: '', replacedAt: 1, released: false }] }, /replaced uid must be a positive integer up to 4503599627370496, got 0/],
    [{ replaced: [{ uid: 9007199254740990, node: '', replacedAt: 1, released: false }] }, /replaced uid must be a positive integer up to 4503599627370496, got 9007199254740990/],
    [{ replaced: [{ uid: 7, node: '', replacedAt: 1, released: false }] }, /uid 7 appears twice/],
    [{ replaced: [{ uid: 8, node: '', replacedAt: 1, released: false }, { uid: 8, node: '', replacedAt: 2, released: false }] }, /uid 8 appears twice/],
    [{ replaced: [{ uid: 8, node: '', replacedAt: -1, released: false }] }, /replaced_at must be a non-negative integer/],
  ];
  for (const [o, message] of cases) assert.match(importProblem(user(o))?.message ?? 'null', message, JSON.stringify(o));
});

test('highestUid: the largest of the live and replaced uids; 0 for a retired record with none', () => {
  assert.equal(highestUid(user()), 7);
  assert.equal(highestUid(user({ replaced: [{ uid: 30, node: '', replacedAt: 1, released: false }] })), 30);
  assert.equal(highestUid({ uid: 0, replaced: [] }), 0);
});

test('importedRecord: the record with no client-state changes counted and version 1, copied (not shared)', () => {
  const u = user();
  const r = importedRecord(u);
  assert.deepEqual(r, { ...u, stateChanges: [], version: 1 });
  assert.notEqual(r.replaced, u.replaced);
  assert.notEqual(r.seenClientStates, u.seenClientStates);
});

test('sameImport and importOutcome: created, unchanged (a purge claim and the version do not count), kept on any difference', () => {
  const u = user();
  const stored = importedRecord(u);
  assert.equal(importOutcome(null, u), 'created');
  assert.equal(importOutcome(stored, u), 'unchanged');
  const claimed = { ...stored, version: 4, replaced: [{ ...stored.replaced[0], claim: { by: 'p', until: 9 } }] };
  assert.equal(sameImport(claimed, u), true);
  const differences: Array<Partial<typeof stored>> = [
    { uid: 8 },
    { node: '' },
    { generation: 11 },
    { keysChangedAt: null },
    { clientState: 'cc' },
    { createdAt: 51 },
    { seenClientStates: [] },
    { replaced: [] },
    { replaced: [{ ...stored.replaced[0], released: true }] },
  ];
  for (const d of differences) assert.equal(importOutcome({ ...stored, ...d }, u), 'kept', JSON.stringify(d));
});

test('uidReservation: a fresh store or one only imports moved goes up to the highest uid, never down', () => {
  assert.deepEqual(uidReservation({ value: 0, imported: 0 }, 500), { next: { value: 500, imported: 500 } });
  assert.deepEqual(uidReservation({ value: 500, imported: 500 }, 200), { next: { value: 500, imported: 500 } });
  assert.deepEqual(uidReservation({ value: 500, imported: 500 }, 900), { next: { value: 900, imported: 900 } });
});

test('uidReservation: refused above MAX_IMPORTED_UID (2^52), so the counter stays far below 2^53', () => {
  assert.equal(MAX_IMPORTED_UID, 2 ** 52);
  assert.deepEqual(uidReservation({ value: 0, imported: 0 }, MAX_IMPORTED_UID), { next: { value: MAX_IMPORTED_UID, imported: MAX_IMPORTED_UID } });
  const refused = uidReservation({ value: 0, imported: 0 }, 9007199254740990);
  assert.ok('refused' in refused);
  assert.match(refused.refused, /^uid 9007199254740990 is above 4503599627370496, the highest an import may bring/);
});

test('uidConflict: names each uid another account holds; the account itself and no holder are no conflict', () => {
  const u = { service: 'sync', email: 'bob@example.com' };
  assert.equal(uidConflict(u, []), null);
  assert.equal(uidConflict(u, [{ uid: 17, service: 'sync', email: 'bob@example.com' }]), null);
  assert.equal(
    uidConflict(u, [
      { uid: 17, service: 'sync', email: 'alice@example.com' },
      { uid: 18, service: 'sync', email: 'bob@example.com' },
      { uid: 19, service: 'notes', email: 'bob@example.com' },
    ]),
    "uid 17 is another account's here (sync alice@example.com); uid 19 is another account's here (notes bob@example.com)",
  );
});

test('uidReservation: refused once the store handed out a uid itself, before any import or after one', () => {
  const before = uidReservation({ value: 3, imported: 0 }, 500);
  assert.ok('refused' in before);
  assert.match(before.refused, /handed out uids itself \(up to 3\): imported uids could collide/);
  const after = uidReservation({ value: 501, imported: 500 }, 900);
  assert.ok('refused' in after);
  assert.match(after.refused, /up to 501, imports reserved up to 500/);
});

// Found missing by mutation testing (npm run mutation -- services/directory/import-rules.ts).

test('importProblem: the limits themselves are allowed (uid 2^52, 100 seen client states, 100 replaced uids)', () => {
  assert.equal(importProblem(user({ uid: MAX_IMPORTED_UID, replaced: [] })), null);
  assert.equal(importProblem(user({ replaced: [{ uid: MAX_IMPORTED_UID, node: '', replacedAt: 1, released: false }] })), null);
  assert.equal(importProblem(user({ seenClientStates: Array.from({ length: MAX_SEEN_CLIENT_STATES }, (_, i) => `s${i}`) })), null);
  assert.equal(importProblem(user({ replaced: Array.from({ length: MAX_REPLACED }, (_, i) => ({ uid: i + 100, node: '', replacedAt: 1, released: false })) })), null);
});

test('importProblem: a retired record with a node alone is refused', () => {
  assert.match(importProblem(user({ uid: 0, clientState: '', seenClientStates: [] }))?.message ?? 'null', /a retired record \(uid 0\) has no node/);
});
