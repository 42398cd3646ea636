import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { COMMANDS, commandHelp, durationArg, emailArg, groupHelp, parseCli, topHelp, UsageError, wholeNumber, type Command, type Parsed } from './args.js';
import { loadOrCreateDevSecrets } from '../lib/dev-secrets.js';
import { transportReason } from './backends.js';

/** Commands that talk to a backend need it; the tests below are about everything else. */
const INTERNAL_SECRET = 'i'.repeat(32);

function run(argv: string[], env: Record<string, string> = {}): Extract<Parsed, { kind: 'run' }> {
  const p = parseCli(argv, { INTERNAL_SECRET, ...env });
  assert.equal(p.kind, 'run');
  return p as Extract<Parsed, { kind: 'run' }>;
}

function command(argv: string[], env: Record<string, string> = {}): Command {
  return run(argv, env).command;
}

/** The UsageError parseCli throws for `argv`: its message and the usage text printed with it. */
function refusal(argv: string[], env: Record<string, string> = { INTERNAL_SECRET }): UsageError {
  try {
    parseCli(argv, env);
  } catch (e) {
    assert.ok(e instanceof UsageError, `expected a UsageError, got ${String(e)}`);
    return e;
  }
  assert.fail(`${argv.join(' ')} was accepted`);
}

function usageError(argv: string[], pattern: RegExp, env: Record<string, string> = { INTERNAL_SECRET }): void {
  assert.match(refusal(argv, env).message, pattern);
}

test('INTERNAL_SECRET: required (and checked) for commands that call a backend, sent by their clients; not for health', () => {
  const nowhere = { DATA_DIR: '/nonexistent/tokenserver-data' };
  usageError(['nodes', 'list'], /^nodes list: INTERNAL_SECRET: is required/, nowhere);
  usageError(['users', 'show', 'sync', 'a@example.com'], /^users show: INTERNAL_SECRET: must be at least 32 bytes/, { ...nowhere, INTERNAL_SECRET: 'short' });
  assert.equal(run(['nodes', 'list'], nowhere).globals.auth.internalSecret, INTERNAL_SECRET);
  assert.equal(parseCli(['health', '127.0.0.1:1'], nowhere).kind, 'run');
  assert.equal(run(['health', '127.0.0.1:1'], nowhere).globals.auth.internalSecret, undefined);
});

test('every nodes command parses to its request', () => {
  assert.deepEqual(command(['nodes', 'add', 'sync', 'https://n1.example/', '--capacity', '100']), {
    kind: 'nodes add',
    app: 'sync',
    url: 'https://n1.example',
    capacity: 100,
    existOk: false,
  });
  assert.equal((command(['nodes', 'add', 'sync', 'https://n1.example', '--capacity=5', '--exist-ok']) as { existOk: boolean }).existOk, true);
  assert.deepEqual(command(['nodes', 'list']), { kind: 'nodes list', app: '' });
  assert.deepEqual(command(['nodes', 'list', 'notes']), { kind: 'nodes list', app: 'notes' });
  const update = (argv: string[]) => (command(['nodes', ...argv, 'sync', 'http://n']) as Extract<Command, { kind: 'nodes update' }>).patch;
  assert.deepEqual(update(['update', '--capacity', '7']), { capacity: 7 });
  assert.deepEqual(update(['down']), { downed: true });
  assert.deepEqual(update(['up']), { downed: false });
  assert.deepEqual(update(['backoff']), { backoff: true });
  assert.deepEqual(update(['backoff', '--off']), { backoff: false });
  assert.deepEqual(command(['nodes', 'remove', 'sync', 'http://n']), { kind: 'nodes remove', app: 'sync', url: 'http://n' });
  assert.deepEqual(command(['users', 'show', 'sync', 'a@example.com']), { kind: 'users show', app: 'sync', email: 'a@example.com' });
});

test('global options may come before or after the command', () => {
  const a = run(['--json', '--nodeassign', 'na:1234', 'nodes', 'list']);
  const b = run(['nodes', 'list', '--json', '--nodeassign=na:1234']);
  assert.deepEqual(a, b);
  assert.equal(a.globals.json, true);
  assert.deepEqual(a.globals.addrs, { nodeassign: 'na:1234', directory: '127.0.0.1:50051' });
});

