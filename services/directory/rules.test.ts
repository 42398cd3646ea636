import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequest, InvalidClientState, InvalidGeneration, NewUsersDisabled } from '../../lib/errors.js';
import { decideLogin, requestProblem, type LoginDecision, type LoginInput } from './rules.js';
import type { UserRecord } from './store.js';

const NOW = 1_700_000_000_000;

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
    clientState: 'aaaa',
    seenClientStates: ['0000'],
    replaced: [],
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
  const d = decideLogin(null, input({ generation: 7, clientState: 'abcd' }), NOW);
  assert.equal(d.action, 'create');
  if (d.action !== 'create') return;
  assert.deepEqual(d.build(99), {
    service: 'sync',
    email: 'alice@example.com',
    uid: 99,
    node: '',
    generation: 7,
    clientState: 'abcd',
    seenClientStates: [],
    replaced: [],
    createdAt: NOW,
    version: 1,
  });
});

test('unknown user without a generation starts at generation 0', () => {
  const d = decideLogin(null, input(), NOW);
  assert.equal(d.action === 'create' && d.build(1).generation, 0);
});

test('unknown user while new users are off → NewUsersDisabled', () => {
  rejected(decideLogin(null, input({ allowNewUsers: false }), NOW), NewUsersDisabled);
});

test('new users off does not affect a known user', () => {
  assert.equal(decideLogin(user(), input({ clientState: 'aaaa', allowNewUsers: false }), NOW).action, 'keep');
});

test('a generation that is not a non-negative safe integer → InvalidGeneration, for new and known users', () => {
  for (const g of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 1]) {
    rejected(decideLogin(null, input({ generation: g }), NOW), InvalidGeneration, /non-negative/);
    rejected(decideLogin(user(), input({ generation: g, clientState: 'aaaa' }), NOW), InvalidGeneration, /non-negative/);
  }
  assert.equal(decideLogin(user({ generation: 0 }), input({ generation: 0, clientState: 'aaaa' }), NOW).action, 'keep');
});

test('a lower generation → InvalidGeneration', () => {
  rejected(decideLogin(user({ generation: 5 }), input({ generation: 4, clientState: 'aaaa' }), NOW), InvalidGeneration, /older/);
});

test('the same generation and client state → keep', () => {
  assert.equal(decideLogin(user({ generation: 5 }), input({ generation: 5, clientState: 'aaaa' }), NOW).action, 'keep');
});

test('no generation never lowers or changes the recorded one → keep', () => {
  assert.equal(decideLogin(user({ generation: 5 }), input({ clientState: 'aaaa' }), NOW).action, 'keep');
});

test('a higher generation is recorded on the same uid, version bumped', () => {
  const existing = user({ generation: 5 });
  const d = decideLogin(existing, input({ generation: 9, clientState: 'aaaa' }), NOW);
  assert.deepEqual(d, { action: 'update', record: { ...existing, generation: 9, version: 4 } });
});

test('client state: a value seen before → InvalidClientState (stale)', () => {
  rejected(decideLogin(user(), input({ generation: 6, clientState: '0000' }), NOW), InvalidClientState, /stale/);
});

test('client state: empty after a non-empty one → InvalidClientState', () => {
  rejected(decideLogin(user(), input({ generation: 6, clientState: '' }), NOW), InvalidClientState, /empty/);
  rejected(decideLogin(user(), input({ clientState: '' }), NOW), InvalidClientState, /empty/);
});

test('client state: a new value with a generation but no increase → InvalidClientState', () => {
  rejected(decideLogin(user({ generation: 5 }), input({ generation: 5, clientState: 'bbbb' }), NOW), InvalidClientState, /generation/);
});

test('client state: a new value with a higher generation → new uid, old state seen, node reset, old uid replaced', () => {
  const existing = user({ generation: 5, replaced: [{ uid: 3, node: 'https://old.example.com', replacedAt: 1 }] });
  const d = decideLogin(existing, input({ generation: 6, clientState: 'bbbb' }), NOW);
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
      { uid: 3, node: 'https://old.example.com', replacedAt: 1 },
      { uid: 10, node: 'https://node.example.com', replacedAt: NOW },
    ],
    version: 4,
  });
});

test('client state: a new value without any generation (IdP supplies none) → new uid, generation kept', () => {
  const d = decideLogin(user({ generation: 5 }), input({ clientState: 'bbbb' }), NOW);
  assert.equal(d.action, 'newUid');
  if (d.action !== 'newUid') return;
  assert.equal(d.build(11).generation, 5);
});

test('client state: leaving an empty state does not put "" in the seen list', () => {
  const d = decideLogin(user({ clientState: '', seenClientStates: [] }), input({ clientState: 'aaaa' }), NOW);
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
    const d = decideLogin(record, input({ generation: step.generation, clientState: step.clientState }), NOW + i);
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

// Found missing by mutation testing (npm run mutation -- services/directory/rules.ts).
test('requestProblem: 255 characters are allowed, 256 are not; each refusal names its field', () => {
  assert.equal(requestProblem({ service: 's'.repeat(255), email: 'e'.repeat(255) }), null);
  assert.match(requestProblem({ service: 's'.repeat(256), email: 'a@b' })!.message, /^service must be 1 to 255 characters$/);
  assert.match(requestProblem({ service: 'sync', email: 'e'.repeat(256) })!.message, /^email must be 1 to 255 characters$/);
  assert.match(requestProblem({ service: 'sync', email: 'a@b', clientState: 'a b' })!.message, /^client state must match/);
  rejected(decideLogin(null, input({ allowNewUsers: false }), NOW), NewUsersDisabled, /^new users are not accepted$/);
});
