// The operator CLI as a real child process against real directory, nodeassign
// and login servers (SQLite in a temp folder, loopback ports picked by the OS).
//
// Most runs use cli/main.ts bundled once by the esbuild that tsx itself uses
// (the same transform, without paying tsx's start-up on each of ~40 runs); the
// --help test runs it exactly as documented, through tsx.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loginConfig } from '../lib/config.js';
import { startDirectory } from '../services/directory/server.js';
import { startNodeAssign } from '../services/nodeassign/server.js';
import { startLogin } from '../services/login/server.js';
import { newSecret, TEST_AUTH } from './support/services.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { call, grpcClient } from '../lib/grpc.js';
import { parseToken } from '../lib/token.js';
import { InvalidCredentials } from '../lib/errors.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAIN = path.join(ROOT, 'cli/main.ts');
/** Guards against a hanging CLI; an answer within it is not a timing claim. */
const HANG_MS = 20_000;
/** Login's MASTER_SECRETS. */
const MASTER_SECRET = newSecret();

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  json: any;
}

let dir: string;
let bundle: string;
let env: Record<string, string>;
let loginUrl: string;
let directoryPort: number;
let audience: string;
const closers: Array<() => Promise<void>> = [];

/** cli/main.ts as one ES module next to a node_modules link, built with tsx's own esbuild. */
async function bundleCli(outDir: string): Promise<string> {
  const tsxRequire = createRequire(createRequire(import.meta.url).resolve('tsx/package.json'));
  const esbuild = tsxRequire('esbuild') as typeof import('esbuild');
  const outfile = path.join(outDir, 'cli', 'main.mjs');
  await esbuild.build({ entryPoints: [MAIN], outfile, bundle: true, platform: 'node', format: 'esm', target: 'node20', packages: 'external', logLevel: 'silent' });
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(outDir, 'node_modules'));
  return outfile;
}