test('nodes secret: the URL exactly as given, the master secrets and TOKEN_SECRETS; no backend, so no INTERNAL_SECRET', () => {
  const master = 'm'.repeat(64);
  const nowhere = { DATA_DIR: '/nonexistent/tokenserver-data' };
  const p = run(['nodes', 'secret', 'sync', 'https://n.example/'], { ...nowhere, MASTER_SECRETS: master, INTERNAL_SECRET: '' });
  assert.deepEqual(p.command, { kind: 'nodes secret', app: 'sync', url: 'https://n.example/', masterSecrets: [master], tokenSecrets: 'derived' });
  assert.deepEqual(p.globals.addrs, {});
  assert.equal(p.globals.auth.internalSecret, undefined);
  const m = command(['nodes', 'secret', 'sync', 'https://n.example'], { MASTER_SECRETS: master, TOKEN_SECRETS: 'master' });
  assert.ok(m.kind === 'nodes secret' && m.tokenSecrets === 'master');
  usageError(['nodes', 'secret', 'sync', 'https://n.example'], /^nodes secret: TOKEN_SECRETS: must be derived or master, got "Master"/, { MASTER_SECRETS: master, TOKEN_SECRETS: 'Master' });
  usageError(['nodes', 'secret', 'sync', 'https://n.example'], /^nodes secret: MASTER_SECRETS: is required/, nowhere);
  usageError(['nodes', 'secret', 'sync', ' https://n.example'], /<url>: no surrounding whitespace/, { MASTER_SECRETS: master });
  usageError(['nodes', 'secret', 'sync', 'https://n.example?x=1'], /<url>: must not carry a query/, { MASTER_SECRETS: master });
  usageError(['nodes', 'secret', 'sync'], /missing <url>/, { MASTER_SECRETS: master });
});

test('users purge / users list / backup: durations, defaults, secrets only when the node deletes need them', () => {
  const p = command(['users', 'purge', '--grace', '12h', '--max', '5', '--app', 'sync'], { MASTER_SECRETS: 'a'.repeat(64) });
  assert.equal(p.kind, 'users purge');
  if (p.kind !== 'users purge') return;
  assert.equal(p.graceMs, 12 * 3600 * 1000);
  assert.equal(p.max, 5);
  assert.equal(p.app, 'sync');
  assert.deepEqual(p.masterSecrets, ['a'.repeat(64)]);
  assert.equal(p.tokenSecrets, 'derived');
  const m = command(['users', 'purge'], { MASTER_SECRETS: 'a'.repeat(64), TOKEN_SECRETS: 'master' });
  assert.ok(m.kind === 'users purge' && m.tokenSecrets === 'master', 'the purger signs as login does');
  assert.deepEqual([...p.versions.get('sync')!], ['1.5']);
  const d = command(['users', 'purge', '--dry-run']);
  assert.ok(d.kind === 'users purge' && d.graceMs === 7 * 86_400_000 && d.masterSecrets.length === 0 && d.max === Number.MAX_SAFE_INTEGER);
  const k = command(['users', 'purge', '--skip-node-delete'], { PURGE_KEEP_CLIENT_STATES: '3' });
  assert.ok(k.kind === 'users purge' && k.keepClientStates === 3 && k.masterSecrets.length === 0);
  usageError(['users', 'purge'], /MASTER_SECRETS: is required/, { DATA_DIR: '/nonexistent-i-ops' });
  usageError(['users', 'purge', '--grace', '7w', '--dry-run'], /--grace: expected a duration/);
  usageError(['users', 'purge', '--dry-run', '--keep-client-states', 'x'], /--keep-client-states: must be a whole number/);
  assert.deepEqual(command(['users', 'list', 'sync', '--replaced', '--node', 'https://n.example', '--limit', '5', '--after', 'c']), {
    kind: 'users list', app: 'sync', node: 'https://n.example', replaced: true, limit: 5, after: 'c',
  });
  usageError(['users', 'list', 'sync', '--limit', '0'], /--limit: must be between 1 and 1000/);
  assert.deepEqual(command(['backup', '/tmp/b.db'], { DATA_DIR: '/d' }), { kind: 'backup', file: '/tmp/b.db', source: '/d/tokenserver.db' });
  usageError(['backup', '/tmp/b.db'], /mongodump/, { STORE_URL: 'mongodb://m/x' });
});

