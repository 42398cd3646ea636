import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_REPLACED, MAX_SEEN_CLIENT_STATES } from '../services/directory/rules.js';
import {
  accounts,
  appOf,
  duplicateUidProblem,
  emailDomainProblem,
  EmailSurvey,
  loginSettings,
  uidRangeProblem,
  emptySummary,
  formatImport,
  importFailed,
  parseNode,
  parseUser,
  progressLine,
  redactUrl,
  resolveAccount,
  slotsPassedOn,
  withPassword,
  RowProblem,
  summaryLine,
  type MozillaUser,
  type RawUser,
} from './import-rules.js';

const NODES = new Map([
  [1, 'https://a.example.com'],
  [2, 'https://b.example.com'],
]);
const nodeUrl = (id: number) => NODES.get(id);

function row(o: Partial<MozillaUser> = {}): MozillaUser {
  return { uid: 10, email: 'x@example.com', generation: 5, clientState: 'aa', createdAt: 1000, replacedAt: null, nodeid: 1, keysChangedAt: null, ...o };
}

test('parseUser: BIGINT strings and INT numbers, NULLs, and the tombstone generation', () => {
  const raw: RawUser = {
    uid: '9007199254740991',
    email: 'x@example.com',
    generation: '9223372036854775807',
    client_state: '',
    created_at: 5,
    replaced_at: null,
    nodeid: '3',
    keys_changed_at: null,
  };
  assert.deepEqual(parseUser(raw), {
    uid: Number.MAX_SAFE_INTEGER,
    email: 'x@example.com',
    generation: 'retired',
    clientState: '',
    createdAt: 5,
    replacedAt: null,
    nodeid: 3,
    keysChangedAt: null,
  });
  assert.deepEqual(parseUser({ ...raw, generation: 7n, replaced_at: '6', keys_changed_at: 8 }), {
    ...parseUser(raw),
    generation: 7,
    replacedAt: 6,
    keysChangedAt: 8,
  });
});

test('parseUser: a value beyond 2^53, a negative one, or one that is no integer is a RowProblem naming the column', () => {
  const raw: RawUser = { uid: 1, email: 'x', generation: 1, client_state: '', created_at: 1, replaced_at: null, nodeid: 1, keys_changed_at: null };
  const cases: Array<[Partial<RawUser>, RegExp]> = [
    [{ uid: '9007199254740992' }, /uid 9007199254740992 is out of range/],
    [{ generation: '9223372036854775806' }, /generation .* is out of range/],
    [{ created_at: -1 }, /created_at -1 is out of range/],
    [{ nodeid: 1.5 }, /nodeid is not an integer: 1\.5/],
    [{ replaced_at: 'x' }, /replaced_at is not an integer: x/],
    [{ uid: null }, /uid is not an integer: null/],
  ];
  for (const [o, message] of cases) assert.throws(() => parseUser({ ...raw, ...o }), (e: Error) => e instanceof RowProblem && message.test(e.message));
});

test('parseNode: a nodes row as a node of the application, flags from integers', () => {
  const raw = { id: '11', node: 'https://a.example.com', available: 3, current_load: 40, capacity: 100, downed: 0, backoff: 1 };
  assert.deepEqual(parseNode(raw, 'sync'), {
    id: 11,
    node: { service: 'sync', url: 'https://a.example.com', capacity: 100, currentLoad: 40, available: 3, downed: false, backoff: true },
  });
  assert.throws(() => parseNode({ ...raw, capacity: -1 }, 'sync'), RowProblem);
});

test('appOf: the service name without its version', () => {
  assert.equal(appOf('sync-1.5'), 'sync');
  assert.equal(appOf('sync-1.1'), 'sync');
  assert.equal(appOf('my-notes-2'), 'my-notes');
  assert.equal(appOf('sync'), 'sync');
  assert.equal(appOf('sync-beta'), 'sync-beta');
});