/** Runs the CLI as its own process (never spawnSync: the servers share this event loop). */
function cli(args: string[], extraEnv: Record<string, string> = {}, opts: { viaTsx?: boolean } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const entry = opts.viaTsx ? ['--import', 'tsx', MAIN] : [bundle];
    const child = spawn(process.execPath, [...entry, ...args], {
      cwd: ROOT,
      env: { ...process.env, LOG_LEVEL: 'silent', ...env, ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), HANG_MS);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (signal) return reject(new Error(`cli ${args.join(' ')} hung and was killed\n${stdout}${stderr}`));
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

async function ok(args: string[], extraEnv: Record<string, string> = {}, opts: { viaTsx?: boolean } = {}): Promise<Run> {
  const r = await cli(args, extraEnv, opts);
  assert.equal(r.code, 0, `${args.join(' ')} → ${r.code}\n${r.stdout}${r.stderr}`);
  return r;
}

async function fails(args: string[], code: number, message: RegExp, extraEnv: Record<string, string> = {}): Promise<Run> {
  const r = await cli(args, extraEnv);
  assert.equal(r.code, code, `${args.join(' ')} → ${r.code}\n${r.stdout}${r.stderr}`);
  assert.match(r.stderr, message);
  assert.doesNotMatch(r.stderr, /^\s+at /m, 'no stack trace');
  return r;
}

/** A loopback port with nothing listening. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function login(email: string): Promise<{ status: number; body: any }> {
  const assertion = (await ok(['dev', 'assertion', email, '--audience', audience, '--data-dir', dir])).stdout.trim();
  const res = await fetch(`${loginUrl}/1.0/sync/1.5`, { headers: { Authorization: `Assertion ${assertion}` } });
  return { status: res.status, body: await res.json() };
}

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'cli-test-'));
  mkdirSync(path.join(dir, 'build'));
  bundle = await bundleCli(path.join(dir, 'build'));
  const storeUrl = `sqlite:${path.join(dir, 'tokenserver.db')}`;
  const directory = await startDirectory({ storeUrl, auth: TEST_AUTH });
  closers.push(directory.close);
  const nodeAssign = await startNodeAssign({ storeUrl, auth: TEST_AUTH });
  closers.push(nodeAssign.close);
  directoryPort = directory.port;
  env = { DIRECTORY_ADDR: `127.0.0.1:${directory.port}`, NODEASSIGN_ADDR: `127.0.0.1:${nodeAssign.port}`, INTERNAL_SECRET: TEST_AUTH.internalSecret };
  audience = 'http://login.test';
  // The development issuer login trusts comes from the CLI itself, as in the compose stack.
  await ok(['dev', 'init', '--data-dir', dir]);
  const running = await startLogin(
    loginConfig({
      ...env,
      LOGIN_PORT: '0',
      MASTER_SECRETS: MASTER_SECRET,
      AUDIENCES: audience,
      TRUSTED_ISSUERS: path.join(dir, 'trusted-issuers.json'),
      APPLICATIONS: 'sync/1.5',
    }),
  );
  closers.push(running.close);
  loginUrl = running.url;
});

after(async () => {
  for (const close of closers.reverse()) await close();
  rmSync(dir, { recursive: true, force: true });
});

test('--help at the top, for a group and for each subcommand (through tsx, as documented)', async () => {
  const viaTsx = { viaTsx: true };
  const [top, group, add, show] = await Promise.all([
    ok(['--help'], {}, viaTsx),
    ok(['nodes', '--help'], {}, viaTsx),
    ok(['nodes', 'add', '--help'], {}, viaTsx),
    ok(['users', 'show', '-h'], {}, viaTsx),
  ]);
  assert.match(top.stdout, /nodes remove <app> <url>/);
  assert.match(top.stdout, /users show <app> <email>/);
  assert.match(group.stdout, /nodes backoff <app> <url>/);
  assert.match(add.stdout, /usage: \S+ nodes add <app> <url> --capacity N/);
  assert.match(show.stdout, /usage: \S+ users show <app> <email>/);
});

test('bad arguments: exit 2 and a message naming what is wrong', async () => {
  await Promise.all([
    fails([], 2, /error: missing command/),
    fails(['nodes', 'add', 'sync'], 2, /nodes add: missing <url>/),
    fails(['nodes', 'add', 'sync', 'http://n.example', '--capacity', 'lots'], 2, /--capacity: must be a whole number, got "lots"/),
    fails(['nodes', 'list', '--frobnicate'], 2, /Unknown option '--frobnicate'/),
    fails(['users', 'show', 'sync', 'not-an-email'], 2, /<email>: expected an email address/),
    fails(['nodes', 'list'], 2, /NODEASSIGN_ADDR: must be host:port/, { NODEASSIGN_ADDR: 'nowhere' }),
  ]);
});

test('an unreachable service: exit 1 with "cannot reach", no hang, no stack trace', async () => {
  const port = await closedPort();
  // A server that accepts connections and never speaks HTTP/2: only the deadline ends the call.
  const silent = net.createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const silentPort = (silent.address() as net.AddressInfo).port;
  try {
    await Promise.all([
      fails(['nodes', 'list', '--nodeassign', `127.0.0.1:${port}`], 1, new RegExp(`cannot reach nodeassign at 127\\.0\\.0\\.1:${port} \\(connect ECONNREFUSED`)),
      fails(['users', 'show', 'sync', 'a@example.com'], 1, new RegExp(`cannot reach directory at 127\\.0\\.0\\.1:${port}`), { DIRECTORY_ADDR: `127.0.0.1:${port}` }),
      fails(['nodes', 'list', '--nodeassign', `127.0.0.1:${silentPort}`, '--timeout', '500'], 1, new RegExp(`cannot reach nodeassign at 127\\.0\\.0\\.1:${silentPort}`)),
      fails(['health', `127.0.0.1:${port}`], 1, new RegExp(`cannot reach 127\\.0\\.0\\.1:${port}`)),
    ]);
  } finally {
    silent.close();
  }
});

test('nodes: add, list, update, down, up, backoff, remove with --json', async () => {
  const url = 'https://node-x.example';
  const added = await ok(['nodes', 'add', 'notes', url, '--capacity', '10', '--json']);
  assert.deepEqual(added.json.created, true);
  assert.deepEqual(
    { service: added.json.node.service, url: added.json.node.url, capacity: added.json.node.capacity, load: added.json.node.currentLoad },
    { service: 'notes', url, capacity: 10, load: 0 },
  );
  await fails(['nodes', 'add', 'notes', url, '--capacity', '10'], 1, /exists already/);
  const again = await ok(['nodes', 'add', 'notes', url, '--capacity', '99', '--exist-ok', '--json']);
  assert.equal(again.json.created, false);
  assert.equal(again.json.node.capacity, 10, '--exist-ok leaves the node as it was');

  const listed = await ok(['nodes', 'list', 'notes', '--json']);
  assert.deepEqual(
    listed.json.nodes.map((n: any) => n.url),
    [url],
  );

  assert.equal((await ok(['nodes', 'update', 'notes', url, '--capacity', '20', '--json'])).json.node.capacity, 20);
  assert.equal((await ok(['nodes', 'down', 'notes', url, '--json'])).json.node.downed, true);
  const text = await ok(['nodes', 'list', 'notes']);
  assert.match(text.stdout, /^APP\s+URL\s+CAPACITY\s+LOAD\s+AVAILABLE\s+USERS\s+STATE$/m);
  assert.match(text.stdout, /^notes\s+https:\/\/node-x\.example\s+20\s+0\s+\d+\s+0\s+down$/m);
  assert.equal((await ok(['nodes', 'up', 'notes', url, '--json'])).json.node.downed, false);
  assert.equal((await ok(['nodes', 'backoff', 'notes', url, '--json'])).json.node.backoff, true);
  assert.equal((await ok(['nodes', 'backoff', 'notes', url, '--off', '--json'])).json.node.backoff, false);
  await fails(['nodes', 'down', 'notes', 'https://nowhere.example'], 1, /no node https:\/\/nowhere\.example for notes/);

  const removed = await ok(['nodes', 'remove', 'notes', url, '--json']);
  assert.equal(removed.json.removed.url, url);
  assert.equal(removed.json.unassigned, 0);
  assert.deepEqual((await ok(['nodes', 'list', 'notes', '--json'])).json.nodes, []);
  await fails(['nodes', 'remove', 'notes', url], 1, /no node https:\/\/node-x\.example for notes/);
});

test('nodes add refuses a URL that parsers read differently, naming the form it must take; nothing is registered', async () => {
  const cases: Array<[string, string]> = [
    ['https://sync.exa\tmple', 'https://sync.example'],
    ['https://sync.example\\@evil.example', 'https://sync.example/@evil.example'],
    ['https://sync.example/%2e%2e', 'https://sync.example'],
    ['https://0x7f.1', 'https://127.0.0.1'],
    ['HTTPS://sync.example', 'https://sync.example'],
    ['https://\u0441ync.example', 'https://xn--ync-3ed.example'],
  ];
  for (const [url, form] of cases) {
    const escaped = form.replace(/[.\/]/g, (c) => `\\${c}`);
    await fails(['nodes', 'add', 'urls', url, '--capacity', '10'], 1, new RegExp(`url must be written as ${escaped}, the form every parser reads alike`));
  }
  assert.deepEqual((await ok(['nodes', 'list', 'urls', '--json'])).json.nodes, []);
  assert.equal((await ok(['nodes', 'add', 'urls', 'https://127.0.0.1', '--capacity', '10', '--json'])).json.node.url, 'https://127.0.0.1', 'the named form is taken');
});

test('users show: the record, and a clear error for an unknown user', async () => {
  await ok(['nodes', 'add', 'sync', 'https://show-node.example', '--capacity', '100']);
  const first = await login('bob@example.com');
  assert.equal(first.status, 200, JSON.stringify(first.body));
  const shown = await ok(['users', 'show', 'sync', 'bob@example.com', '--json']);
  assert.equal(shown.json.user.uid, first.body.uid);
  assert.equal(shown.json.user.node, 'https://show-node.example');
  assert.equal(shown.json.user.email, 'bob@example.com');
  assert.deepEqual(shown.json.user.seenClientStates, []);
  assert.deepEqual(shown.json.user.replaced, []);
  const text = await ok(['users', 'show', 'sync', 'bob@example.com']);
  assert.match(text.stdout, new RegExp(`^uid:\\s+${first.body.uid}$`, 'm'));
  assert.match(text.stdout, /^node:\s+https:\/\/show-node\.example$/m);
  await fails(['users', 'show', 'sync', 'nobody@example.com'], 1, /no user nobody@example\.com in sync/);
  await ok(['nodes', 'remove', 'sync', 'https://show-node.example']);
});

test('nodes remove moves its users to another node at their next login', async () => {
  const a = 'https://node-a.example';
  const b = 'https://node-b.example';
  await ok(['nodes', 'add', 'sync', a, '--capacity', '100']);
  const first = await login('alice@example.com');
  assert.equal(first.status, 200, JSON.stringify(first.body));
  assert.ok(first.body.api_endpoint.startsWith(`${a}/1.5/`), first.body.api_endpoint);
  assert.equal((await ok(['users', 'show', 'sync', 'alice@example.com', '--json'])).json.user.node, a);

  await ok(['nodes', 'add', 'sync', b, '--capacity', '100']);
  const removed = await ok(['nodes', 'remove', 'sync', a]);
  assert.match(removed.stdout, /^removed sync https:\/\/node-a\.example; 1 user unassigned/);
  assert.equal((await ok(['users', 'show', 'sync', 'alice@example.com', '--json'])).json.user.node, '');

  const second = await login('alice@example.com');
  assert.equal(second.status, 200, JSON.stringify(second.body));
  assert.equal(second.body.uid, first.body.uid, 'same user, new node');
  assert.ok(second.body.api_endpoint.startsWith(`${b}/1.5/`), second.body.api_endpoint);
  assert.equal((await ok(['users', 'show', 'sync', 'alice@example.com', '--json'])).json.user.node, b);
  await ok(['nodes', 'remove', 'sync', b]);
});

test('nodes reconcile: a dry run reports a load pushed off by slots nobody holds; the real run sets it to the live users', async () => {
  const url = 'https://node-reconcile.example';
  await ok(['nodes', 'add', 'sync', url, '--capacity', '100']);
  for (const email of ['rec1@example.com', 'rec2@example.com']) assert.equal((await login(email)).status, 200);
  // Allocations nobody assigns: the slots a login that gave up at its deadline leaves behind.
  const client = grpcClient(NodeAssignClient, env.NODEASSIGN_ADDR!, TEST_AUTH);
  try {
    for (let i = 0; i < 3; i++) await call(client, client.allocate, { service: 'sync' }, { deadlineMs: 5000, retryAfter: 1 });
  } finally {
    client.close();
  }
  const loadOf = async () => (await ok(['nodes', 'list', 'sync', '--json'])).json.nodes.find((n: any) => n.url === url);
  assert.equal((await loadOf()).currentLoad, 5);

  const dry = await ok(['nodes', 'reconcile', 'sync', '--dry-run', '--json']);
  assert.deepEqual(dry.json.nodes.find((n: any) => n.url === url), { service: 'sync', url, load: 5, expected: 2, outcome: 'found' });
  assert.equal((await loadOf()).currentLoad, 5, 'a dry run changes nothing');
  assert.match((await ok(['nodes', 'reconcile', 'sync', '--dry-run'])).stdout, /node-reconcile\.example\s+5\s+2\s+\+3\s+would correct \(dry run\)/);

  const real = await ok(['nodes', 'reconcile', 'sync', '--json']);
  assert.deepEqual(real.json.nodes.find((n: any) => n.url === url), { service: 'sync', url, load: 5, expected: 2, outcome: 'corrected' });
  const node = await loadOf();
  assert.equal(node.currentLoad, 2);
  assert.equal(node.liveUsers, 2);
  const again = await ok(['nodes', 'reconcile', 'sync', '--json']);
  assert.equal(again.json.nodes.find((n: any) => n.url === url).outcome, 'ok');
  await ok(['nodes', 'remove', 'sync', url]);
});

test("nodes secret: login's signing secret for that exact node URL first, then older ones; TOKEN_SECRETS=master prints the master secrets", async () => {
  const node = 'https://secret-node.example:8443';
  await ok(['nodes', 'add', 'sync', node, '--capacity', '100']);
  const token = await login('dora@example.com');
  assert.equal(token.status, 200, JSON.stringify(token.body));
  const older = newSecret();
  const masters = { MASTER_SECRETS: `${MASTER_SECRET},${older}` };

  const text = await ok(['nodes', 'secret', 'sync', node], masters);
  const secrets = text.stdout.split('\n').slice(0, -1);
  assert.equal(secrets.length, 2);
  for (const s of secrets) assert.match(s, /^[0-9a-f]{64}$/);
  assert.equal(parseToken(token.body.id, secrets.slice(0, 1)).payload.uid, token.body.uid, "the first verifies login's token");
  assert.throws(() => parseToken(token.body.id, secrets.slice(1)), InvalidCredentials, 'the older one does not');
  const json = await ok(['nodes', 'secret', 'sync', node, '--json'], masters);
  assert.deepEqual(json.json, { app: 'sync', url: node, tokenSecrets: 'derived', secrets });

  // Another spelling of the URL is another node to the secret: nothing is normalised.
  const slash = await ok(['nodes', 'secret', 'sync', `${node}/`], masters);
  assert.notEqual(slash.stdout.split('\n')[0], secrets[0]);

  const master = await ok(['nodes', 'secret', 'sync', node, '--json'], { ...masters, TOKEN_SECRETS: 'master' });
  assert.deepEqual(master.json.secrets, [MASTER_SECRET, older]);
  assert.equal(master.json.tokenSecrets, 'master');

  await Promise.all([
    fails(['nodes', 'secret', 'sync', node], 2, /TOKEN_SECRETS: must be derived or master, got "node"/, { ...masters, TOKEN_SECRETS: 'node' }),
    fails(['nodes', 'secret', 'sync', node], 2, /MASTER_SECRETS: is required/, { DATA_DIR: path.join(dir, 'nowhere') }),
    fails(['nodes', 'secret', 'sync', 'node.example'], 2, /<url>: must be an absolute URL/, masters),
  ]);
  await ok(['nodes', 'remove', 'sync', node]);
});

test('setup registers a node only for applications without one, and writes the development IdP', async () => {
  await ok(['nodes', 'add', 'sync', 'https://kept.example', '--capacity', '3']);
  const idpDir = path.join(dir, 'idp');
  const setupEnv = { APPLICATIONS: 'sync/1.5,calendar/2.0', NODE_URL: 'http://gateway.test:8080' };
  const first = await ok(['setup', '--capacity', '5', '--dev-idp', idpDir, '--json'], setupEnv);
  const summary = (r: Run) => r.json.nodes.map((n: any) => [n.node.service, n.node.url, n.created]);
  assert.deepEqual(summary(first), [
    ['sync', 'https://kept.example', false],
    ['calendar', 'http://gateway.test:8080', true],
  ]);
  assert.equal(first.json.devIdp.trustedIssuersFile, path.join(idpDir, 'trusted-issuers.json'));
  const issuers = JSON.parse(readFileSync(path.join(idpDir, 'trusted-issuers.json'), 'utf8'));
  assert.deepEqual(Object.keys(issuers), [first.json.devIdp.issuer]);
  assert.equal(issuers[first.json.devIdp.issuer].keys[0].kty, 'EC');

  const second = await ok(['setup', '--capacity', '5', '--json'], setupEnv);
  assert.deepEqual(summary(second), [
    ['sync', 'https://kept.example', false],
    ['calendar', 'http://gateway.test:8080', false],
  ]);
  await fails(['setup'], 2, /--node-url \(or NODE_URL\) is required/, { NODE_URL: '' });
});

test('health: gRPC and HTTP probes', async () => {
  const [grpcOk, httpOk, httpBad] = await Promise.all([
    ok(['health', `127.0.0.1:${directoryPort}`]),
    ok(['health', `${loginUrl}/__lbheartbeat__`, '--json']),
    cli(['health', `${loginUrl}/no-such-path`]),
  ]);
  assert.equal(grpcOk.stdout, 'SERVING\n');
  assert.deepEqual(httpOk.json, { target: `${loginUrl}/__lbheartbeat__`, healthy: true, status: 200 });
  assert.equal(httpBad.code, 1);
  assert.match(httpBad.stderr, /unhealthy \(HTTP 404\)/);
  await fails(['health', `127.0.0.1:${directoryPort}`, '--service', 'no.such.Service'], 1, /no service "no\.such\.Service"/);
});