test('addresses: flag over environment over default, only for the backends a command uses', () => {
  assert.deepEqual(run(['nodes', 'down', 'sync', 'http://n']).globals.addrs, { nodeassign: '127.0.0.1:50052' });
  assert.deepEqual(run(['nodes', 'down', 'sync', 'http://n'], { NODEASSIGN_ADDR: 'nodeassign:50052' }).globals.addrs, { nodeassign: 'nodeassign:50052' });
  assert.deepEqual(run(['nodes', 'remove', 'sync', 'http://n', '--directory', 'd:1'], { DIRECTORY_ADDR: 'x:2' }).globals.addrs, {
    nodeassign: '127.0.0.1:50052',
    directory: 'd:1',
  });
  assert.deepEqual(run(['users', 'show', 'sync', 'a@b.c']).globals.addrs, { directory: '127.0.0.1:50051' });
  // A bad DIRECTORY_ADDR does not break a command that never calls directory.
  assert.deepEqual(run(['dev', 'assertion', 'a@b.c', '--audience', 'x'], { DIRECTORY_ADDR: 'nonsense' }).globals.addrs, {});
  usageError(['users', 'show', 'sync', 'a@b.c'], /DIRECTORY_ADDR: must be host:port/, { DIRECTORY_ADDR: 'nonsense' });
  usageError(['nodes', 'list', '--nodeassign', 'nope'], /--nodeassign: must be host:port/);
});

test('--timeout sets the deadline within bounds', () => {
  assert.equal(run(['nodes', 'list']).globals.deadlineMs, 2000);
  assert.equal(run(['nodes', 'list', '--timeout', '500']).globals.deadlineMs, 500);
  usageError(['nodes', 'list', '--timeout', '5'], /--timeout: must be between 50/);
  usageError(['nodes', 'list', '--timeout', 'soon'], /--timeout: must be a whole number/);
});

test('bad arguments name what is wrong', () => {
  usageError([], /missing command/);
  usageError(['frobnicate'], /unknown command "frobnicate"/);
  usageError(['nodes'], /nodes: missing command/);
  usageError(['nodes', 'explode'], /nodes: unknown command "explode"/);
  usageError(['nodes', 'add', 'sync'], /nodes add: missing <url>/);
  usageError(['nodes', 'add', 'sync', 'http://n'], /--capacity is required/);
  usageError(['nodes', 'add', 'sync', 'http://n', '--capacity', '-3'], /Option '--capacity' argument is ambiguous$/);
  usageError(['nodes', 'add', 'sync', 'http://n', '--capacity=-3'], /--capacity: must be a whole number/);
  usageError(['nodes', 'add', 'sync', 'http://n', '--capacity', '1.5'], /--capacity: must be a whole number/);
  usageError(['nodes', 'add', 'sync', 'http://n', '--capacity'], /--capacity/);
  usageError(['nodes', 'add', 'sy nc', 'http://n', '--capacity', '1'], /<app>: expected an application name/);
  usageError(['nodes', 'add', 'sync', 'ftp://n', '--capacity', '1'], /<url>: must be an http or https URL/);
  usageError(['nodes', 'add', 'sync', 'n.example', '--capacity', '1'], /<url>: must be an absolute URL/);
  usageError(['nodes', 'add', 'sync', 'http://n', '--capacity', '1', '--bogus'], /nodes add: Unknown option '--bogus'$/);
  usageError(['nodes', 'list', 'sync', 'extra'], /unexpected argument "extra"/);
  usageError(['nodes', 'down', 'sync', 'http://n', '--off'], /Unknown option '--off'/);
  usageError(['users', 'show', 'sync', 'not-an-email'], /<email>: expected an email address/);
  usageError(['--nodeassign', 'x:1'], /missing command/);
});