test('resolveAccount: one live row is the record, its node by id, no history', () => {
  const r = resolveAccount([row({ keysChangedAt: 4 })], 'sync', nodeUrl);
  assert.deepEqual(r, {
    user: {
      service: 'sync',
      email: 'x@example.com',
      uid: 10,
      node: 'https://a.example.com',
      generation: 5,
      clientState: 'aa',
      seenClientStates: [],
      replaced: [],
      createdAt: 1000,
      keysChangedAt: 4,
    },
    severalLive: false,
    retired: false,
    unassigned: false,
    replacedDropped: 0,
  });
  assert.equal('keysChangedAt' in resolveAccount([row()], 'sync', nodeUrl).user, false, 'no keys_changed_at: none');
});

test('resolveAccount: replaced rows become replaced uids (oldest first) and their client states seen ones', () => {
  const rows = [
    row({ uid: 12, generation: 9, clientState: 'cc', createdAt: 3000 }),
    row({ uid: 10, generation: 5, clientState: 'aa', createdAt: 1000, replacedAt: 2000, nodeid: 2 }),
    row({ uid: 11, generation: 7, clientState: 'bb', createdAt: 2000, replacedAt: 3000, nodeid: 9 }),
  ];
  const { user, severalLive } = resolveAccount(rows, 'sync', nodeUrl);
  assert.equal(user.uid, 12);
  assert.equal(user.createdAt, 1000, 'the account was first seen with its oldest row');
  assert.deepEqual(user.seenClientStates, ['aa', 'bb']);
  assert.deepEqual(user.replaced, [
    { uid: 10, node: 'https://b.example.com', replacedAt: 2000, released: false },
    { uid: 11, node: '', replacedAt: 3000, released: false },
  ]);
  assert.equal(severalLive, false);
});

test('resolveAccount: of several live rows the highest generation wins, then the newest, then the highest uid; the others are replaced at its creation', () => {
  const older = row({ uid: 20, generation: 9, createdAt: 1000 });
  const newer = row({ uid: 21, generation: 8, createdAt: 2000, clientState: 'bb' });
  const a = resolveAccount([newer, older], 'sync', nodeUrl);
  assert.equal(a.user.uid, 20, 'higher generation beats newer');
  assert.equal(a.severalLive, true);
  assert.deepEqual(a.user.replaced, [{ uid: 21, node: 'https://a.example.com', replacedAt: 1000, released: false }]);
  assert.deepEqual(a.user.seenClientStates, ['bb']);
  assert.equal(resolveAccount([row({ uid: 30, createdAt: 1 }), row({ uid: 31, createdAt: 2 })], 'sync', nodeUrl).user.uid, 31, 'then the newer');
  assert.equal(resolveAccount([row({ uid: 41 }), row({ uid: 40 })], 'sync', nodeUrl).user.uid, 41, 'then the higher uid');
});

test('slotsPassedOn: a row followed (by creation) by a row of the account on the same node passed its slot on', () => {
  const rows = [
    row({ uid: 3, createdAt: 3000, nodeid: 2 }),
    row({ uid: 1, createdAt: 1000, nodeid: 1 }),
    row({ uid: 2, createdAt: 2000, nodeid: 1 }),
    row({ uid: 4, createdAt: 4000, nodeid: 2 }),
  ];
  assert.deepEqual([...slotsPassedOn(rows)].sort(), [1, 3], 'uid 2 moved to node 2 (a new allocation there), uid 4 is the last');
  assert.deepEqual([...slotsPassedOn([row()])], []);
  assert.deepEqual([...slotsPassedOn([row({ uid: 6, createdAt: 5 }), row({ uid: 5, createdAt: 5 })])], [5], 'same time: by uid');
});

test('resolveAccount: a replaced uid on the node its next row took is released (Mozilla counted one slot), others hold theirs', () => {
  const rows = [
    row({ uid: 10, clientState: 'aa', createdAt: 1000, replacedAt: 2000, nodeid: 1 }),
    row({ uid: 11, clientState: 'bb', createdAt: 2000, replacedAt: 3000, nodeid: 2 }),
    row({ uid: 12, clientState: 'cc', createdAt: 3000, replacedAt: 4000, nodeid: 2 }),
    row({ uid: 13, clientState: 'dd', createdAt: 4000, nodeid: 2 }),
  ];
  assert.deepEqual(
    resolveAccount(rows, 'sync', nodeUrl).user.replaced.map((r) => [r.uid, r.released]),
    [
      [10, false],
      [11, true],
      [12, true],
    ],
  );
  const retired = rows.map((r) => ({ ...r, generation: 'retired' as const, replacedAt: r.replacedAt ?? 5000 }));
  assert.deepEqual(resolveAccount(retired, 'sync', nodeUrl).user.replaced.map((r) => r.released), [false, true, true, false], 'a deleted account\'s last row holds its slot');
  const gone = [row({ uid: 20, createdAt: 1, replacedAt: 2, nodeid: 9 }), row({ uid: 21, createdAt: 2, nodeid: 9 })];
  assert.deepEqual(resolveAccount(gone, 'sync', nodeUrl).user.replaced, [{ uid: 20, node: '', replacedAt: 2, released: false }], 'no node, no slot');
});

