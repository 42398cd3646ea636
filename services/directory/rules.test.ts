import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequest, InvalidClientState, InvalidGeneration, NewUsersDisabled, TooManyRequests } from '../../lib/errors.js';
import { isLiveUid } from '../../lib/token.js';
import { assignment, decideLogin, MAX_REPLACED, retirement, MAX_SEEN_CLIENT_STATES, requestProblem, type LoginDecision, type LoginInput } from './rules.js';
import type { UserRecord } from './store.js';

const NOW = 1_700_000_000_000;
const DAY = 86_400_000;
const POLICY = { clientStateChangesPerDay: 3 };

function input(o: Partial<LoginInput> = {}): LoginInput {
  return { service: 'sync', email: 'alice@example.com', clientState: '', allowNewUsers: true, ...o };
}

function user(o: Partial<UserRecord> = {}): UserRecord {
  return {
    service: 'sync',
    email: 'alice@example.com',
    uid: 10,
    node: 'https://node.example.com',
    generation: 5,
    keysChangedAt: null,
    clientState: 'aaaa',
    seenClientStates: ['0000'],
    replaced: [],
    stateChanges: [],
    createdAt: NOW - 1000,
    version: 3,
    ...o,
  };
}

function rejected(d: LoginDecision, cls: new (...a: never[]) => Error, message?: RegExp): void {
  assert.equal(d.action, 'reject');
  if (d.action !== 'reject') return;
  assert.ok(d.error instanceof cls, `${d.error.name} is not ${cls.name}`);
  if (message) assert.match(d.error.message, message);
}

test('unknown user is created with a new uid, no node, the request generation and client state', () => {
  const d = decideLogin(null, input({ generation: 7, clientState: 'abcd' }), NOW, POLICY);
  assert.equal(d.action, 'create');
  if (d.action !== 'create') return;
  assert.deepEqual(d.build(99), {
    service: 'sync',
    email: 'alice@example.com',
    uid: 99,
    node: '',
    generation: 7,
    keysChangedAt: null,
    clientState: 'abcd',
    seenClientStates: [],
    replaced: [],
    stateChanges: [],
    createdAt: NOW,
    version: 1,
  });
});

test('unknown user without a generation starts at generation 0', () => {
  const d = decideLogin(null, input(), NOW, POLICY);
  assert.equal(d.action === 'create' && d.build(1).generation, 0);
});

test('unknown user while new users are off → NewUsersDisabled', () => {
  rejected(decideLogin(null, input({ allowNewUsers: false }), NOW, POLICY), NewUsersDisabled);
});

test('new users off does not affect a known user', () => {
  assert.equal(decideLogin(user(), input({ generation: 5, clientState: 'aaaa', allowNewUsers: false }), NOW, POLICY).action, 'keep');
});

test('a generation that is not a non-negative safe integer → InvalidGeneration, for new and known users', () => {
  for (const g of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 1]) {
    rejected(decideLogin(null, input({ generation: g }), NOW, POLICY), InvalidGeneration, /non-negative/);
    rejected(decideLogin(user(), input({ generation: g, clientState: 'aaaa' }), NOW, POLICY), InvalidGeneration, /non-negative/);
  }
  assert.equal(decideLogin(user({ generation: 0 }), input({ generation: 0, clientState: 'aaaa' }), NOW, POLICY).action, 'keep');
});

test('a lower generation → InvalidGeneration', () => {
  rejected(decideLogin(user({ generation: 5 }), input({ generation: 4, clientState: 'aaaa' }), NOW, POLICY), InvalidGeneration, /older/);
});

test('the same generation and client state → keep', () => {
  assert.equal(decideLogin(user({ generation: 5 }), input({ generation: 5, clientState: 'aaaa' }), NOW, POLICY).action, 'keep');
});

test('no generation once one is recorded counts as 0 → InvalidGeneration, also with a client-state change', () => {
  rejected(decideLogin(user({ generation: 5 }), input({ clientState: 'aaaa' }), NOW, POLICY), InvalidGeneration, /required/);
  rejected(decideLogin(user({ generation: 1 }), input({ clientState: 'bbbb' }), NOW, POLICY), InvalidGeneration, /required/);
});

test('no generation while none is recorded (generation 0) → keep', () => {
  assert.equal(decideLogin(user({ generation: 0 }), input({ clientState: 'aaaa' }), NOW, POLICY).action, 'keep');
});

