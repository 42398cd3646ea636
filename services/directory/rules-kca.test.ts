// DESIGN §9.2 (keys_changed_at) and §9.4 (account events) as pure rules: one
// test per check and per update, the issue's sequences, and where #13's
// BrowserID rule and §9.2 meet.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidClientState, InvalidGeneration, InvalidKeysChangedAt, NewUsersDisabled, type ProtocolError } from '../../lib/errors.js';
import { above, claimsOf, decideLogin, isRetired, loginProblem, MAX_REPLACED, raisedGeneration, retirement, updatedVersions, type LoginInput } from './rules.js';
import type { UserRecord } from './store.js';

const NOW = 1_700_000_000_000;
const POLICY = { clientStateChangesPerDay: 10 };

function input(o: Partial<LoginInput> = {}): LoginInput {
  return { service: 'sync', email: 'a@api.accounts.firefox.com', clientState: 'aaaa', allowNewUsers: true, missingGenerationIsNone: true, ...o };
}

function user(o: Partial<UserRecord> = {}): UserRecord {
  return {
    service: 'sync',
    email: 'a@api.accounts.firefox.com',
    uid: 10,
    node: 'https://node.example.com',
    generation: 1000,
    keysChangedAt: 1000,
    clientState: 'aaaa',
    seenClientStates: ['0000'],
    replaced: [],
    stateChanges: [],
    createdAt: NOW - 1000,
    version: 3,
    ...o,
  };
}

function problem(u: UserRecord, o: Partial<LoginInput>): ProtocolError | null {
  return loginProblem(u, claimsOf(input(o)));
}

function refusedWith(err: ProtocolError | null, cls: new (...a: never[]) => ProtocolError, message?: RegExp): void {
  assert.ok(err instanceof cls, `${err?.name ?? 'accepted'} is not ${cls.name}`);
  if (message) assert.match(err.message, message);
}

test('above: false when either side is missing', () => {
  assert.equal(above(2, 1), true);
  assert.equal(above(1, 1), false);
  assert.equal(above(undefined, 1), false);
  assert.equal(above(1, undefined), false);
});

test('claimsOf: kca 0 is none; a missing generation is none for Bearer and 0 (for rule 6 only) for BrowserID', () => {
  assert.equal(claimsOf(input({ keysChangedAt: 0 })).keysChangedAt, undefined);
  assert.equal(claimsOf(input({ keysChangedAt: 5 })).keysChangedAt, 5);
  assert.equal(claimsOf(input()).generationForCheck, undefined);
  const browserId = claimsOf(input({ missingGenerationIsNone: undefined }));
  assert.equal(browserId.generation, undefined);
  assert.equal(browserId.generationForCheck, 0);
  assert.equal(claimsOf(input({ generation: 7, missingGenerationIsNone: undefined })).generationForCheck, 7);
});

test('rule 1: a_kca > u_kca and a_gen < a_kca → invalid-keysChangedAt (before the client-state rules)', () => {
  refusedWith(problem(user(), { keysChangedAt: 2000, generation: 1500 }), InvalidKeysChangedAt, /rose above the generation/);
  // Even with a seen state, rule 1 comes first.
  refusedWith(problem(user(), { keysChangedAt: 2000, generation: 1500, clientState: '0000' }), InvalidKeysChangedAt);
  // Missing sides make it false: no recorded kca, or no generation.
  assert.equal(problem(user({ keysChangedAt: null }), { keysChangedAt: 2000, generation: 1500 }), null);
  assert.equal(problem(user(), { keysChangedAt: 2000 }), null);
  assert.equal(problem(user(), { keysChangedAt: 2000, generation: 2000 }), null);
});

test('rule 2: empty state after a non-empty one → invalid-client-state', () => {
  refusedWith(problem(user(), { clientState: '', keysChangedAt: 2000, generation: 2000 }), InvalidClientState, /^Unacceptable client-state value empty string$/);
  refusedWith(problem(user({ clientState: '', seenClientStates: ['bbbb'] }), { clientState: '' }), InvalidClientState, /^Unacceptable client-state value empty string$/);
  assert.equal(problem(user({ clientState: '', seenClientStates: [] }), { clientState: '', keysChangedAt: 1000, generation: 1000 }), null);
});