test('resolveAccount: seen states leave out the empty state, the current one and repeats', () => {
  const rows = [
    row({ uid: 5, clientState: 'cc', createdAt: 50 }),
    row({ uid: 1, clientState: '', createdAt: 10, replacedAt: 20 }),
    row({ uid: 2, clientState: 'aa', createdAt: 20, replacedAt: 30 }),
    row({ uid: 3, clientState: 'cc', createdAt: 30, replacedAt: 40 }),
    row({ uid: 4, clientState: 'aa', createdAt: 40, replacedAt: 50 }),
  ];
  assert.deepEqual(resolveAccount(rows, 'sync', nodeUrl).user.seenClientStates, ['aa']);
});

test('resolveAccount: a deleted account (tombstone generation) has no live uid: uid 0, every row replaced', () => {
  const rows = [row({ uid: 7, generation: 'retired', replacedAt: 900, keysChangedAt: 3 }), row({ uid: 8, generation: 'retired', createdAt: 1001, replacedAt: 900, nodeid: 2 })];
  const r = resolveAccount(rows, 'sync', nodeUrl);
  assert.equal(r.retired, true);
  assert.equal(r.unassigned, false);
  assert.deepEqual(
    { ...r.user },
    {
      service: 'sync',
      email: 'x@example.com',
      uid: 0,
      node: '',
      generation: 0,
      clientState: '',
      seenClientStates: [],
      replaced: [
        { uid: 7, node: 'https://a.example.com', replacedAt: 900, released: false },
        { uid: 8, node: 'https://b.example.com', replacedAt: 900, released: false },
      ],
      createdAt: 1000,
    },
  );
});

test('resolveAccount: a current row that Mozilla replaced, or whose node is gone, keeps its uid without a node', () => {
  const replaced = resolveAccount([row({ replacedAt: 2000 })], 'sync', nodeUrl);
  assert.deepEqual([replaced.user.uid, replaced.user.node, replaced.unassigned, replaced.user.replaced], [10, '', true, []]);
  const gone = resolveAccount([row({ nodeid: 77 })], 'sync', nodeUrl);
  assert.deepEqual([gone.user.uid, gone.user.node, gone.unassigned], [10, '', true]);
});

test('resolveAccount: the e-mail is normalised as login normalises it', () => {
  assert.equal(resolveAccount([row({ email: 'Bob@Example.COM' })], 'sync', nodeUrl).user.email, 'Bob@example.com');
});

test('resolveAccount: beyond the caps the newest replaced uids and seen states are kept, and the dropped uids counted', () => {
  const n = MAX_REPLACED + 5;
  const old = Array.from({ length: n }, (_, i) => row({ uid: 100 + i, clientState: `s${i}`, createdAt: i, replacedAt: i + 1 }));
  const r = resolveAccount([row({ uid: 1, clientState: 'now', createdAt: 10_000 }), ...old], 'sync', nodeUrl);
  assert.equal(r.user.replaced.length, MAX_REPLACED);
  assert.equal(r.user.replaced[0].uid, 105);
  assert.equal(r.replacedDropped, 5);
  assert.equal(r.user.seenClientStates.length, MAX_SEEN_CLIENT_STATES);
  assert.equal(r.user.seenClientStates.at(-1), `s${n - 1}`);
  assert.throws(() => resolveAccount([], 'sync', nodeUrl));
});