test('a higher generation is recorded on the same uid, version bumped', () => {
  const existing = user({ generation: 5 });
  const d = decideLogin(existing, input({ generation: 9, clientState: 'aaaa' }), NOW, POLICY);
  assert.deepEqual(d, { action: 'update', record: { ...existing, generation: 9, version: 4 } });
});

test('client state: a value seen before → InvalidClientState (stale)', () => {
  rejected(decideLogin(user(), input({ generation: 6, clientState: '0000' }), NOW, POLICY), InvalidClientState, /stale/);
});

test('client state: empty after a non-empty one → InvalidClientState', () => {
  rejected(decideLogin(user(), input({ generation: 6, clientState: '' }), NOW, POLICY), InvalidClientState, /empty/);
  rejected(decideLogin(user({ generation: 0 }), input({ clientState: '' }), NOW, POLICY), InvalidClientState, /empty/);
});

test('client state: a new value with a generation but no increase → InvalidClientState', () => {
  rejected(decideLogin(user({ generation: 5 }), input({ generation: 5, clientState: 'bbbb' }), NOW, POLICY), InvalidClientState, /generation/);
});

test('client state: a new value with a higher generation → new uid, old state seen, node reset, old uid replaced', () => {
  const existing = user({ generation: 5, replaced: [{ uid: 3, node: 'https://old.example.com', replacedAt: 1, released: false }] });
  const d = decideLogin(existing, input({ generation: 6, clientState: 'bbbb' }), NOW, POLICY);
  assert.equal(d.action, 'newUid');
  if (d.action !== 'newUid') return;
  assert.deepEqual(d.build(11), {
    ...existing,
    uid: 11,
    node: '',
    generation: 6,
    clientState: 'bbbb',
    seenClientStates: ['0000', 'aaaa'],
    replaced: [
      { uid: 3, node: 'https://old.example.com', replacedAt: 1, released: false },
      { uid: 10, node: 'https://node.example.com', replacedAt: NOW, released: false },
    ],
    stateChanges: [NOW],
    version: 4,
  });
});

test('client state: a new value without any generation (IdP supplies none) → new uid, generation stays 0', () => {
  const d = decideLogin(user({ generation: 0 }), input({ clientState: 'bbbb' }), NOW, POLICY);
  assert.equal(d.action, 'newUid');
  if (d.action !== 'newUid') return;
  assert.equal(d.build(11).generation, 0);
});

test('client state: leaving an empty state does not put "" in the seen list', () => {
  const d = decideLogin(user({ generation: 0, clientState: '', seenClientStates: [] }), input({ clientState: 'aaaa' }), NOW, POLICY);
  assert.equal(d.action, 'newUid');
  if (d.action !== 'newUid') return;
  assert.deepEqual(d.build(11).seenClientStates, []);
});

test('requestProblem: empty or long service/email and malformed client states → BadRequest', () => {
  assert.equal(requestProblem({ service: 'sync', email: 'a@b', clientState: 'a.b_c-D9' }), null);
  assert.equal(requestProblem({ service: 'sync', email: 'a@b' }), null);
  assert.ok(requestProblem({ service: '', email: 'a@b' }) instanceof BadRequest);
  assert.ok(requestProblem({ service: 's'.repeat(256), email: 'a@b' }) instanceof BadRequest);
  assert.ok(requestProblem({ service: 'sync', email: '' }) instanceof BadRequest);
  assert.ok(requestProblem({ service: 'sync', email: 'e'.repeat(256) }) instanceof BadRequest);
  assert.ok(requestProblem({ service: 'sync', email: 'a@b', clientState: 'a'.repeat(33) }) instanceof BadRequest);
  assert.ok(requestProblem({ service: 'sync', email: 'a@b', clientState: 'a b' }) instanceof BadRequest);
});