test('help: top level, each group and each command', () => {
  for (const argv of [['--help'], ['-h'], ['help']]) {
    const p = parseCli(argv, {});
    assert.equal(p.kind, 'help');
    assert.equal((p as { text: string }).text, topHelp());
  }
  assert.match((parseCli(['nodes', '--help'], {}) as { text: string }).text, /nodes remove <app> <url>/);
  for (const spec of COMMANDS) {
    const p = parseCli([...spec.name.split(' '), '--help'], {});
    assert.equal(p.kind, 'help', spec.name);
    assert.equal((p as { text: string }).text, commandHelp(spec));
    assert.match(commandHelp(spec), new RegExp(`usage: \\S+ ${spec.name}`));
  }
  // Help wins over missing arguments.
  assert.equal(parseCli(['nodes', 'add', '--help'], {}).kind, 'help');
  assert.match(commandHelp(COMMANDS.find((c) => c.name === 'nodes add')!), /--capacity N \[options\]/);
});

test('dev assertion: audience from the flag or the first of AUDIENCES, data dir from flag, DATA_DIR or the default', () => {
  assert.deepEqual(command(['dev', 'assertion', 'a@b.c', '--audience', 'http://login', '--generation', '4', '--data-dir', '/d']), {
    kind: 'dev assertion',
    email: 'a@b.c',
    audience: 'http://login',
    generation: 4,
    ttlSeconds: undefined,
    dataDir: '/d',
    generationClaim: 'fxa-generation',
  });
  const fromEnv = command(['dev', 'assertion', 'a@b.c', '--ttl', '60'], { AUDIENCES: 'http://one, http://two', DATA_DIR: '/var/x', GENERATION_CLAIM: 'gen' });
  assert.deepEqual(fromEnv, {
    kind: 'dev assertion',
    email: 'a@b.c',
    audience: 'http://one',
    generation: undefined,
    ttlSeconds: 60,
    dataDir: '/var/x',
    generationClaim: 'gen',
  });
  assert.equal((command(['dev', 'assertion', 'a@b.c', '--audience', 'x']) as { dataDir: string }).dataDir, './data');
  usageError(['dev', 'assertion', 'a@b.c'], /--audience \(or AUDIENCES\) is required/);
  usageError(['dev', 'assertion', 'a@b.c', '--audience', 'x', '--generation', 'two'], /--generation: must be a whole number/);
});

test('dev init: issuers file defaults to the data dir', () => {
  assert.deepEqual(command(['dev', 'init', '--data-dir', '/idp/']), { kind: 'dev init', dataDir: '/idp/', trustedIssuersFile: '/idp/trusted-issuers.json' });
  assert.deepEqual(command(['dev', 'init', '--trusted-issuers', '/etc/ti.json'], { DATA_DIR: '/d' }), {
    kind: 'dev init',
    dataDir: '/d',
    trustedIssuersFile: '/etc/ti.json',
  });
});

test('setup: one node per configured application at NODE_URL or --node-url', () => {
  assert.deepEqual(command(['setup'], { APPLICATIONS: 'sync/1.5,notes/1.0,sync/1.6', NODE_URL: 'http://localhost:8080/' }), {
    kind: 'setup',
    apps: ['sync', 'notes'],
    url: 'http://localhost:8080',
    capacity: 1000,
    devIdpDir: '',
  });
  assert.deepEqual(command(['setup', '--node-url', 'http://gw', '--capacity', '5', '--dev-idp', '/idp']), {
    kind: 'setup',
    apps: ['sync'],
    url: 'http://gw',
    capacity: 5,
    devIdpDir: '/idp',
  });
  usageError(['setup'], /--node-url \(or NODE_URL\) is required/);
  usageError(['setup', '--node-url', 'http://gw'], /APPLICATIONS: expected name\/version/, { APPLICATIONS: 'sync' });
});

test('health: a host:port or an http(s) URL', () => {
  assert.deepEqual(command(['health', '127.0.0.1:50051']), { kind: 'health', target: '127.0.0.1:50051', service: '' });
  assert.deepEqual(command(['health', 'localhost:1', '--service', 'x.Y']), { kind: 'health', target: 'localhost:1', service: 'x.Y' });
  assert.deepEqual(command(['health', 'http://127.0.0.1:8000/__lbheartbeat__']), {
    kind: 'health',
    target: 'http://127.0.0.1:8000/__lbheartbeat__',
    service: '',
  });
  usageError(['health', 'localhost'], /<target>: must be host:port/);
  usageError(['health', 'http://x/?q'], /<target>: must not carry a query/);
});