test('accounts: consecutive rows of one e-mail come out together', async () => {
  async function* source() {
    for (const email of ['a', 'a', 'b', 'c', 'c', 'c']) yield { email };
  }
  const groups: string[][] = [];
  for await (const g of accounts(source())) groups.push(g.map((r) => r.email));
  assert.deepEqual(groups, [['a', 'a'], ['b'], ['c', 'c', 'c']]);
  async function* none(): AsyncGenerator<{ email: string }> {}
  for await (const g of accounts(none())) assert.fail(`no group expected, got ${JSON.stringify(g)}`);
});

test('withPassword: MYSQL_PWD / PGPASSWORD go into a URL that has a user and no password, encoded; nothing else changes', () => {
  assert.equal(withPassword('mysql://ts@db.example/tokenserver', 'p@ss:w/rd%'), 'mysql://ts:p%40ss%3Aw%2Frd%25@db.example/tokenserver');
  assert.equal(new URL(withPassword('mysql://ts@db/t', 'p@ss:w/rd%')).password, 'p%40ss%3Aw%2Frd%25');
  assert.equal(withPassword('mysql://ts:given@db/t', 'env'), 'mysql://ts:given@db/t', 'a password in the URL wins');
  assert.equal(withPassword('mysql://ts@db/t', undefined), 'mysql://ts@db/t');
  assert.equal(withPassword('mysql://ts@db/t', ''), 'mysql://ts@db/t');
  assert.equal(withPassword('mysql://db/t', 'env'), 'mysql://db/t', 'no user: nothing to attach it to');
  assert.equal(withPassword('not a url', 'env'), 'not a url');
});

test('parseCli import: the password comes from MYSQL_PWD (mysql://) or PGPASSWORD (postgres://), never needed in --from', async () => {
  const { parseCli } = await import('./args.js');
  const env = { INTERNAL_SECRET: 'x'.repeat(48) };
  const my = parseCli(['import', '--from', 'mysql://ts@db/t'], { ...env, MYSQL_PWD: 'pw1', PGPASSWORD: 'pw2' }) as { command: { password?: string } };
  const pg = parseCli(['import', '--from', 'postgres://ts@db/t'], { ...env, MYSQL_PWD: 'pw1', PGPASSWORD: 'pw2' }) as { command: { password?: string } };
  const none = parseCli(['import', '--from', 'mysql://ts@db/t'], env) as { command: { password?: string } };
  assert.deepEqual([my.command.password, pg.command.password, none.command.password], ['pw1', 'pw2', undefined]);
});

test('redactUrl hides the password only', () => {
  assert.equal(redactUrl('mysql://user:s3cret@db.example:3306/tokenserver'), 'mysql://user:***@db.example:3306/tokenserver');
  assert.equal(redactUrl('postgres://user@db/ts'), 'postgres://user@db/ts');
  assert.equal(redactUrl('not a url'), '(unparseable URL)');
});

test('progressLine: a bar, the share and the counts; an empty table is done', () => {
  assert.equal(progressLine(0, 200, 10), '[..........]   0%  0/200 rows');
  assert.equal(progressLine(90, 200, 10), '[#####.....]  45%  90/200 rows');
  assert.equal(progressLine(200, 200, 10), '[##########] 100%  200/200 rows');
  assert.equal(progressLine(250, 200, 10), '[##########] 100%  250/200 rows');
  assert.equal(progressLine(0, 0, 4), '[####] 100%  0/0 rows');
});