/** Applies decisions to one in-memory record the way the service does, to follow a user's history. */
function replay(steps: Array<{ generation?: number; clientState: string; expect: 'same' | 'new' | typeof InvalidGeneration | typeof InvalidClientState }>) {
  let record: UserRecord | null = null;
  let nextUid = 1;
  for (const [i, step] of steps.entries()) {
    const beforeUid: number | undefined = (record as UserRecord | null)?.uid;
    const d = decideLogin(record, input({ generation: step.generation, clientState: step.clientState }), NOW + i, POLICY);
    if (typeof step.expect !== 'string') {
      rejected(d, step.expect);
      continue;
    }
    if (d.action === 'reject') assert.fail(`step ${i}: unexpected ${d.error.name}`);
    if (d.action === 'create' || d.action === 'newUid') record = d.build(nextUid++);
    else if (d.action === 'update') record = d.record;
    if (beforeUid !== undefined && step.expect === 'same') assert.equal(record!.uid, beforeUid, `step ${i} keeps the uid`);
    if (step.expect === 'new') assert.notEqual(record!.uid, beforeUid, `step ${i} gives a new uid`);
  }
  return record!;
}

test('one user history: generations only go up, a client-state change needs a generation increase and never goes back', () => {
  const final = replay([
    { clientState: 'orig', expect: 'new' },
    { generation: 12, clientState: 'orig', expect: 'same' },
    { generation: 10, clientState: 'orig', expect: InvalidGeneration },
    { generation: 12, clientState: 'orig', expect: 'same' },
    { generation: 13, clientState: 'orig', expect: 'same' },
    { generation: 12, clientState: 'orig', expect: InvalidGeneration },
    { generation: 13, clientState: 'aaaa', expect: InvalidClientState },
    { generation: 14, clientState: 'aaaa', expect: 'new' },
    { generation: 15, clientState: 'orig', expect: InvalidClientState },
    { generation: 15, clientState: '', expect: InvalidClientState },
  ]);
  assert.equal(final.uid, 2);
  assert.equal(final.generation, 14);
  assert.equal(final.clientState, 'aaaa');
  assert.deepEqual(final.seenClientStates, ['orig']);
  assert.deepEqual(final.replaced.map((r) => r.uid), [1]);
});

test('client-state changes: allowed below the daily limit, 429 with Retry-After at it; older changes do not count', () => {
  const change = (stateChanges: number[]) => decideLogin(user({ stateChanges }), input({ generation: 6, clientState: 'bbbb' }), NOW, POLICY);
  const two = change([NOW - 2000, NOW - 1000]);
  assert.equal(two.action, 'newUid');
  if (two.action === 'newUid') assert.deepEqual(two.build(11).stateChanges, [NOW - 2000, NOW - 1000, NOW]);
  const full = change([NOW - DAY + 5000, NOW - 2000, NOW - 1000]);
  rejected(full, TooManyRequests, /3 client-state changes/);
  if (full.action === 'reject') {
    assert.equal(full.error.status, 429);
    assert.equal(full.error.statusString, 'error');
    assert.equal(full.error.headers['Retry-After'], '5', 'when the oldest of the day leaves the window');
  }
  const aged = change([NOW - DAY, NOW - DAY - 1, NOW - 1000]);
  assert.equal(aged.action, 'newUid', 'changes a day old or older have expired');
  if (aged.action === 'newUid') assert.deepEqual(aged.build(11).stateChanges, [NOW - 1000, NOW], 'and are dropped');
  // More recorded than a lowered limit allows: wait until enough have expired.
  const lowered = decideLogin(user({ stateChanges: [NOW - 9000, NOW - 8000, NOW - 7000] }), input({ generation: 6, clientState: 'bbbb' }), NOW, { clientStateChangesPerDay: 1 });
  rejected(lowered, TooManyRequests);
  if (lowered.action === 'reject') assert.equal(lowered.error.headers['Retry-After'], String(DAY / 1000 - 7));
});

test('client-state changes: a refused or unchanged state does not count against the limit', () => {
  const full = user({ stateChanges: [NOW - 3, NOW - 2, NOW - 1] });
  rejected(decideLogin(full, input({ generation: 6, clientState: '0000' }), NOW, POLICY), InvalidClientState);
  assert.equal(decideLogin(full, input({ generation: 6, clientState: 'aaaa' }), NOW, POLICY).action, 'update');
});