test('rule 3: a previously seen state → invalid-client-state', () => {
  refusedWith(problem(user(), { clientState: '0000', keysChangedAt: 2000, generation: 2000 }), InvalidClientState, /^Unacceptable client-state value stale value$/);
});

test('rule 4: a changed state with a_gen <= u_gen → invalid-client-state; without a_gen it does not apply', () => {
  refusedWith(problem(user({ keysChangedAt: null }), { clientState: 'bbbb', generation: 1000 }), InvalidClientState, /^Unacceptable client-state value new value with no generation change$/);
  assert.equal(problem(user({ keysChangedAt: null }), { clientState: 'bbbb' }), null);
});

test('rule 5: a changed state with a_kca <= u_kca → invalid-client-state', () => {
  refusedWith(problem(user(), { clientState: 'bbbb', keysChangedAt: 1000, generation: 2000 }), InvalidClientState, /^Unacceptable client-state value new value with no keys_changed_at change$/);
  refusedWith(problem(user(), { clientState: 'bbbb', keysChangedAt: 1000 }), InvalidClientState, /^Unacceptable client-state value new value with no keys_changed_at change$/);
});

test('rule 6: u_gen > a_gen → invalid-generation', () => {
  refusedWith(problem(user(), { keysChangedAt: 1000, generation: 999 }), InvalidGeneration, /older/);
});

test('rule 6 where #13 and §9.2 differ: a missing generation against a recorded one', () => {
  // §9.2 (Bearer): a comparison with a missing side is false, so this passes rule 6.
  assert.equal(problem(user(), { keysChangedAt: 1000 }), null);
  // #13 (BrowserID, kept): a missing generation counts as 0, so it is older than the recorded 1000.
  // This is the one case where the two disagree; each scheme keeps its own rule.
  refusedWith(problem(user({ keysChangedAt: null }), { missingGenerationIsNone: undefined }), InvalidGeneration, /required once one is recorded/);
});

test('rule 7: u_kca > a_kca → invalid-keysChangedAt', () => {
  refusedWith(problem(user(), { keysChangedAt: 900, generation: 1000 }), InvalidKeysChangedAt, /older/);
});

test('rule 8: no a_kca while u_kca is non-zero → invalid-keysChangedAt; a zero or missing u_kca is fine', () => {
  refusedWith(problem(user(), { generation: 1000 }), InvalidKeysChangedAt, /required/);
  refusedWith(problem(user(), { generation: 1000, keysChangedAt: 0 }), InvalidKeysChangedAt, /required/);
  assert.equal(problem(user({ keysChangedAt: 0 }), { generation: 1000 }), null);
  assert.equal(problem(user({ keysChangedAt: null }), { generation: 1000 }), null);
});

test('updates: kca takes a_kca when present and not lower; otherwise it stays', () => {
  assert.equal(updatedVersions({ generation: 5, keysChangedAt: 1000 }, claimsOf(input({ keysChangedAt: 1500, generation: 1500 }))).keysChangedAt, 1500);
  assert.equal(updatedVersions({ generation: 5, keysChangedAt: null }, claimsOf(input({ keysChangedAt: 700 }))).keysChangedAt, 700);
  assert.equal(updatedVersions({ generation: 5, keysChangedAt: 1000 }, claimsOf(input({ keysChangedAt: 900 }))).keysChangedAt, 1000);
  assert.equal(updatedVersions({ generation: 5, keysChangedAt: 1000 }, claimsOf(input())).keysChangedAt, 1000);
});