test('wholeNumber: absent, present, out of range, not a number', () => {
  assert.equal(wholeNumber('--n', undefined), undefined);
  assert.equal(wholeNumber('--n', '12'), 12);
  assert.throws(() => wholeNumber('--n', ''), /--n: expected a whole number/);
  assert.throws(() => wholeNumber('--n', true), /--n: expected a whole number/);
  assert.throws(() => wholeNumber('--n', '0', 1), /--n: must be between 1/);
});

test('transportReason keeps the useful part of grpc-js transport errors', () => {
  assert.equal(
    transportReason('backend unavailable: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:9. Resolution note: '),
    'connect ECONNREFUSED 127.0.0.1:9',
  );
  assert.equal(
    transportReason('backend unavailable: round_robin: No connection established. Last error: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1. Resolution note: '),
    'connect ECONNREFUSED 127.0.0.1:1',
    'round robin nests the picker error',
  );
  assert.equal(transportReason('backend unavailable: Deadline exceeded after 2.001s'), 'Deadline exceeded after 2.001s');
  assert.equal(transportReason('Name resolution failed for target dns:x.invalid:1'), 'Name resolution failed for target dns:x.invalid:1');
});

// ---- found missing by mutation testing (npm run mutation -- cli/args.ts) ----

test('every command resolves the addresses of the backends it calls, and needs INTERNAL_SECRET only then', () => {
  const master = { MASTER_SECRETS: 'm'.repeat(64), DATA_DIR: '/nonexistent/tokenserver-data' };
  const cases: Array<[string[], string[]]> = [
    [['nodes', 'add', 'sync', 'http://n', '--capacity', '1'], ['nodeassign']],
    [['nodes', 'list'], ['directory', 'nodeassign']],
    [['nodes', 'update', 'sync', 'http://n', '--capacity', '1'], ['nodeassign']],
    [['nodes', 'down', 'sync', 'http://n'], ['nodeassign']],
    [['nodes', 'up', 'sync', 'http://n'], ['nodeassign']],
    [['nodes', 'backoff', 'sync', 'http://n'], ['nodeassign']],
    [['nodes', 'remove', 'sync', 'http://n'], ['directory', 'nodeassign']],
    [['nodes', 'reconcile'], ['directory', 'nodeassign']],
    [['nodes', 'secret', 'sync', 'http://n'], []],
    [['users', 'show', 'sync', 'a@b.c'], ['directory']],
    [['users', 'retire', 'sync', 'a@b.c'], ['directory', 'nodeassign']],
    [['users', 'list', 'sync'], ['directory']],
    [['users', 'purge', '--dry-run'], ['directory', 'nodeassign']],
    [['backup', '/tmp/b.db'], []],
    [['import', '--from', 'postgres://u@db/ts'], ['directory', 'nodeassign']],
    [['setup', '--node-url', 'http://gw'], ['nodeassign']],
    [['dev', 'assertion', 'a@b.c', '--audience', 'x'], []],
    [['dev', 'init'], []],
    [['health', '127.0.0.1:1'], []],
  ];
  const named = (argv: string[]) => COMMANDS.map((c) => c.name).find((name) => `${argv.join(' ')} `.startsWith(`${name} `));
  assert.deepEqual(cases.map(([argv]) => named(argv)).sort(), COMMANDS.map((c) => c.name).sort(), 'every command once');
  for (const [argv, backends] of cases) {
    const p = run(argv, master);
    assert.deepEqual(Object.keys(p.globals.addrs).sort(), backends, argv.join(' '));
    assert.equal(p.globals.auth.internalSecret, backends.length > 0 ? INTERNAL_SECRET : undefined, argv.join(' '));
    assert.equal(p.globals.json, false);
  }
  usageError(['users', 'show', 'sync', 'a@b.c', '--directory', 'nope'], /^users show: --directory: must be host:port/);
});

