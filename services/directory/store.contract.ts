// The UserStore contract: one suite every implementation (SQLite, MongoDB)
// must pass. A store file's test calls userStoreContract() with an opener that
// returns a fresh, empty store per test, or null when its backend is missing
// (then each test is skipped with the reason printed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_REPLACED, MAX_SEEN_CLIENT_STATES } from './rules.js';
import pino from 'pino';
import { Conflict } from '../../lib/errors.js';
import type { User } from '../../lib/gen/directory.js';
import { claim, deleteReplaced, importUsers, listUsers, login, loginBatch, reserveUids } from './service.js';
import { UidTaken, type UserRecord, type UserStore } from './store.js';

export type StoreOpener<S> = () => Promise<S | null>;

/** Registers `title` as a test that gets a fresh store and closes it afterwards. */
export function storeTest<S extends { close(): Promise<void> }>(
  name: string,
  open: StoreOpener<S>,
  skipReason: (() => string | undefined) | undefined,
  title: string,
  fn: (store: S) => Promise<void>,
  deviations?: Readonly<Record<string, string>>,
): void {
  test(`${name}: ${title}`, async (t) => {
    // A server known to answer this otherwise than MongoDB documents (tests/support/mongo.ts).
    const deviation = deviations?.[title];
    if (deviation) {
      t.skip(deviation);
      return;
    }
    const store = await open();
    if (!store) {
      t.skip(skipReason?.() ?? `${name} store is not available`);
      return;
    }
    try {
      await fn(store);
    } finally {
      await store.close();
    }
  });
}

export function sampleUser(overrides: Partial<UserRecord> = {}): UserRecord {
  return {
    service: 'sync',
    email: 'alice@example.com',
    uid: 1,
    node: '',
    generation: 0,
    keysChangedAt: null,
    clientState: '',
    seenClientStates: [],
    replaced: [],
    stateChanges: [],
    createdAt: 1_700_000_000_000,
    version: 1,
    ...overrides,
  };
}