test('updates: generation takes a_gen when present and not lower; without one, a rising a_kca raises it', () => {
  const up = (u: Pick<UserRecord, 'generation' | 'keysChangedAt'>, o: Partial<LoginInput>) => updatedVersions(u, claimsOf(input(o))).generation;
  assert.equal(up({ generation: 5, keysChangedAt: null }, { generation: 9 }), 9);
  assert.equal(up({ generation: 5, keysChangedAt: null }, { generation: 3 }), 5);
  assert.equal(up({ generation: 5, keysChangedAt: 4 }, { keysChangedAt: 8 }), 8, 'a_kca rises above both recorded values');
  assert.equal(up({ generation: 9, keysChangedAt: 4 }, { keysChangedAt: 8 }), 9, 'not above the recorded generation');
  assert.equal(up({ generation: 5, keysChangedAt: 8 }, { keysChangedAt: 8 }), 5, 'not above the recorded kca');
  assert.equal(up({ generation: 5, keysChangedAt: 4 }, { generation: 6, keysChangedAt: 8 }), 6, 'a_gen wins when present');
});

test('the issue #12 sequence for one user, decided rule by rule', () => {
  const bearer = (o: Partial<LoginInput>) => input({ clientState: 'aaaa', ...o });
  const created = decideLogin(null, bearer({ keysChangedAt: 1000, generation: 1000 }), NOW, POLICY);
  assert.equal(created.action, 'create');
  if (created.action !== 'create') return;
  let rec = created.build(1);
  assert.equal(rec.keysChangedAt, 1000);
  assert.equal(rec.generation, 1000);
  assert.equal(decideLogin(rec, bearer({ keysChangedAt: 1000, generation: 1000 }), NOW, POLICY).action, 'keep', 'the same again');
  const reject = (o: Partial<LoginInput>, cls: new (...a: never[]) => ProtocolError) => {
    const d = decideLogin(rec, bearer(o), NOW, POLICY);
    assert.equal(d.action, 'reject', JSON.stringify(o));
    if (d.action === 'reject') assert.ok(d.error instanceof cls, `${JSON.stringify(o)}: ${d.error.name}`);
  };
  reject({ keysChangedAt: 900, generation: 1000 }, InvalidKeysChangedAt);
  reject({ keysChangedAt: 2000, generation: 1500 }, InvalidKeysChangedAt);
  reject({ clientState: 'bbbb', keysChangedAt: 1000, generation: 1000 }, InvalidClientState);
  const moved = decideLogin(rec, bearer({ clientState: 'bbbb', keysChangedAt: 2000, generation: 2000 }), NOW, POLICY);
  assert.equal(moved.action, 'newUid');
  if (moved.action !== 'newUid') return;
  rec = moved.build(2);
  assert.deepEqual([rec.uid, rec.keysChangedAt, rec.generation, rec.clientState], [2, 2000, 2000, 'bbbb']);
  reject({ clientState: 'bbbb', generation: 2000 }, InvalidKeysChangedAt);
});

test('a rising kca without a client-state change updates the record in place', () => {
  const d = decideLogin(user(), input({ keysChangedAt: 1500, generation: 1500 }), NOW, POLICY);
  assert.equal(d.action, 'update');
  if (d.action === 'update') assert.deepEqual([d.record.uid, d.record.keysChangedAt, d.record.generation, d.record.version], [10, 1500, 1500, 4]);
});

test('a kca that is not a non-negative integer → invalid-keysChangedAt', () => {
  for (const k of [-1, 1.5, Number.MAX_SAFE_INTEGER + 2]) {
    const d = decideLogin(user(), input({ keysChangedAt: k }), NOW, POLICY);
    assert.equal(d.action, 'reject');
    if (d.action === 'reject') assert.ok(d.error instanceof InvalidKeysChangedAt, String(k));
  }
});

test('retirement: the live uid becomes a replaced one (slot given back), no current uid; a second retirement is nothing', () => {
  const r = retirement(user({ replaced: [{ uid: 3, node: 'https://old.example', replacedAt: 1, released: false }] }), NOW);
  assert.ok(r);
  assert.equal(isRetired(r), true);
  assert.deepEqual([r.uid, r.node, r.clientState, r.seenClientStates, r.version], [0, '', '', [], 4]);
  assert.deepEqual(r.replaced, [
    { uid: 3, node: 'https://old.example', replacedAt: 1, released: false },
    { uid: 10, node: 'https://node.example.com', replacedAt: NOW, released: true },
  ]);
  assert.equal(retirement(r, NOW + 1), null);
});