test('nodes reconcile, users retire and users list parse to their requests, with their defaults', () => {
  assert.deepEqual(command(['nodes', 'reconcile']), { kind: 'nodes reconcile', app: '', dryRun: false });
  assert.deepEqual(command(['nodes', 'reconcile', 'notes', '--dry-run']), { kind: 'nodes reconcile', app: 'notes', dryRun: true });
  usageError(['nodes', 'reconcile', 'no tes'], /^nodes reconcile: <app>: expected an application name/);
  assert.deepEqual(command(['nodes', 'down', 'sync', 'http://n']), { kind: 'nodes update', app: 'sync', url: 'http://n', patch: { downed: true } });
  usageError(['nodes', 'down', 'sync'], /^nodes down: missing <url>$/);
  usageError(['nodes', 'update', 'sync', 'http://n'], /^nodes update: --capacity is required$/);
  usageError(['nodes', 'update', 'sync', 'http://n', '--capacity', 'x'], /^nodes update: --capacity: must be a whole number/);
  assert.deepEqual(command(['users', 'retire', 'sync', 'alice@example.com']), { kind: 'users retire', app: 'sync', email: 'alice@example.com' });
  usageError(['users', 'retire', 'sync'], /^users retire: missing <email>$/);
  usageError(['users', 'retire', 'sync', 'alice'], /^users retire: <email>: expected an email address, got "alice"$/);
  assert.deepEqual(command(['users', 'list', 'sync']), { kind: 'users list', app: 'sync', node: undefined, replaced: false, limit: 100, after: '' });
  usageError(['users', 'list', 'sync', '--node', 'ftp://n'], /^users list: --node: must be an http or https URL/);
});

test('users purge: all applications by default, its lease, the e-mail domain from OAUTH_EMAIL_DOMAIN; no arguments; --max names itself', () => {
  const p = command(['users', 'purge', '--dry-run'], { OAUTH_EMAIL_DOMAIN: 'accounts.example.org' });
  assert.ok(p.kind === 'users purge');
  assert.equal(p.app, '');
  assert.equal(p.leaseMs, 10 * 60 * 1000);
  assert.equal(p.oauthEmailDomain, 'accounts.example.org');
  assert.equal(p.dryRun, true);
  assert.equal(p.skipNodeDelete, false);
  usageError(['users', 'purge', 'sync', '--dry-run'], /^users purge: unexpected argument "sync"$/);
  usageError(['users', 'purge', '--dry-run', '--max', '0'], /^users purge: --max: must be between 1/);
});

test('import: the source URL, its password from the environment by kind, the service and application, the flags', () => {
  const env = { PGPASSWORD: 'pg-pw', MYSQL_PWD: 'my-pw' };
  assert.deepEqual(command(['import', '--from', 'postgres://u@db/ts'], env), {
    kind: 'import',
    from: 'postgres://u@db/ts',
    password: 'pg-pw',
    service: 'sync-1.5',
    app: 'sync',
    dryRun: false,
    emailDomain: 'api.accounts.firefox.com',
    anyEmailDomain: false,
  });
  assert.deepEqual(
    command(['import', '--from', 'mysql://u@db/ts', '--service', 'notes-2.0', '--dry-run', '--any-email-domain'], { ...env, OAUTH_EMAIL_DOMAIN: 'accounts.example.org' }),
    { kind: 'import', from: 'mysql://u@db/ts', password: 'my-pw', service: 'notes-2.0', app: 'notes', dryRun: true, emailDomain: 'accounts.example.org', anyEmailDomain: true },
  );
  const own = command(['import', '--from', 'postgres://u@db/ts', '--service', '', '--app', 'mine'], { PGPASSWORD: '' });
  assert.ok(own.kind === 'import');
  assert.deepEqual([own.service, own.app, own.password], ['sync-1.5', 'mine', undefined], 'an empty --service is the default one; an empty password none');
  usageError(['import'], /^import: --from is required$/);
  usageError(['import', '--from', 'http://db/ts'], /^import: --from: expected a mysql:\/\/ or postgres:\/\/ URL$/);
  usageError(['import', '--from', 'postgres://u@db/ts', '--app', 'no app'], /^import: <app>: expected an application name/);
});