test('formatImport and summaryLine: what changed, what would, nothing, and what was not imported', () => {
  const s = emptySummary('postgres://u:***@db/ts', 'sync-1.5', 'sync', false);
  assert.equal(importFailed(s), false);
  assert.equal(summaryLine(s), 'nothing to change: every node and account of sync-1.5 is here already (0 nodes, 0 accounts)');
  s.uidCounter = { previous: 0, current: 90 };
  assert.equal(summaryLine(s), 'imported 0 accounts and 0 nodes of sync-1.5', 'a raised counter is a change');
  Object.assign(s, { accounts: 3, rows: 5, retired: 1, replacedUids: 2, replacedDropped: 4 });
  s.users = { created: 1, unchanged: 0, kept: 1, invalid: 1, conflict: 0 };
  s.nodes = { created: 1, updated: 0, unchanged: 0, invalid: 0 };
  s.problems = [{ what: 'k@x', uids: [4, 5], result: 'kept', detail: 'it stays' }];
  const text = formatImport(s);
  assert.equal(importFailed(s), true);
  assert.match(text, /^postgres:\/\/u:\*\*\*@db\/ts, service sync-1\.5 → application sync\n/);
  assert.match(text, /\naccounts: 3 \(from 5 rows\): 1 created, 0 unchanged, 1 kept as they are here, 1 invalid\n/);
  assert.match(text, /\n {2}4 oldest replaced uids beyond the 100 a record keeps were left out/);
  assert.match(text, /\n {2}kept: k@x \(uid 4, 5\): it stays\n {2}… and 1 more\n/);
  assert.match(text, /\nimported 1 account and 1 node of sync-1\.5; 2 accounts and 0 nodes not imported \(listed above\)\n$/);
  const dry = formatImport({ ...s, dryRun: true, problems: [], users: { created: 2, unchanged: 0, kept: 0, invalid: 0, conflict: 0 } });
  assert.match(dry, /^dry run: nothing written\. /);
  assert.match(dry, /nodes: 1 would be created/);
  assert.match(dry, /uid counter: 0 → 90 \(would be\)/);
  assert.match(dry, /\nwould import 2 accounts and 1 node of sync-1\.5\n$/);
});

test('EmailSurvey: rows per domain as login spells it; only addresses some row spells otherwise are remembered', () => {
  const survey = new EmailSurvey();
  for (const email of ['a@api.accounts.firefox.com', 'b@API.Accounts.Firefox.com', 'zo\u00eb@x.example', 'zoe\u0308@x.example', 'Bob@x.example', 'bob@x.example']) survey.add(email);
  assert.deepEqual([...survey.domains], [
    ['api.accounts.firefox.com', 2],
    ['x.example', 4],
  ]);
  assert.deepEqual([...survey.respelled].sort(), ['b@api.accounts.firefox.com', 'zo\u00eb@x.example'], 'the local part keeps its case: Bob and bob are two accounts');
});