test('a retired record: the next login starts a new uid afresh, keeping the replaced list; new users off → 403', () => {
  const r = retirement(user(), NOW)!;
  const d = decideLogin(r, input({ clientState: '0000', keysChangedAt: 5, generation: 5 }), NOW, POLICY);
  assert.equal(d.action, 'newUid');
  if (d.action !== 'newUid') return;
  const rec = d.build(77);
  assert.deepEqual([rec.uid, rec.node, rec.generation, rec.keysChangedAt, rec.clientState, rec.version], [77, '', 5, 5, '0000', 5]);
  assert.deepEqual(rec.replaced, r.replaced);
  const closed = decideLogin(r, input({ allowNewUsers: false }), NOW, POLICY);
  assert.equal(closed.action, 'reject');
  if (closed.action === 'reject') assert.ok(closed.error instanceof NewUsersDisabled);
});

test('raisedGeneration: raises, never lowers, leaves retired records alone', () => {
  assert.equal(raisedGeneration(user(), 1500)?.generation, 1500);
  assert.equal(raisedGeneration(user(), 1500)?.version, 4);
  assert.equal(raisedGeneration(user(), 1000), null);
  assert.equal(raisedGeneration(user(), 10), null);
  assert.equal(raisedGeneration(retirement(user(), NOW)!, 5000), null);
});

// Found missing by mutation testing (npm run mutation -- services/directory/rules.ts).
test('rule 5 with a missing side: without a_kca rule 8 decides; without u_kca the change goes through', () => {
  refusedWith(problem(user(), { clientState: 'bbbb', generation: 2000 }), InvalidKeysChangedAt, /required/);
  assert.equal(problem(user({ keysChangedAt: 0 }), { clientState: 'bbbb', generation: 2000 }), null);
  assert.equal(problem(user({ keysChangedAt: null }), { clientState: 'bbbb', keysChangedAt: 500, generation: 2000 }), null);
});

test('updates: with no recorded kca, a_kca without a generation raises the generation, for a first login too', () => {
  assert.deepEqual(updatedVersions({ generation: 5, keysChangedAt: null }, claimsOf(input({ keysChangedAt: 8 }))), { generation: 8, keysChangedAt: 8 });
  const d = decideLogin(null, input({ keysChangedAt: 1000 }), NOW, POLICY);
  assert.equal(d.action, 'create');
  if (d.action === 'create') assert.deepEqual([d.build(1).generation, d.build(1).keysChangedAt], [1000, 1000]);
});

test('a first kca with an unchanged generation is recorded in place', () => {
  const d = decideLogin(user({ keysChangedAt: null }), input({ keysChangedAt: 500, generation: 1000 }), NOW, POLICY);
  assert.equal(d.action, 'update');
  if (d.action === 'update') assert.deepEqual([d.record.uid, d.record.generation, d.record.keysChangedAt, d.record.version], [10, 1000, 500, 4]);
});

test('a kca that is not a non-negative integer: the refusal says so', () => {
  const d = decideLogin(user(), input({ keysChangedAt: -1 }), NOW, POLICY);
  assert.equal(d.action, 'reject');
  if (d.action === 'reject') assert.match(d.error.message, /^keys_changed_at must be a non-negative integer$/);
});

test('retirement: no client-state changes kept; the replaced list keeps only the newest entries', () => {
  const replaced = Array.from({ length: MAX_REPLACED }, (_, i) => ({ uid: 100 + i, node: 'https://old.example', replacedAt: i, released: false }));
  const r = retirement(user({ stateChanges: [NOW - 2000, NOW - 1000], replaced }), NOW)!;
  assert.deepEqual(r.stateChanges, []);
  assert.equal(r.replaced.length, MAX_REPLACED);
  assert.deepEqual([r.replaced[0].uid, r.replaced.at(-1)?.uid], [101, 10]);
});