test('argument checks: e-mail addresses, durations and whole numbers at their edges', () => {
  assert.equal(emailArg('alice@example.com'), 'alice@example.com');
  for (const bad of ['a@b@c', '@a@b', 'a b@c', 'a@']) assert.throws(() => emailArg(bad), (e: unknown) => e instanceof UsageError && /<email>/.test(e.message), bad);
  assert.equal(durationArg('--g', '30'), 30_000, 'a bare number is seconds');
  assert.equal(durationArg('--g', ' 2m '), 120_000);
  assert.equal(durationArg('--g', '1d'), 86_400_000);
  for (const bad of ['x5s', '5sx', '', true] as const) assert.throws(() => durationArg('--g', bad), (e: unknown) => e instanceof UsageError && /^--g: expected a duration/.test(e.message), String(bad));
  assert.throws(() => wholeNumber('--n', '  '), (e: unknown) => e instanceof UsageError && e.message === '--n: expected a whole number');
  assert.throws(() => wholeNumber('--n', '1.5'), UsageError, 'a setting error of lib/config.ts comes out as a UsageError');
  const e = new UsageError('bad');
  assert.deepEqual([e.name, e.message, e.usage], ['UsageError', 'bad', '']);
});

test('dev assertion, dev init and setup: empty flags fall back; a blank NODE_URL is none; their numbers name themselves', () => {
  const a = command(['dev', 'assertion', 'a@b.c', '--audience', '', '--data-dir', ''], { AUDIENCES: 'http://one', DATA_DIR: '/from-env' });
  assert.ok(a.kind === 'dev assertion');
  assert.deepEqual([a.audience, a.dataDir], ['http://one', '/from-env']);
  usageError(['dev', 'assertion', 'a@b.c', '--audience', 'x', '--ttl', '0'], /^dev assertion: --ttl: must be between 1 and 86400/);
  assert.deepEqual(command(['dev', 'init', '--trusted-issuers', ''], { DATA_DIR: '/d' }), { kind: 'dev init', dataDir: '/d', trustedIssuersFile: '/d/trusted-issuers.json' });
  usageError(['setup'], /^setup: --node-url \(or NODE_URL\) is required$/, { INTERNAL_SECRET, NODE_URL: '   ' });
  usageError(['setup', '--node-url', 'ftp://gw'], /^setup: --node-url: must be an http or https URL/);
  usageError(['setup', '--node-url', 'http://gw', '--capacity', 'lots'], /^setup: --capacity: must be a whole number/);
  usageError(['health', 'proxy:80/http://x'], /^health: <target>: must be host:port/);
  usageError(['health', ''], /^health: <target>: /);
});

test('next to npm start: the internal and master secrets it generated in DATA_DIR; a broken secrets file is no usage error', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'cli-args-dev-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const dev = loadOrCreateDevSecrets(dir);
  const p = parseCli(['users', 'purge'], { DATA_DIR: dir });
  assert.ok(p.kind === 'run' && p.command.kind === 'users purge');
  assert.equal(p.globals.auth.internalSecret, dev.internalSecret);
  assert.deepEqual(p.command.masterSecrets, dev.masterSecrets);
  writeFileSync(path.join(dir, 'secrets.json'), '{ not json');
  assert.throws(() => parseCli(['users', 'purge'], { DATA_DIR: dir, INTERNAL_SECRET }), (e: unknown) => e instanceof Error && !(e instanceof UsageError) && /not valid JSON/.test(e.message));
});