test('emailDomainProblem: another domain than OAUTH_EMAIL_DOMAIN is refused naming both, unless --any-email-domain', () => {
  const fxa = 'api.accounts.firefox.com';
  assert.equal(emailDomainProblem(new Map([[fxa, 30]]), fxa, false), null);
  assert.equal(emailDomainProblem(new Map(), fxa, false), null, 'no accounts');
  const only = emailDomainProblem(new Map([['accounts.example.org', 32]]), fxa, false);
  assert.match(only!, /^the accounts carry the e-mail domain accounts\.example\.org \(32 rows\), but OAUTH_EMAIL_DOMAIN is api\.accounts\.firefox\.com: /);
  assert.match(only!, /Set OAUTH_EMAIL_DOMAIN to Mozilla's fxa_email_domain/);
  const mixed = emailDomainProblem(new Map([[fxa, 3], ['b.example', 1], ['a.example', 2]]), fxa, false);
  assert.match(mixed!, /domain a\.example \(2 rows\), b\.example \(1 row\), but OAUTH_EMAIL_DOMAIN is api\.accounts\.firefox\.com \(3 rows of api\.accounts\.firefox\.com\)/);
  assert.match(mixed!, /--any-email-domain$/);
  assert.equal(emailDomainProblem(new Map([['a.example', 2]]), fxa, true), null);
  const many = emailDomainProblem(new Map(Array.from({ length: 7 }, (_, i) => [`d${i}.example`, 1] as [string, number])), fxa, false);
  assert.match(many!, /, … 2 more, but/);
});

test('uidRangeProblem: a source uid above 2^52 is refused, naming it exactly (beyond 2^53 too)', () => {
  assert.equal(uidRangeProblem(0n), null);
  assert.equal(uidRangeProblem(2n ** 52n), null);
  assert.match(uidRangeProblem(9007199254740990n)!, /^the source holds uid 9007199254740990, above 4503599627370496/);
  assert.match(uidRangeProblem(2n ** 63n - 1n)!, /uid 9223372036854775807,/);
});

test('duplicateUidProblem: uids on several rows are named', () => {
  assert.equal(duplicateUidProblem([]), null);
  assert.match(duplicateUidProblem(['60', '61'])!, /^the source has uid 60, 61 on more than one row: each uid must be one account's\. Nothing was written/);
});

test('formatImport: several spellings of one e-mail are reported as replaced uids, and the login settings to set are printed', () => {
  const s = emptySummary('mysql://u:***@db/ts', 'sync-1.5', 'sync', false, loginSettings('api.accounts.firefox.com'));
  s.accounts = 1;
  s.rows = 2;
  s.users.created = 1;
  s.respelled = 1;
  s.respelledAccounts = [{ email: 'zo\u00eb@x.example', spellings: ['zo\u00eb@x.example', 'zoe\u0308@x.example'], uid: 101, replacedUids: [100] }];
  const text = formatImport(s);
  assert.match(text, /\n {2}1 with rows under several spellings of one e-mail \(domain case, Unicode form\): the current row kept, the others' uids replaced\n/);
  assert.match(text, /\n {4}zo\u00eb@x\.example \(uid 101\): "zo\u00eb@x\.example", "zoe\u0308@x\.example"; replaced uids 100\n/);
  assert.doesNotMatch(text, /kept:/);
  assert.match(text, /\nset on login before it starts:\n {2}OAUTH_EMAIL_DOMAIN: api\.accounts\.firefox\.com\n {2}METRICS_HASH_SECRET: Mozilla's fxa_metrics_hash_secret .*\n {2}NODE_TYPE: Mozilla's node_type .*e\.g\. mysql.*\nimported 1 account/);
  assert.equal(importFailed(s), false);
  s.users.conflict = 1;
  assert.equal(importFailed(s), true, 'a conflict fails the run');
});

test('resolveAccount: rows of one address under several spellings are one account; Mozilla\'s current row wins, the others are replaced', () => {
  const nfc = 'zo\u00eb@x.example';
  const rows = [
    row({ uid: 100, email: nfc, generation: 5, clientState: 'aa', createdAt: 1000 }),
    row({ uid: 101, email: 'zoe\u0308@X.Example', generation: 7, clientState: 'bb', createdAt: 900, nodeid: 2 }),
  ];
  const { user, severalLive } = resolveAccount(rows, 'sync', nodeUrl);
  assert.deepEqual([user.email, user.uid, user.node, user.clientState, user.seenClientStates], [nfc, 101, 'https://b.example.com', 'bb', ['aa']]);
  assert.deepEqual(user.replaced, [{ uid: 100, node: 'https://a.example.com', replacedAt: 900, released: false }]);
  assert.equal(severalLive, true);
});

// ---- found missing by mutation testing (npm run mutation -- cli/import-rules.ts) ----

test('parseUser and parseNode: an integer is all digits; zero is a count; every column is named in its problem', () => {
  const raw: RawUser = { uid: 1, email: 'x', generation: 1, client_state: '', created_at: 1, replaced_at: null, nodeid: 1, keys_changed_at: null };
  for (const junk of ['12abc', 'abc12', '1e3', '']) {
    assert.throws(() => parseUser({ ...raw, created_at: junk }), (e: Error) => e instanceof RowProblem && e.message === `created_at is not an integer: ${junk}`);
  }
  assert.equal(parseUser({ ...raw, created_at: 0, keys_changed_at: '0' }).createdAt, 0, 'zero is in range');
  const userColumns: Array<[keyof RawUser, string]> = [
    ['generation', 'generation'],
    ['keys_changed_at', 'keys_changed_at'],
    ['created_at', 'created_at'],
  ];
  for (const [column, name] of userColumns) {
    assert.throws(() => parseUser({ ...raw, [column]: 'x' }), (e: Error) => e.message === `${name} is not an integer: x`);
  }
  assert.throws(() => parseUser({ ...raw, generation: -2 }), (e: Error) => e.message === 'generation -2 is out of range (0 to 2^53 - 1)');
  const node = { id: 11, node: 'https://a.example.com', available: 0, current_load: 0, capacity: 0, downed: 1, backoff: 0 };
  assert.deepEqual(parseNode(node, 'sync').node, { service: 'sync', url: 'https://a.example.com', capacity: 0, currentLoad: 0, available: 0, downed: true, backoff: false });
  for (const column of ['id', 'capacity', 'current_load', 'available', 'downed', 'backoff'] as const) {
    assert.throws(() => parseNode({ ...node, [column]: 'x' }, 'sync'), (e: Error) => e instanceof RowProblem && e.message === `${column} is not an integer: x`);
  }
});

test('appOf: a version is digits and dots to the end of the name', () => {
  assert.equal(appOf('sync-15'), 'sync');
  assert.equal(appOf('sync-1.15'), 'sync');
  assert.equal(appOf('sync-1.5beta'), 'sync-1.5beta');
});

test("resolveAccount: a deleted row (tombstone generation) outranks a newer live one, as Mozilla's highest generation does", () => {
  const r = resolveAccount([row({ uid: 50, generation: 9, createdAt: 5000 }), row({ uid: 40, generation: 'retired', createdAt: 1000, replacedAt: 1000 })], 'sync', nodeUrl);
  assert.equal(r.retired, true);
  assert.equal(r.user.uid, 0);
  assert.deepEqual(r.user.replaced.map((x) => x.uid), [40, 50]);
});

test('resolveAccount: ties broken by uid in any order of the rows, for the current row and for the seen states', () => {
  const tied = [row({ uid: 5, clientState: 'c5' }), row({ uid: 9, clientState: 'c9' }), row({ uid: 7, clientState: 'c7' })];
  for (const order of [[0, 1, 2], [2, 1, 0], [1, 0, 2], [2, 0, 1]]) {
    const r = resolveAccount(order.map((i) => tied[i]), 'sync', nodeUrl);
    assert.equal(r.user.uid, 9, `order ${order}`);
    // The other rows' states, oldest first, a tie in creation by uid.
    assert.deepEqual(r.user.seenClientStates, ['c5', 'c7'], `order ${order}`);
  }
  assert.throws(() => resolveAccount([], 'sync', nodeUrl), /^Error: an account has at least one row$/);
});

test('emailDomainProblem: domains with as many rows listed by name; five named, the rest counted; the reason given', () => {
  const fxa = 'api.accounts.firefox.com';
  for (const order of [['c.example', 'a.example', 'b.example'], ['b.example', 'c.example', 'a.example']]) {
    const text = emailDomainProblem(new Map(order.map((d) => [d, 1] as [string, number])), fxa, false)!;
    assert.match(text, /domain a\.example \(1 row\), b\.example \(1 row\), c\.example \(1 row\), but/);
  }
  const five = emailDomainProblem(new Map(Array.from({ length: 5 }, (_, i) => [`d${i}.example`, 1] as [string, number])), fxa, false)!;
  assert.match(five, /d4\.example \(1 row\), but/);
  assert.doesNotMatch(five, /more/);
  const seven = emailDomainProblem(new Map(Array.from({ length: 7 }, (_, i) => [`d${i}.example`, 1] as [string, number])), fxa, false)!;
  assert.match(seven, /d4\.example \(1 row\), … 2 more, but/);
  assert.doesNotMatch(seven, /d5\.example/);
  assert.match(seven, /: a Bearer login looks accounts up as <fxa uid>@api\.accounts\.firefox\.com, so these would get a new uid and empty storage\. Set OAUTH_EMAIL_DOMAIN/);
  assert.equal(
    uidRangeProblem(2n ** 52n + 1n),
    'the source holds uid 4503599627370497, above 4503599627370496, the highest uid an import may bring: the uid counter continues above the highest imported uid and must stay below 2^53 for every account made here later. Nothing was written',
  );
});

test('withPassword: an empty password leaves the URL exactly as given', () => {
  assert.equal(withPassword('postgres://u@db/a b', ''), 'postgres://u@db/a b');
  assert.equal(withPassword('postgres://u@db/a b', 'pw'), 'postgres://u:pw@db/a%20b');
});

test('emptySummary, importFailed and summaryLine: every count starts at zero; an invalid node fails the run; an updated node is a change', () => {
  const s = emptySummary('src', 'sync-1.5', 'sync', false);
  assert.deepEqual(
    { ...s, settings: undefined },
    {
      source: 'src',
      service: 'sync-1.5',
      app: 'sync',
      dryRun: false,
      uidCounter: { previous: 0, current: 0 },
      nodes: { created: 0, updated: 0, unchanged: 0, invalid: 0 },
      rows: 0,
      accounts: 0,
      users: { created: 0, unchanged: 0, kept: 0, invalid: 0, conflict: 0 },
      retired: 0,
      unassigned: 0,
      replacedUids: 0,
      severalLive: 0,
      replacedDropped: 0,
      respelled: 0,
      respelledAccounts: [],
      problems: [],
      settings: undefined,
    },
  );
  assert.equal(importFailed({ ...s, nodes: { ...s.nodes, invalid: 1 } }), true);
  assert.equal(importFailed({ ...s, users: { ...s.users, invalid: 1 } }), true);
  assert.equal(summaryLine({ ...s, nodes: { ...s.nodes, updated: 1 } }), 'imported 0 accounts and 1 node of sync-1.5');
  assert.equal(summaryLine({ ...s, nodes: { ...s.nodes, created: 2, updated: 1 } }), 'imported 0 accounts and 3 nodes of sync-1.5');
  assert.equal(
    summaryLine({ ...s, users: { ...s.users, created: 1, kept: 1, invalid: 1, conflict: 2 }, nodes: { ...s.nodes, invalid: 1 } }),
    'imported 1 account and 0 nodes of sync-1.5; 4 accounts and 1 node not imported (listed above)',
  );
});

test('formatImport: every line of a run with conflicts, respellings beyond the listed ones, problems with and without uids or detail', () => {
  const s = emptySummary('src', 'sync-1.5', 'sync', false, loginSettings('api.accounts.firefox.com'));
  Object.assign(s, { accounts: 9, rows: 12, retired: 2, unassigned: 3, replacedUids: 4, severalLive: 1, respelled: 3 });
  s.uidCounter = { previous: 10, current: 90 };
  s.users = { created: 4, unchanged: 0, kept: 1, invalid: 0, conflict: 2 };
  s.nodes = { created: 0, updated: 0, unchanged: 1, invalid: 1 };
  s.respelledAccounts = [
    { email: 'a@x.example', spellings: ['a@x.example', 'a@X.example'], uid: 5, replacedUids: [3, 4] },
    { email: 'b@x.example', spellings: ['b@x.example', 'b@X.EXAMPLE'], uid: 6, replacedUids: [] },
  ];
  s.problems = [
    { what: 'c@x.example', uids: [7, 8], result: 'conflict', detail: 'uid 7 is d@x.example here' },
    { what: 'https://gone.example', uids: [], result: 'invalid', detail: '' },
  ];
  assert.equal(
    formatImport(s),
    [
      'src, service sync-1.5 → application sync',
      'nodes: 0 created, 0 updated, 1 unchanged, 1 invalid',
      'accounts: 9 (from 12 rows): 4 created, 0 unchanged, 1 kept as they are here, 0 invalid, 2 with a uid another account holds here',
      '  4 replaced uids; 2 deleted accounts; 3 without a node (one is assigned at their next login); 1 with several live rows (the current one kept, the others replaced)',
      "  3 with rows under several spellings of one e-mail (domain case, Unicode form): the current row kept, the others' uids replaced",
      '    a@x.example (uid 5): "a@x.example", "a@X.example"; replaced uids 3, 4',
      '    b@x.example (uid 6): "b@x.example", "b@X.EXAMPLE"; replaced uids none',
      '    … and 1 more',
      'uid counter: 10 → 90; new uids start above it',
      '  conflict: c@x.example (uid 7, 8): uid 7 is d@x.example here',
      '  invalid: https://gone.example',
      '  … and 2 more',
      'set on login before it starts:',
      ...Object.entries(s.settings).map(([name, value]) => `  ${name}: ${value}`),
      'imported 4 accounts and 0 nodes of sync-1.5; 3 accounts and 1 node not imported (listed above)',
      '',
    ].join('\n'),
  );
  // As many respellings as listed, no dropped uids, every problem listed: no line for any of them.
  const exact = formatImport({ ...s, respelled: 2, problems: [], users: { ...s.users, kept: 0, conflict: 0 }, nodes: { ...s.nodes, invalid: 0 } });
  assert.doesNotMatch(exact, /… and|oldest replaced uids|with a uid another account/);
  assert.doesNotMatch(formatImport({ ...s, respelled: 0, respelledAccounts: [] }), /several spellings/);
});