test('the seen and replaced lists keep only the newest entries', () => {
  const seen = Array.from({ length: MAX_SEEN_CLIENT_STATES }, (_, i) => `s${i}`);
  const replaced = Array.from({ length: MAX_REPLACED }, (_, i) => ({ uid: i, node: 'https://n.example', replacedAt: i, released: false }));
  const d = decideLogin(user({ seenClientStates: seen, replaced }), input({ generation: 6, clientState: 'bbbb' }), NOW, POLICY);
  assert.equal(d.action, 'newUid');
  if (d.action !== 'newUid') return;
  const next = d.build(11);
  assert.equal(next.seenClientStates.length, MAX_SEEN_CLIENT_STATES);
  assert.deepEqual([next.seenClientStates[0], next.seenClientStates.at(-1)], ['s1', 'aaaa']);
  assert.equal(next.replaced.length, MAX_REPLACED);
  assert.deepEqual([next.replaced[0].uid, next.replaced.at(-1)?.uid], [1, 10]);
});

test('assignment: only for the current uid without a node; releases unreleased replaced uids on the same node only', () => {
  const node = 'https://n.example';
  const replaced = [
    { uid: 1, node, replacedAt: 1, released: true },
    { uid: 2, node: 'https://other.example', replacedAt: 2, released: false },
    { uid: 3, node, replacedAt: 3, released: false },
    { uid: 4, node: '', replacedAt: 4, released: false },
  ];
  const fresh = user({ node: '', replaced });
  assert.equal(assignment(fresh, 99, node), null, 'another uid');
  assert.equal(assignment(user({ node }), 10, node), null, 'a node already');
  const a = assignment(fresh, 10, node);
  assert.equal(a?.released, 1);
  assert.deepEqual(a?.record, { ...fresh, node, version: 4, replaced: [replaced[0], replaced[1], { ...replaced[2], released: true }, replaced[3]] });
  assert.equal(assignment(fresh, 10, 'https://third.example')?.released, 0);
});

test('assignment: a retired record (uid 0) never gets a node, whatever uid the caller names', () => {
  const node = 'https://n.example';
  const retired = retirement(user({ node: '' }), NOW)!;
  assert.equal(retired.uid, 0);
  assert.equal(assignment(retired, 0, node), null, 'uid 0 is never assigned');
  assert.equal(assignment(retired, 10, node), null, 'the uid it had before');
  assert.equal(assignment(user({ uid: -1, node: '' }), -1, node), null, 'a negative uid');
});

test('isLiveUid: positive safe integers only', () => {
  assert.deepEqual([1, 2 ** 53 - 1].map(isLiveUid), [true, true]);
  assert.deepEqual([0, -1, 1.5, 2 ** 53, Number.NaN].map(isLiveUid), [false, false, false, false, false]);
});

// Found missing by mutation testing (npm run mutation -- services/directory/rules.ts).
test('requestProblem: 255 characters are allowed, 256 are not; each refusal names its field', () => {
  assert.equal(requestProblem({ service: 's'.repeat(255), email: 'e'.repeat(255) }), null);
  assert.match(requestProblem({ service: 's'.repeat(256), email: 'a@b' })!.message, /^service must be 1 to 255 characters$/);
  assert.match(requestProblem({ service: 'sync', email: 'e'.repeat(256) })!.message, /^email must be 1 to 255 characters$/);
  assert.match(requestProblem({ service: 'sync', email: 'a@b', clientState: 'a b' })!.message, /^client state must match/);
  rejected(decideLogin(null, input({ allowNewUsers: false }), NOW, POLICY), NewUsersDisabled, /^new users are not accepted$/);
});

test('client state: empty after a non-empty one is refused with no seen states and a higher generation too', () => {
  rejected(decideLogin(user({ seenClientStates: [] }), input({ generation: 6, clientState: '' }), NOW, POLICY), InvalidClientState, /empty string$/);
});

test('client-state changes: one stamped this millisecond counts; ones stamped ahead of the clock are dropped, so they cannot hold the allowance', () => {
  const change = (stateChanges: number[]) => decideLogin(user({ stateChanges }), input({ generation: 6, clientState: 'bbbb' }), NOW, POLICY);
  const ahead = change([NOW + 365 * DAY, NOW + 365 * DAY, NOW + 365 * DAY]);
  assert.equal(ahead.action, 'newUid');
  if (ahead.action === 'newUid') assert.deepEqual(ahead.build(11).stateChanges, [NOW]);
  const same = change([NOW]);
  assert.equal(same.action, 'newUid');
  if (same.action === 'newUid') assert.deepEqual(same.build(11).stateChanges, [NOW, NOW]);
});