test('help: the texts line by line, and the usage printed with each refusal', () => {
  const add = COMMANDS.find((c) => c.name === 'nodes add')!;
  const global = [
    '  --json                     print machine-readable JSON on stdout',
    `  --directory HOST:PORT      directory address (default: DIRECTORY_ADDR or 127.0.0.1:50051)`,
    `  --nodeassign HOST:PORT     nodeassign address (default: NODEASSIGN_ADDR or 127.0.0.1:50052)`,
    '  --timeout MS               deadline of each call in milliseconds (default 2000)',
    '  -h, --help                 show help',
  ];
  assert.equal(
    commandHelp(add),
    [
      'usage: tokenserver-cli nodes add <app> <url> --capacity N [options]',
      '',
      'register an application node.',
      '',
      'options:',
      '  --capacity N               how many users the node may hold',
      '  --exist-ok                 succeed (and show the node) when it is registered already',
      '',
      'global options:',
      ...global,
      '',
    ].join('\n'),
  );
  const list = COMMANDS.find((c) => c.name === 'users show')!;
  assert.equal(commandHelp(list), ['usage: tokenserver-cli users show <app> <email> [options]', '', "show a user's record.", '', 'global options:', ...global, ''].join('\n'));
  const users = COMMANDS.filter((c) => c.name.startsWith('users '));
  assert.equal(
    groupHelp('users'),
    [
      'usage: tokenserver-cli users <command> [options]',
      '',
      'commands:',
      ...users.map((c) => `  ${`${c.name} ${c.args.join(' ')}`.trim().padEnd(30)} ${c.summary}`),
      '',
      '"tokenserver-cli users <command> --help" for details.',
      '',
    ].join('\n'),
  );
  assert.equal((parseCli(['users', '--help'], {}) as { text: string }).text, groupHelp('users'));
  const top = topHelp().split('\n');
  assert.deepEqual(top.slice(0, 5), ['usage: tokenserver-cli <command> [options]      (npm run cli -- <command>)', '', 'Operator tool for the token server: nodes, users, development helpers, health probes.', '', 'commands:']);
  assert.equal(top.length, 5 + COMMANDS.length + 2 + global.length + 4);
  assert.deepEqual(top.slice(-4), ['', 'Exit status: 0 success, 1 failure (service error or unreachable), 2 bad arguments.', '"tokenserver-cli <command> --help" for details.', '']);
  assert.deepEqual(top.slice(5 + COMMANDS.length, 7 + COMMANDS.length + global.length), ['', 'global options:', ...global]);
  // With each refusal, the usage that helps: the command's, the group's, or the top one.
  const missing = refusal(['nodes', 'add', 'sync', 'http://n']);
  assert.equal(missing.message, 'nodes add: --capacity is required');
  assert.equal(missing.usage, 'usage: tokenserver-cli nodes add <app> <url> --capacity N [options]\n"tokenserver-cli nodes add --help" for details.\n');
  const config = refusal(['nodes', 'secret', 'sync', 'https://n.example'], { MASTER_SECRETS: 'm'.repeat(64), TOKEN_SECRETS: 'Master' });
  assert.match(config.message, /^nodes secret: TOKEN_SECRETS: /);
  assert.equal(config.usage, 'usage: tokenserver-cli nodes secret <app> <url> [options]\n"tokenserver-cli nodes secret --help" for details.\n');
  assert.equal(refusal(['users', 'explode']).usage, groupHelp('users'));
  assert.equal(refusal(['explode']).usage, topHelp());
});

test('help: every command has a summary and every option a description (and a placeholder when it takes a value), shown in its help', () => {
  for (const spec of COMMANDS) {
    assert.ok(spec.summary.length > 0, spec.name);
    const help = commandHelp(spec);
    assert.ok(help.includes(`\n${spec.summary}.\n`), spec.name);
    for (const [name, o] of Object.entries(spec.options)) {
      assert.ok(o.description.length > 0, `${spec.name} --${name}`);
      if (o.type === 'string') assert.ok(o.value !== undefined && o.value.length > 0, `${spec.name} --${name}`);
      assert.ok(help.includes(`  --${name}${o.type === 'string' ? ` ${o.value}` : ''}`) && help.includes(` ${o.description}\n`), `${spec.name} --${name}`);
    }
  }
  const usage = (name: string) => commandHelp(COMMANDS.find((c) => c.name === name)!).split('\n')[0];
  assert.equal(usage('import'), 'usage: tokenserver-cli import --from URL [options]');
  assert.equal(usage('setup'), 'usage: tokenserver-cli setup [options]');
  assert.equal(usage('users purge'), 'usage: tokenserver-cli users purge [options]');
  assert.match(commandHelp(COMMANDS.find((c) => c.name === 'users purge')!), /keep records replaced more recently than this \(default 7d\)/);
  assert.equal(parseCli(['users', '--help'], {}).kind, 'help');
});

test('commands without positional arguments take none; an empty address or target is named as given', () => {
  usageError(['import', 'x', '--from', 'postgres://u@db/ts'], /^import: unexpected argument "x"$/);
  usageError(['setup', 'x', '--node-url', 'http://gw'], /^setup: unexpected argument "x"$/);
  usageError(['dev', 'init', 'x'], /^dev init: unexpected argument "x"$/);
  usageError(['health', ''], /^health: <target>: must be host:port, .*, got ""$/);
  usageError(['users', 'show', 'sync', 'a@b.c', '--directory', ''], /^users show: --directory: must be host:port, .*, got ""$/);
});