export function userStoreContract(
  name: string,
  open: StoreOpener<UserStore>,
  skipReason?: () => string | undefined,
  deviations?: Readonly<Record<string, string>>,
): void {
  const it = (title: string, fn: (store: UserStore) => Promise<void>) => storeTest(name, open, skipReason, title, fn, deviations);

  it('get on an empty store is null', async (store) => {
    assert.equal(await store.get('sync', 'nobody@example.com'), null);
  });

  it('ping answers', async (store) => {
    await store.ping();
  });

  it('insert then get returns the record field for field', async (store) => {
    const rec = sampleUser({
      uid: 42,
      node: 'https://node1.example.com',
      generation: Number.MAX_SAFE_INTEGER,
      keysChangedAt: 1_700_000_000_999,
      clientState: 'bbbb',
      seenClientStates: ['aaaa', 'a.b_c-d'],
      replaced: [{ uid: 7, node: 'https://node0.example.com', replacedAt: 1_700_000_000_123, released: true }],
      stateChanges: [1_700_000_000_100, 1_700_000_000_123],
      version: 3,
    });
    assert.equal(await store.insert(rec), true);
    assert.deepEqual(await store.get('sync', 'alice@example.com'), rec);
  });

  it('keysChangedAt null (none) and 0 are stored apart', async (store) => {
    await store.insert(sampleUser({ email: 'none@example.com' }));
    await store.insert(sampleUser({ email: 'zero@example.com', uid: 2, keysChangedAt: 0 }));
    assert.equal((await store.get('sync', 'none@example.com'))?.keysChangedAt, null);
    assert.equal((await store.get('sync', 'zero@example.com'))?.keysChangedAt, 0);
  });

  it('listByEmail returns the e-mail’s records in every service, ordered by service, and nothing else', async (store) => {
    await store.insert(sampleUser({ service: 'sync', uid: 1 }));
    await store.insert(sampleUser({ service: 'notes', uid: 2 }));
    await store.insert(sampleUser({ service: 'sync', email: 'bob@example.com', uid: 3 }));
    assert.deepEqual((await store.listByEmail('alice@example.com')).map((r) => [r.service, r.uid]), [['notes', 2], ['sync', 1]]);
    assert.deepEqual(await store.listByEmail('nobody@example.com'), []);
  });

  it('insert of an existing (service, email) is refused and keeps the first record', async (store) => {
    const first = sampleUser({ uid: 1 });
    assert.equal(await store.insert(first), true);
    assert.equal(await store.insert(sampleUser({ uid: 2, generation: 9 })), false);
    assert.deepEqual(await store.get('sync', 'alice@example.com'), first);
  });

  it('records are keyed by service and email: same email in another service is another user', async (store) => {
    assert.equal(await store.insert(sampleUser({ uid: 1 })), true);
    assert.equal(await store.insert(sampleUser({ service: 'notes', uid: 2 })), true);
    assert.equal(await store.insert(sampleUser({ email: 'bob@example.com', uid: 3 })), true);
    assert.equal((await store.get('sync', 'alice@example.com'))?.uid, 1);
    assert.equal((await store.get('notes', 'alice@example.com'))?.uid, 2);
    assert.equal((await store.get('sync', 'bob@example.com'))?.uid, 3);
    assert.equal(await store.get('notes', 'bob@example.com'), null);
  });

  it('replace writes when the version matches', async (store) => {
    const rec = sampleUser({ version: 1 });
    await store.insert(rec);
    const next = { ...rec, generation: 5, clientState: 'cccc', seenClientStates: [''], node: 'https://n.example', version: 2 };
    assert.equal(await store.replace(next, 1), true);
    assert.deepEqual(await store.get('sync', 'alice@example.com'), next);
  });

  it('replace with a stale version is refused and changes nothing', async (store) => {
    const rec = sampleUser({ version: 4 });
    await store.insert(rec);
    assert.equal(await store.replace({ ...rec, generation: 9, version: 4 }, 3), false);
    assert.equal(await store.replace({ ...rec, generation: 9, version: 6 }, 5), false);
    assert.deepEqual(await store.get('sync', 'alice@example.com'), rec);
  });

  it('replace of a missing record is refused and creates nothing', async (store) => {
    assert.equal(await store.replace(sampleUser({ version: 2 }), 1), false);
    assert.equal(await store.get('sync', 'alice@example.com'), null);
  });

  it('getMany returns the records of the keys in their order, null for missing keys, a repeated key twice', async (store) => {
    const alice = sampleUser({ uid: 1, node: 'https://n.example', seenClientStates: ['aa'], keysChangedAt: 5 });
    const bob = sampleUser({ email: 'bob@example.com', uid: 2 });
    const notes = sampleUser({ service: 'notes', uid: 3 });
    for (const r of [alice, bob, notes]) await store.insert(r);
    const got = await store.getMany([
      { service: 'sync', email: 'bob@example.com' },
      { service: 'sync', email: 'nobody@example.com' },
      { service: 'notes', email: 'alice@example.com' },
      { service: 'sync', email: 'alice@example.com' },
      { service: 'notes', email: 'bob@example.com' },
      { service: 'sync', email: 'bob@example.com' },
    ]);
    assert.deepEqual(got, [bob, null, notes, alice, null, bob]);
    assert.deepEqual(await store.getMany([]), []);
    assert.deepEqual(await store.getMany([{ service: 'other', email: 'x@example.com' }]), [null]);
  });

  it('replaceMany writes where the guard holds, refuses where it lost or the record is missing, and says which', async (store) => {
    const a = sampleUser({ email: 'a@x', uid: 1, version: 1 });
    const b = sampleUser({ email: 'b@x', uid: 2, version: 7 });
    const c = sampleUser({ email: 'c@x', uid: 3, version: 2 });
    for (const r of [a, b, c]) await store.insert(r);
    const a2 = { ...a, generation: 4, version: 2 };
    const bStale = { ...b, generation: 9, version: 6 };
    const c3 = { ...c, node: 'https://n.example', version: 3 };
    const missing = sampleUser({ email: 'missing@x', uid: 9, version: 2 });
    const results = await store.replaceMany([
      { record: a2, expectedVersion: 1 },
      { record: bStale, expectedVersion: 5 },
      { record: missing, expectedVersion: 1 },
      { record: c3, expectedVersion: 2 },
    ]);
    assert.deepEqual(results, [true, false, false, true]);
    assert.deepEqual(await store.getMany([a, b, c, missing]), [a2, b, c3, null]);
    assert.deepEqual(await store.replaceMany([]), []);
  });

  it('replaceMany with two writes of one record from the same version makes exactly one', async (store) => {
    const rec = sampleUser({ version: 1 });
    await store.insert(rec);
    const first = { ...rec, generation: 1, version: 2 };
    const second = { ...rec, generation: 2, version: 2 };
    const results = await store.replaceMany([
      { record: first, expectedVersion: 1 },
      { record: second, expectedVersion: 1 },
    ]);
    assert.equal(results.filter(Boolean).length, 1, JSON.stringify(results));
    assert.deepEqual(await store.get('sync', 'alice@example.com'), results[0] ? first : second);
  });

  it('parallel replaceMany and replace from the same version: exactly one write of the record is made', async (store) => {
    const rec = sampleUser({ version: 1 });
    await store.insert(rec);
    const other = sampleUser({ email: 'other@x', uid: 2, version: 1 });
    await store.insert(other);
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        i % 2
          ? store.replace({ ...rec, generation: i + 1, version: 2 }, 1)
          : store.replaceMany([{ record: { ...rec, generation: i + 1, version: 2 }, expectedVersion: 1 }]).then(([made]) => made),
      ),
    );
    assert.equal(answers.filter(Boolean).length, 1);
    assert.equal((await store.get('sync', 'alice@example.com'))?.generation, answers.indexOf(true) + 1);
    assert.deepEqual(await store.get('sync', 'other@x'), other, 'a record no write named is left alone');
  });

  it('nextUid is positive and strictly increasing', async (store) => {
    const a = await store.nextUid();
    const b = await store.nextUid();
    const c = await store.nextUid();
    assert.ok(Number.isSafeInteger(a) && a > 0, `uid ${a}`);
    assert.ok(b > a && c > b, `${a} ${b} ${c}`);
  });

  it('nextUid is unique under 50 parallel calls', async (store) => {
    const uids = await Promise.all(Array.from({ length: 50 }, () => store.nextUid()));
    assert.equal(new Set(uids).size, 50);
    const after = await store.nextUid();
    assert.ok(uids.every((u) => u < after), 'a later uid is above every earlier one');
  });

  it('50 parallel inserts of one key: exactly one succeeds and its record is stored', async (store) => {
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => store.insert(sampleUser({ uid: 100 + i }))),
    );
    assert.equal(results.filter(Boolean).length, 1);
    const winner = 100 + results.indexOf(true);
    assert.equal((await store.get('sync', 'alice@example.com'))?.uid, winner);
  });

  it('parallel replaces from the same version: exactly one wins and its record is stored', async (store) => {
    const rec = sampleUser({ version: 1 });
    await store.insert(rec);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.replace({ ...rec, generation: i + 1, version: 2 }, 1)),
    );
    assert.equal(results.filter(Boolean).length, 1);
    const stored = await store.get('sync', 'alice@example.com');
    assert.equal(stored?.generation, results.indexOf(true) + 1);
    assert.equal(stored?.version, 2);
  });

  it('unassignNode clears the node of matching users only, bumps their version and counts them', async (store) => {
    const nodeA = 'https://a.example.com';
    const nodeB = 'https://b.example.com';
    await store.insert(sampleUser({ email: 'u1@example.com', uid: 1, node: nodeA, version: 1 }));
    await store.insert(sampleUser({ email: 'u2@example.com', uid: 2, node: nodeA, version: 5 }));
    await store.insert(sampleUser({ email: 'u3@example.com', uid: 3, node: nodeB, version: 1 }));
    await store.insert(sampleUser({ service: 'notes', email: 'u4@example.com', uid: 4, node: nodeA, version: 1 }));
    await store.insert(sampleUser({ email: 'u5@example.com', uid: 5, node: '', version: 1 }));

    assert.equal(await store.unassignNode('sync', nodeA), 2);

    const u1 = await store.get('sync', 'u1@example.com');
    const u2 = await store.get('sync', 'u2@example.com');
    assert.equal(u1?.node, '');
    assert.equal(u1?.version, 2);
    assert.equal(u1?.uid, 1, 'the uid stays');
    assert.equal(u2?.node, '');
    assert.equal(u2?.version, 6);
    assert.deepEqual(await store.get('sync', 'u3@example.com'), sampleUser({ email: 'u3@example.com', uid: 3, node: nodeB }));
    assert.equal((await store.get('notes', 'u4@example.com'))?.node, nodeA, 'other services keep their node');
    assert.equal((await store.get('sync', 'u5@example.com'))?.version, 1);

    assert.equal(await store.unassignNode('sync', nodeA), 0, 'nothing left on that node');
  });

  it('a replace prepared before unassignNode loses (unassignNode bumped the version)', async (store) => {
    const rec = sampleUser({ node: 'https://a.example.com', version: 1 });
    await store.insert(rec);
    assert.equal(await store.unassignNode('sync', 'https://a.example.com'), 1);
    assert.equal(await store.replace({ ...rec, generation: 3, version: 2 }, 1), false);
    const stored = await store.get('sync', 'alice@example.com');
    assert.equal(stored?.node, '');
    assert.equal(stored?.generation, 0);
  });

  it('client-state churn through the login rules keeps the seen and replaced lists capped', async (store) => {
    const changes = MAX_REPLACED + 5;
    const policy = { clientStateChangesPerDay: changes + 1 };
    const req = { service: 'sync', email: 'churn@example.com', allowNewUsers: true };
    for (let i = 0; i <= changes; i++) await login(store, { ...req, generation: i + 1, clientState: `s${i}` }, policy);
    const stored = await store.get('sync', 'churn@example.com');
    assert.equal(stored?.clientState, `s${changes}`);
    assert.equal(stored?.seenClientStates.length, MAX_SEEN_CLIENT_STATES);
    assert.equal(stored?.seenClientStates.at(-1), `s${changes - 1}`, 'the newest are kept');
    assert.equal(stored?.replaced.length, MAX_REPLACED);
    assert.equal(stored?.stateChanges.length, changes);
  });

  it('a purge claim on a replaced record is stored and read back field for field', async (store) => {
    const rec = sampleUser({
      replaced: [
        { uid: 7, node: 'https://n.example', replacedAt: 5, released: false, claim: { by: 'purge-1', until: 1_700_000_000_999 } },
        { uid: 8, node: '', replacedAt: 6, released: true },
      ],
    });
    assert.equal(await store.insert(rec), true);
    assert.deepEqual(await store.get('sync', 'alice@example.com'), rec);
  });

  it('list pages in (service, email) order with a cursor that stays stable under inserts and deletes', async (store) => {
    const emails = ['e@x', 'a@x', 'c@x', 'b@x', 'd@x'];
    for (const [i, email] of emails.entries()) await store.insert(sampleUser({ email, uid: i + 1 }));
    await store.insert(sampleUser({ service: 'notes', email: 'a@x', uid: 10 }));
    await store.insert(sampleUser({ service: 'aaa', email: 'z@x', uid: 11 }));
    const page1 = await store.list({ service: 'sync', limit: 2 });
    assert.deepEqual(page1.map((u) => u.email), ['a@x', 'b@x']);
    // Written between pages: before the cursor (not seen), after it (seen).
    await store.insert(sampleUser({ email: 'aa@x', uid: 20 }));
    await store.insert(sampleUser({ email: 'cc@x', uid: 21 }));
    const after = { service: 'sync', email: 'b@x' };
    const page2 = await store.list({ service: 'sync', limit: 2, after });
    assert.deepEqual(page2.map((u) => u.email), ['c@x', 'cc@x']);
    const rest = await store.list({ service: 'sync', limit: 10, after: { service: 'sync', email: 'cc@x' } });
    assert.deepEqual(rest.map((u) => u.email), ['d@x', 'e@x']);
    // Every application: ordered by service first, and the cursor crosses services.
    const all = await store.list({ service: '', limit: 100 });
    assert.deepEqual(all.map((u) => `${u.service}/${u.email}`).slice(0, 2), ['aaa/z@x', 'notes/a@x']);
    const fromNotes = await store.list({ service: '', limit: 2, after: { service: 'notes', email: 'a@x' } });
    assert.deepEqual(fromNotes.map((u) => `${u.service}/${u.email}`), ['sync/a@x', 'sync/aa@x']);
    assert.deepEqual((await store.list({ service: 'sync', limit: 5, after: { service: 'sync', email: 'e@x' } })).length, 0);
  });

  it('list filters by live node, by replaced records, and by the node of replaced records', async (store) => {
    const old = (uid: number, node: string) => ({ uid, node, replacedAt: 1, released: false });
    await store.insert(sampleUser({ email: 'a@x', uid: 1, node: 'https://n1.example' }));
    await store.insert(sampleUser({ email: 'b@x', uid: 2, node: 'https://n2.example', replaced: [old(20, 'https://n1.example')] }));
    await store.insert(sampleUser({ email: 'c@x', uid: 3, node: 'https://n1.example', replaced: [old(30, 'https://n2.example'), old(31, '')] }));
    const emails = (users: UserRecord[]) => users.map((u) => u.email);
    assert.deepEqual(emails(await store.list({ service: 'sync', limit: 10, node: 'https://n1.example' })), ['a@x', 'c@x']);
    assert.deepEqual(emails(await store.list({ service: 'sync', limit: 10, replaced: true })), ['b@x', 'c@x']);
    assert.deepEqual(emails(await store.list({ service: 'sync', limit: 10, replaced: true, node: 'https://n1.example' })), ['b@x']);
    assert.deepEqual(emails(await store.list({ service: 'sync', limit: 10, replaced: true, node: 'https://n2.example' })), ['c@x']);
    assert.deepEqual(emails(await store.list({ service: 'notes', limit: 10 })), []);
  });

  it('counts gives live, replaced and unreleased replaced records per (service, node)', async (store) => {
    const old = (uid: number, node: string, released = false) => ({ uid, node, replacedAt: 1, released });
    await store.insert(sampleUser({ email: 'a@x', uid: 1, node: 'https://n1.example' }));
    await store.insert(sampleUser({ email: 'b@x', uid: 2, node: 'https://n1.example', replaced: [old(20, 'https://n2.example'), old(21, 'https://n1.example', true)] }));
    await store.insert(sampleUser({ email: 'c@x', uid: 3, node: '', replaced: [old(30, 'https://n2.example'), old(31, 'https://n1.example'), old(32, 'https://n2.example', true)] }));
    await store.insert(sampleUser({ service: 'notes', email: 'a@x', uid: 4, node: 'https://m.example' }));
    assert.deepEqual(await store.counts('sync'), [
      { service: 'sync', node: '', live: 1, replaced: 0, unreleased: 0 },
      { service: 'sync', node: 'https://n1.example', live: 2, replaced: 2, unreleased: 1 },
      { service: 'sync', node: 'https://n2.example', live: 0, replaced: 3, unreleased: 2 },
    ]);
    assert.deepEqual((await store.counts('')).map((c) => c.service), ['notes', 'sync', 'sync', 'sync']);
    assert.deepEqual(await store.counts('none'), []);
  });

  it('listUsers hands out a cursor that walks every user exactly once', async (store) => {
    for (let i = 0; i < 7; i++) await store.insert(sampleUser({ email: `u${i}@x`, uid: i + 1 }));
    const seen: string[] = [];
    let after = '';
    do {
      const page = await listUsers(store, { service: 'sync', replaced: false, limit: 3, after });
      seen.push(...page.users.map((u) => u.email));
      after = page.next;
    } while (after !== '');
    assert.deepEqual(seen, ['u0@x', 'u1@x', 'u2@x', 'u3@x', 'u4@x', 'u5@x', 'u6@x']);
  });

  it('racing purgers and logins: each replaced record is deleted once, by its claimant; no live record is lost', async (store) => {
    const old = Array.from({ length: 5 }, (_, i) => ({ uid: 1_000_000 + i, node: 'https://n.example', replacedAt: 1, released: false }));
    await store.insert(sampleUser({ email: 'r@x', uid: 1, node: 'https://n.example', replaced: old }));
    const policy = { clientStateChangesPerDay: 1000 };
    const purger = async (name: string) => {
      const deleted: number[] = [];
      for (const r of old) {
        const c = await claim(store, { service: 'sync', email: 'r@x', uid: r.uid, claimant: name, leaseMs: 60_000, replacedBefore: 10 });
        if (!c.claimed) continue;
        const d = await deleteReplaced(store, { service: 'sync', email: 'r@x', uid: r.uid, claimant: name });
        if (d.deleted) deleted.push(r.uid);
      }
      return deleted;
    };
    const logins = Array.from({ length: 10 }, (_, i) =>
      login(store, { service: 'sync', email: 'r@x', generation: i + 1, clientState: `s${i}`, allowNewUsers: true }, policy).catch((e: Error) => e),
    );
    const [a, b, c, ...answers] = await Promise.all([purger('p1'), purger('p2'), purger('p3'), ...logins]);
    assert.deepEqual([...a, ...b, ...c].sort(), old.map((r) => r.uid), 'each old record deleted exactly once');
    const stored = (await store.get('sync', 'r@x'))!;
    // Every uid a login answered with is the live uid or a (not purged) replaced one.
    const kept = new Set([stored.uid, ...stored.replaced.map((r) => r.uid)]);
    for (const ans of answers) if (!(ans instanceof Error)) assert.ok(kept.has(ans.uid), `uid ${ans.uid} was lost`);
    assert.ok(!old.some((r) => kept.has(r.uid)), `old records left: ${JSON.stringify(stored.replaced)}`);
  });

  it('LoginBatch racing itself and single logins on one user: every answer is a stored state, the newest generation wins', async (store) => {
    const policy = { clientStateChangesPerDay: 1000 };
    const req = (generation: number) => ({ service: 'sync', email: 'race@x', clientState: '', allowNewUsers: true, generation });
    await login(store, req(1), policy);
    const silent = pino({ level: 'silent' });
    // Two batches whose items raise one user's generation from the same read, while single logins do too.
    const batch = (gens: number[]) => loginBatch(store, { items: gens.map((g) => ({ requestId: `g${g}`, login: req(g) })) }, policy, silent);
    const [a, b, ...singles] = await Promise.all([
      batch([2, 3, 4, 5]),
      batch([6, 7, 8, 9]),
      ...[10, 11, 12].map((g) => login(store, req(g), policy).then((user) => ({ user }), (error: Error) => ({ error }))),
    ]);
    // Each answer as the generation it was given, or its error's class.
    const answers = [
      ...[...a.results, ...b.results].map((r) => (r.user ? r.user.generation : r.error!.errorClass)),
      ...singles.map((r) => ('user' in r ? r.user.generation : r.error.name)),
    ];
    // A lost race decided again may find a newer generation: the rules refuse the older one.
    for (const ans of answers) if (typeof ans !== 'number') assert.equal(ans, 'InvalidGeneration');
    const stored = (await store.get('sync', 'race@x'))!;
    assert.equal(stored.generation, 12);
    assert.ok(answers.includes(12), 'the newest login answered with its own write');
    assert.equal(stored.version, 1 + answers.filter((ans) => typeof ans === 'number').length, 'one write per successful login, none lost or doubled');
  });

  it('claimEventToken: the first claim wins until it expires; a released or expired claim can be made again', async (store) => {
    const key = 'a'.repeat(64);
    const now = 1_700_000_000_000;
    assert.equal(await store.claimEventToken(key, now + 1000, now), true, 'first');
    assert.equal(await store.claimEventToken(key, now + 1000, now + 10), false, 'a replay');
    assert.equal(await store.claimEventToken(key, now + 5000, now + 999), false, 'a replay just before expiry');
    assert.equal(await store.claimEventToken('b'.repeat(64), now + 1000, now), true, 'another key');
    assert.equal(await store.claimEventToken(key, now + 9000, now + 1000), true, 'expired: taken over');
    assert.equal(await store.claimEventToken(key, now + 9500, now + 2000), false, 'the new claim holds');
    await store.releaseEventToken(key);
    assert.equal(await store.claimEventToken(key, now + 9000, now + 2000), true, 'released: claimed again');
    await store.releaseEventToken('c'.repeat(64));
  });

  it('claimEventToken: of many concurrent claims of one key exactly one wins', async (store) => {
    const now = Date.now();
    const results = await Promise.all(Array.from({ length: 20 }, () => store.claimEventToken('d'.repeat(64), now + 60_000, now)));
    assert.equal(results.filter(Boolean).length, 1);
  });

  it('uidCounter starts at 0 with nothing imported; setUidCounter is a compare-and-set; nextUid moves the value only', async (store) => {
    assert.deepEqual(await store.uidCounter(), { value: 0, imported: 0 });
    assert.equal(await store.setUidCounter({ value: 0, imported: 0 }, { value: 2_000_000_000_000, imported: 2_000_000_000_000 }), true);
    assert.deepEqual(await store.uidCounter(), { value: 2_000_000_000_000, imported: 2_000_000_000_000 });
    assert.equal(await store.setUidCounter({ value: 0, imported: 0 }, { value: 5, imported: 5 }), false, 'a stale expectation is refused');
    assert.equal(await store.nextUid(), 2_000_000_000_001, 'handed-out uids continue above the set value');
    assert.deepEqual(await store.uidCounter(), { value: 2_000_000_000_001, imported: 2_000_000_000_000 });
    const moved = { value: 2_000_000_000_000, imported: 2_000_000_000_000 };
    assert.equal(await store.setUidCounter(moved, { value: 9e12, imported: 9e12 }), false, 'a nextUid in between fails the guard');
    assert.deepEqual(await store.uidCounter(), { value: 2_000_000_000_001, imported: 2_000_000_000_000 });
  });

  it('reserveUids raises the counter for an import, never lowers it, and is refused once a uid was handed out here', async (store) => {
    assert.deepEqual(await reserveUids(store, { upTo: 40, dryRun: true }), { previous: 0, current: 40 });
    assert.deepEqual(await store.uidCounter(), { value: 0, imported: 0 }, 'a dry run writes nothing');
    assert.deepEqual(await reserveUids(store, { upTo: 40, dryRun: false }), { previous: 0, current: 40 });
    assert.deepEqual(await reserveUids(store, { upTo: 7, dryRun: false }), { previous: 40, current: 40 });
    assert.deepEqual(await reserveUids(store, { upTo: 50, dryRun: false }), { previous: 40, current: 50 });
    assert.equal(await store.nextUid(), 51);
    await assert.rejects(reserveUids(store, { upTo: 60, dryRun: false }), (e: Error) => e instanceof Conflict && /handed out uids itself \(up to 51/.test(e.message));
    await assert.rejects(reserveUids(store, { upTo: 60, dryRun: true }), Conflict);
    assert.deepEqual(await store.uidCounter(), { value: 51, imported: 50 });
  });

  it('reserveUids is refused on a store that handed out uids before any import', async (store) => {
    await store.nextUid();
    await assert.rejects(reserveUids(store, { upTo: 1, dryRun: false }), Conflict);
  });

  it('importUsers creates records with their uids, then reports them unchanged; a differing record here is kept', async (store) => {
    await reserveUids(store, { upTo: 100, dryRun: false });
    const alice = importSample();
    const retired = importSample({ email: 'gone@example.com', uid: 0, node: '', clientState: '', seenClientStates: [], replaced: [{ uid: 9, node: '', replacedAt: 5, released: false }] });
    assert.deepEqual(await importUsers(store, { users: [alice, retired], dryRun: true }), { results: [created, created] });
    assert.equal(await store.get('sync', alice.email), null, 'a dry run writes nothing');
    assert.deepEqual(await importUsers(store, { users: [alice, retired], dryRun: false }), { results: [created, created] });
    const stored = (await store.get('sync', alice.email))!;
    assert.deepEqual(stored, { ...alice, stateChanges: [], version: 1 });
    assert.equal((await store.get('sync', retired.email))?.uid, 0);
    assert.deepEqual(await importUsers(store, { users: [alice, retired], dryRun: false }), { results: [unchanged, unchanged] });
    // A login here moved the record on: the import leaves it alone.
    await login(store, { service: 'sync', email: alice.email, generation: 2000, clientState: 'bbbb', keysChangedAt: 1500, allowNewUsers: true }, { clientStateChangesPerDay: 10 });
    const after = (await store.get('sync', alice.email))!;
    assert.deepEqual(await importUsers(store, { users: [alice], dryRun: false }), { results: [{ result: 'kept', detail: '' }] });
    assert.deepEqual(await store.get('sync', alice.email), after);
  });

  it('importUsers refuses invalid records and uids above the reservation, each on its own', async (store) => {
    await reserveUids(store, { upTo: 100, dryRun: false });
    const results = await importUsers(store, {
      users: [
        importSample({ email: 'a@x', uid: 101 }),
        importSample({ email: 'b@x', clientState: 'not valid!' }),
        importSample({ email: 'c@x', replaced: [{ uid: 42, node: '', replacedAt: 1, released: false }] }),
        importSample({ email: 'd@x', uid: 0 }),
        importSample({ email: 'ok@x', uid: 43, replaced: [] }),
      ],
      dryRun: false,
    });
    assert.deepEqual(results.results.map((r) => r.result), ['invalid', 'invalid', 'invalid', 'invalid', 'created']);
    assert.match(results.results[0].detail, /uid 101 is above the uids reserved for imports \(100\)/);
    assert.match(results.results[2].detail, /uid 42 appears twice/);
    for (const email of ['a@x', 'b@x', 'c@x', 'd@x']) assert.equal(await store.get('sync', email), null);
    await assert.rejects(importUsers(store, { users: Array.from({ length: 257 }, () => importSample()), dryRun: true }), /at most 256 users per call/);
    await assert.rejects(reserveUids(store, { upTo: -1, dryRun: false }), /up_to must be a non-negative integer/);
    await assert.rejects(reserveUids(store, { upTo: 9007199254740990, dryRun: true }), /up_to must be at most 4503599627370496/);
  });

  // ---- one uid, one account: the uid index ----

  it('insert refuses a record with a uid another account holds, live or replaced, naming it; nothing is written', async (store) => {
    const old = (uid: number) => ({ uid, node: 'https://n.example', replacedAt: 1, released: false });
    assert.equal(await store.insert(sampleUser({ email: 'alice@x', uid: 17 })), true);
    assert.equal(await store.insert(sampleUser({ email: 'alice2@x', uid: 18 })), true);
    assert.equal(await store.insert(sampleUser({ email: 'carol@x', uid: 30, replaced: [old(31)] })), true);
    const refused: Array<[UserRecord, number[]]> = [
      [sampleUser({ email: 'bob@x', uid: 17 }), [17]],
      [sampleUser({ email: 'bob2@x', uid: 19, replaced: [old(18)] }), [18]],
      [sampleUser({ email: 'dave@x', uid: 31 }), [31]],
      [sampleUser({ service: 'notes', email: 'alice@x', uid: 17 }), [17]],
      [sampleUser({ email: 'erin@x', uid: 0, replaced: [old(40), old(30)] }), [30]],
    ];
    for (const [rec, uids] of refused) {
      await assert.rejects(
        store.insert(rec),
        (e: unknown) => e instanceof UidTaken && e.holders.map((h) => h.uid).join() === uids.join() && /uid \d+ is held by sync \S+@x/.test(e.message),
        rec.email,
      );
      assert.equal(await store.get(rec.service, rec.email), null, `${rec.email} is not written`);
    }
    // What a refused insert would have brought (uid 19, 40) is free again.
    assert.deepEqual(await store.uidHolders([19, 40]), []);
    assert.equal(await store.insert(sampleUser({ email: 'frank@x', uid: 19, replaced: [old(40)] })), true);
    assert.deepEqual(await store.uidHolders([40, 17, 18, 31, 99]), [
      { uid: 17, service: 'sync', email: 'alice@x' },
      { uid: 18, service: 'sync', email: 'alice2@x' },
      { uid: 31, service: 'sync', email: 'carol@x' },
      { uid: 40, service: 'sync', email: 'frank@x' },
    ]);
    assert.deepEqual(await store.uidHolders([]), []);
  });

  it('retired records (uid 0) never collide; a lost insert of an existing account leaves its other uid free', async (store) => {
    assert.equal(await store.insert(sampleUser({ email: 'gone1@x', uid: 0 })), true);
    assert.equal(await store.insert(sampleUser({ email: 'gone2@x', uid: 0 })), true);
    assert.deepEqual(await store.uidHolders([0]), []);
    assert.equal(await store.insert(sampleUser({ email: 'a@x', uid: 5 })), true);
    assert.equal(await store.insert(sampleUser({ email: 'a@x', uid: 6 })), false);
    assert.deepEqual(await store.uidHolders([6]), [], 'the losing insert claimed nothing');
    assert.equal(await store.insert(sampleUser({ email: 'b@x', uid: 6 })), true);
  });

  it('a purged replaced uid stays its account\'s: no other account may take it', async (store) => {
    const login = await loginPolicyRecord(store);
    const replacedUid = login.replaced[0].uid;
    const claimed = await claim(store, { service: 'sync', email: login.email, uid: replacedUid, claimant: 'p', leaseMs: 60_000, replacedBefore: Date.now() + 1000 });
    assert.equal(claimed.claimed, true);
    assert.equal((await deleteReplaced(store, { service: 'sync', email: login.email, uid: replacedUid, claimant: 'p' })).deleted, true);
    assert.deepEqual(await store.uidHolders([replacedUid]), [{ uid: replacedUid, service: 'sync', email: login.email }]);
    await assert.rejects(store.insert(sampleUser({ email: 'other@x', uid: replacedUid })), UidTaken);
  });

  it('importUsers: a uid another account holds is a conflict, named, even in a dry run; nothing is written', async (store) => {
    await reserveUids(store, { upTo: 100, dryRun: false });
    const first = await importUsers(store, {
      users: [importSample({ email: 'alice@x', uid: 17, replaced: [] }), importSample({ email: 'alice2@x', uid: 18, replaced: [] })],
      dryRun: false,
    });
    assert.deepEqual(first.results, [created, created]);
    const second = [
      importSample({ email: 'bob@x', uid: 17, replaced: [] }),
      importSample({ email: 'bob2@x', uid: 19, replaced: [{ uid: 18, node: 'https://node0.example.com', replacedAt: 1, released: false }] }),
    ];
    for (const dryRun of [true, false]) {
      const r = await importUsers(store, { users: second, dryRun });
      assert.deepEqual(r.results.map((x) => x.result), ['conflict', 'conflict']);
      assert.equal(r.results[0].detail, "uid 17 is another account's here (sync alice@x)");
      assert.equal(r.results[1].detail, "uid 18 is another account's here (sync alice2@x)");
    }
    assert.equal(await store.get('sync', 'bob@x'), null);
    assert.equal(await store.get('sync', 'bob2@x'), null);
    assert.deepEqual(await store.uidHolders([19]), []);
  });

  it('the uid counter never hands back a number past 2^53 - 1: nextUid fails instead of rounding', async (store) => {
    assert.equal(await store.setUidCounter({ value: 0, imported: 0 }, { value: Number.MAX_SAFE_INTEGER - 1, imported: 0 }), true);
    assert.equal(await store.nextUid(), Number.MAX_SAFE_INTEGER);
    await assert.rejects(store.nextUid(), /past 2\^53 - 1/);
  });
}

/** A user who changed client state through the login rules: one live uid, one replaced. */
async function loginPolicyRecord(store: UserStore): Promise<UserRecord> {
  const policy = { clientStateChangesPerDay: 10 };
  await login(store, { service: 'sync', email: 'churn@x', generation: 1, clientState: 'aa', allowNewUsers: true }, policy);
  return login(store, { service: 'sync', email: 'churn@x', generation: 2, clientState: 'bb', allowNewUsers: true }, policy);
}

const created = { result: 'created', detail: '' };
const unchanged = { result: 'unchanged', detail: '' };

/** A user as ImportUsers carries it: uid 42 on a node, with history. */
export function importSample(overrides: Partial<User> = {}): User {
  return {
    service: 'sync',
    email: 'alice@example.com',
    uid: 42,
    node: 'https://node1.example.com',
    generation: 1000,
    keysChangedAt: 900,
    clientState: 'aaaa',
    seenClientStates: ['0000'],
    replaced: [{ uid: 17, node: 'https://node0.example.com', replacedAt: 1_600_000_000_000, released: false }],
    createdAt: 1_500_000_000_000,
    ...overrides,
  };
}
