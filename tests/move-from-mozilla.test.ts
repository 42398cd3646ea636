// The README's move from Mozilla's combined server, rehearsed on the real
// thing. Mozilla's syncserver (tokenserver on PostgreSQL, storage on MariaDB)
// sits behind a site proxy, one public URL, and fills its own tables with real
// traffic: Firefox-shaped Bearer logins, client-state changes, Hawk writes.
// Then the README's steps: our `npm start` with Mozilla's secret, e-mail
// domain and metrics secret set before it starts; syncserver restarted
// storage-only on the same database and secret; `cli import` from PostgreSQL
// (password in PGPASSWORD); the proxy's /1.0/ routed to our login. The token
// server URL clients hold (the proxy's) never changes. Then every account must
// find its uid, node and data, and loads and purge must hold on the real node.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseToken } from '../lib/token.js';
import { httpRequest, type HttpResponse } from '../services/login/testkit.js';
import { cliProcess, startNpmStart, type NpmStart } from './support/npm-start.js';
import { accessToken, keyIdHeader, OLDSYNC_SCOPE, signingKey, type SigningKey } from './support/oauth.js';
import { startOAuthProvider, type OAuthProvider } from './support/oauth-provider.js';
import { nodeRequest, startMozillaDatabases, startSiteProxy, startSyncServer, syncserverBinary, type MozillaDatabases, type NodeToken, type SiteProxy, type SyncServer, userIds } from './support/syncserver.js';

const ACCOUNTS = 32;
const CHANGERS = 12;
/** The site's own Mozilla accounts: its users' e-mails in Mozilla's table are `<sub>@` this. */
const FXA_EMAIL_DOMAIN = 'api.accounts.sync.example';
const NODE_TYPE = 'mysql';
const T0 = 1_700_000_000_000;

const binary = syncserverBinary();
const bin = 'bin' in binary ? binary.bin : '';
let skip: string | undefined = 'skip' in binary ? binary.skip : undefined;

interface Account {
  sub: string;
  kca: number;
  state: string;
  /** The last answer Mozilla's tokenserver gave (its token stays valid across the switch). */
  token: NodeToken & { uid: number; hashed_fxa_uid: string; node_type: string };
  /** Its uid before a client-state change, if it changed. */
  replacedUid?: number;
  replacedToken?: NodeToken;
  record: { id: string; payload: string };
}

let databases: MozillaDatabases | undefined;
let proxy: SiteProxy | undefined;
let mozilla: SyncServer | undefined;
let ours: NpmStart | undefined;
/** The site's Mozilla accounts (discovery and its keys): Mozilla's server holds its key, ours finds it by OAUTH_ISSUER. */
let provider: OAuthProvider | undefined;
let key: SigningKey;
let dir = '';
const masterSecret = randomBytes(32).toString('hex');
const metricsHashSecret = randomBytes(24).toString('hex');
const accounts: Account[] = [];
/** Every uid replaced after the switch too: what purge must delete. */
const replacedUids = new Set<number>();
const tokenServerUrl = () => `${proxy!.url}/1.0/sync/1.5`;
const clientState = () => randomBytes(16).toString('hex');

/** Firefox's token request: an access token for exactly the oldsync scope (what Firefox asks Mozilla accounts for; Mozilla's verifier splits scope on commas), X-KeyID, no X-Client-State. */
async function firefoxLogin(sub: string, kca: number, state: string, generation = kca): Promise<HttpResponse> {
  const now = Math.floor(Date.now() / 1000);
  const token = await accessToken(
    key,
    sub,
    { iss: provider!.issuer, aud: 'https://token.services.mozilla.com', client_id: '5882386c6d801776', jti: randomBytes(16).toString('hex'), scope: OLDSYNC_SCOPE, iat: now, exp: now + 3600, 'fxa-generation': generation, 'fxa-profileChangedAt': generation },
    { typ: 'at+JWT' },
  );
  return httpRequest(tokenServerUrl(), { headers: { Authorization: `Bearer ${token}`, 'X-KeyID': keyIdHeader(kca, state) } });
}

/** Our side's settings, set before login starts (the README's list), shared by `npm start` and the CLI. */
function ourEnv(): Record<string, string> {
  return {
    DATA_DIR: dir,
    APPLICATIONS: 'sync/1.5',
    TOKEN_SECRETS: 'master',
    MASTER_SECRETS: masterSecret,
    OAUTH_ISSUER: provider!.issuer,
    OAUTH_EMAIL_DOMAIN: FXA_EMAIL_DOMAIN,
    METRICS_HASH_SECRET: metricsHashSecret,
    NODE_TYPE,
  };
}

async function cli(argv: string[], env: Record<string, string> = {}) {
  const run = await cliProcess(argv, { ...ourEnv(), DIRECTORY_ADDR: ours!.directoryAddr, NODEASSIGN_ADDR: ours!.nodeAssignAddr, ...env });
  return { ...run, text: `${argv.join(' ')} → ${run.code}\n${run.stdout}\n${run.stderr}` };
}

/** The node's load and live users, as `nodes list` reports them. */
async function nodeLoad(): Promise<{ load: number; live: number }> {
  const list = await cli(['nodes', 'list', 'sync', '--json']);
  assert.equal(list.code, 0, list.text);
  const nodes = (JSON.parse(list.stdout) as { nodes: Array<{ url: string; currentLoad: number; liveUsers: number }> }).nodes;
  assert.deepEqual(nodes.map((n) => n.url), [proxy!.url], list.text);
  return { load: nodes[0].currentLoad, live: nodes[0].liveUsers };
}

/** `nodes reconcile --dry-run`: every node's load is what the records call for. */
async function noDrift(): Promise<void> {
  const reconcile = await cli(['nodes', 'reconcile', 'sync', '--dry-run', '--json']);
  assert.equal(reconcile.code, 0, reconcile.text);
  const rows = (JSON.parse(reconcile.stdout) as { nodes: Array<{ url: string; load: number; expected: number; outcome: string }> }).nodes;
  assert.deepEqual(rows.map((r) => [r.url, r.load - r.expected, r.outcome]), [[proxy!.url, 0, 'ok']], reconcile.text);
}

before(async () => {
  if (skip) return;
  const dbs = await startMozillaDatabases();
  if ('skip' in dbs) {
    skip = dbs.skip;
    return;
  }
  databases = dbs;
  dir = mkdtempSync(path.join(tmpdir(), 'move-from-mozilla-'));
  key = await signingKey('RS256', 'accounts-key-1');
  provider = await startOAuthProvider({ keys: [key] });
  // The site's one public URL: Mozilla's combined server answers all of it, /1.0/ and /1.5/ alike.
  proxy = await startSiteProxy(() => mozilla!.url);
  mozilla = await startSyncServer({
    bin,
    masterSecret,
    storageDbUrl: dbs.storageDb.url,
    tokenserver: { databaseUrl: dbs.tokenDb.url, nodeUrl: proxy.url, nodeType: NODE_TYPE, fxaEmailDomain: FXA_EMAIL_DOMAIN, fxaMetricsHashSecret: metricsHashSecret, jwk: key.publicJwk },
  });
});

after(async () => {
  await ours?.stop();
  await mozilla?.stop();
  await proxy?.close();
  await provider?.close();
  await databases?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("Mozilla's combined server: 32 Firefox accounts log in, 12 change client state, each writes data", async (t) => {
  if (skip) return t.skip(skip);
  for (let i = 0; i < ACCOUNTS; i++) {
    const sub = randomBytes(16).toString('hex');
    let kca = T0 + i * 1000;
    let state = clientState();
    let res = await firefoxLogin(sub, kca, state);
    assert.equal(res.status, 200, `${res.text}\n${mozilla!.log()}`);
    const account: Account = { sub, kca, state, token: res.json, record: { id: `r${i}`, payload: randomBytes(24).toString('base64') } };
    if (i < CHANGERS) {
      // Data under the uid about to be replaced: purge must delete it later.
      const put = await nodeRequest(account.token, 'PUT', `storage/passwords/${account.record.id}`, { payload: `old-${account.record.payload}` });
      assert.equal(put.status, 200, put.text);
      // A password reset: new keys, a newer keys_changed_at, a new client state: Mozilla gives a new uid.
      account.replacedUid = account.token.uid;
      account.replacedToken = account.token;
      kca += 500_000_000;
      state = clientState();
      res = await firefoxLogin(sub, kca, state);
      assert.equal(res.status, 200, res.text);
      assert.notEqual(res.json.uid, account.replacedUid);
      Object.assign(account, { kca, state, token: res.json });
      replacedUids.add(account.replacedUid);
    }
    const write = await nodeRequest(account.token, 'PUT', `storage/passwords/${account.record.id}`, { payload: account.record.payload });
    assert.equal(write.status, 200, write.text);
    accounts.push(account);
  }
  const rows = await databases!.tokenDb.query('SELECT count(*) AS n, count(replaced_at) AS replaced FROM users');
  assert.deepEqual(rows.map((r) => [Number(r.n), Number(r.replaced)]), [[ACCOUNTS + CHANGERS, CHANGERS]]);
});

/** Mozilla's tokenserver database as the README's import names it: the password goes in PGPASSWORD. */
function importSource(): { from: string; env: Record<string, string> } {
  const source = new URL(databases!.tokenDb.url);
  const password = decodeURIComponent(source.password);
  source.password = '';
  return { from: source.href, env: { PGPASSWORD: password } };
}

let importOutput = '';

test("the README's move, steps 1 and 2: our login started with Mozilla's settings, Mozilla's syncserver restarted storage-only on the same database, secret and URL", async (t) => {
  if (skip) return t.skip(skip);
  assert.equal(accounts.length, ACCOUNTS, 'the traffic before the move ran');
  // 1. Ours, with every setting set before it starts; nobody reaches it yet. `npm start` registers
  //    its demo node (the gateway): drop it.
  ours = await startNpmStart(ourEnv());
  const removed = await cli(['nodes', 'remove', 'sync', ours.gatewayUrl]);
  assert.equal(removed.code, 0, removed.text);

  // 2. Mozilla's tokenserver off: syncserver again, storage-only, same storage database, same secret, same URL.
  await mozilla!.stop();
  mozilla = await startSyncServer({ ...mozilla!.settings, tokenserver: undefined });
  const pending = await httpRequest(tokenServerUrl());
  assert.equal(pending.status, 404, 'until the proxy routes /1.0/ to our login, no token server answers there');
});

test("import refuses, naming both domains, when our OAUTH_EMAIL_DOMAIN is not Mozilla's fxa_email_domain", async (t) => {
  if (skip) return t.skip(skip);
  assert.ok(ours, 'steps 1 and 2 ran');
  const { from, env } = importSource();
  // Left at its default, every account would start over at its next login with a new uid and empty storage.
  const mismatched = await cli(['import', '--from', from, '--dry-run'], { ...env, OAUTH_EMAIL_DOMAIN: 'api.accounts.firefox.com' });
  assert.notEqual(mismatched.code, 0, mismatched.text);
  assert.match(mismatched.stderr, /api\.accounts\.sync\.example/, mismatched.text);
  assert.match(mismatched.stderr, /api\.accounts\.firefox\.com/, mismatched.text);
});

test("the README's move, steps 3 and 4: import (dry run, run, run again), then /1.0/ routed to our login at the proxy", async (t) => {
  if (skip) return t.skip(skip);
  assert.ok(ours, 'steps 1 and 2 ran');
  // 3. Import (the password in PGPASSWORD, not on the command line, where `ps` would show it).
  const { from, env } = importSource();
  const dry = await cli(['import', '--from', from, '--dry-run'], env);
  assert.equal(dry.code, 0, dry.text);
  const imported = await cli(['import', '--from', from], env);
  assert.equal(imported.code, 0, imported.text);
  importOutput = imported.text;
  assert.match(imported.stdout, new RegExp(`\\b${ACCOUNTS}\\b`), imported.text);
  const again = await cli(['import', '--from', from], env);
  assert.equal(again.code, 0, again.text);

  // 4. The proxy sends /1.0/ to our login; everything else stays with the node. The URL is the same.
  proxy!.route = (p) => (p.startsWith('/1.0/') ? ours!.loginUrl : mozilla!.url);
});

test("import prints what to set on login before it starts: the accounts' e-mail domain, and where Mozilla keeps the metrics secret and node type", async (t) => {
  if (skip) return t.skip(skip);
  const settings = importOutput.slice(importOutput.indexOf('set on login before it starts:'));
  assert.match(settings, new RegExp(`OAUTH_EMAIL_DOMAIN: ${FXA_EMAIL_DOMAIN.replaceAll('.', '\\.')}\n`), importOutput);
  assert.match(settings, /METRICS_HASH_SECRET: .*fxa_metrics_hash_secret/, importOutput);
  assert.match(settings, /NODE_TYPE: .*node_type/, importOutput);
});

test('every account: the same uid and api_endpoint at the same URL, the same hashed_fxa_uid and token ids (fxa_uid, fxa_kid, hashed ids), its data back; tokens issued before the switch still work', async (t) => {
  if (skip) return t.skip(skip);
  assert.ok(ours, 'the move ran');
  for (const a of accounts) {
    const before = await nodeRequest(a.token, 'GET', `storage/passwords/${a.record.id}`);
    assert.equal(before.status, 200, `Mozilla's token for ${a.sub} on the storage-only node: ${before.text}`);
    const res = await firefoxLogin(a.sub, a.kca, a.state);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.uid, a.token.uid, a.sub);
    assert.equal(res.json.api_endpoint, a.token.api_endpoint);
    assert.equal(res.json.hashed_fxa_uid, a.token.hashed_fxa_uid);
    assert.equal(res.json.node_type, a.token.node_type, 'node_type as Mozilla sent it (NODE_TYPE)');
    // A storage node that keys users by fxa_uid and fxa_kid (Mozilla's Spanner ones) sees the same user.
    const mozillas = userIds(parseToken(a.token.id, [masterSecret]).payload);
    assert.deepEqual(userIds(parseToken(res.json.id, [masterSecret]).payload), mozillas, a.sub);
    assert.match(String(mozillas.fxa_kid), /^\d{13}-[A-Za-z0-9_-]+$/);
    const got = await nodeRequest(res.json, 'GET', `storage/passwords/${a.record.id}`);
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.payload, a.record.payload);
  }
});

test('after the switch: a client-state change gets a new uid, an older keys_changed_at gets 401, a new user gets the node', async (t) => {
  if (skip) return t.skip(skip);
  const a = accounts[ACCOUNTS - 1];
  // The generation stays; only keys_changed_at goes back.
  const older = await firefoxLogin(a.sub, a.kca - 1, a.state, a.kca);
  assert.equal(older.status, 401, older.text);
  assert.equal(older.json.status, 'invalid-keysChangedAt');

  const state = clientState();
  const changed = await firefoxLogin(a.sub, a.kca + 1000, state);
  assert.equal(changed.status, 200, changed.text);
  assert.notEqual(changed.json.uid, a.token.uid);
  assert.equal(changed.json.api_endpoint, `${proxy!.url}/1.5/${changed.json.uid}`);
  assert.ok(changed.json.uid > Math.max(...accounts.map((x) => x.token.uid)), "a new uid above every one Mozilla gave");
  const put = await nodeRequest(changed.json, 'PUT', `storage/passwords/${a.record.id}`, { payload: 'new' });
  assert.equal(put.status, 200, put.text);
  replacedUids.add(a.token.uid);
  a.replacedUid = a.token.uid;
  a.replacedToken = a.token;
  Object.assign(a, { kca: a.kca + 1000, state, token: changed.json, record: { ...a.record, payload: 'new' } });

  const fresh = await firefoxLogin(randomBytes(16).toString('hex'), T0, clientState());
  assert.equal(fresh.status, 200, fresh.text);
  assert.equal(fresh.json.api_endpoint, `${proxy!.url}/1.5/${fresh.json.uid}`, 'a new user lands on the node');
  assert.ok(!accounts.some((x) => x.token.uid === fresh.json.uid || x.replacedUid === fresh.json.uid), 'a uid nobody held');
});

test("loads hold: reconcile finds no drift; the node's load is its live users plus the replaced records that still hold a slot", async (t) => {
  if (skip) return t.skip(skip);
  // Mozilla and our login alike count one slot per account on its node: a uid replaced by a client-state
  // change on the same node (all 13 here, 12 there and 1 here) holds none. So the load is the live users.
  assert.deepEqual(await nodeLoad(), { load: ACCOUNTS + 1, live: ACCOUNTS + 1 });
  await noDrift();
});

test("users purge deletes exactly the replaced uids' data on the real node; live data stays", async (t) => {
  if (skip) return t.skip(skip);
  const dry = await cli(['users', 'purge', '--grace', '0', '--dry-run', '--json']);
  assert.equal(dry.code, 0, dry.text);
  const listed = (JSON.parse(dry.stdout) as { wouldPurge: Array<{ uid: number; node: string }> }).wouldPurge;
  assert.deepEqual(listed.map((c) => c.uid).sort((x, y) => x - y), [...replacedUids].sort((x, y) => x - y), dry.text);
  assert.ok(listed.every((c) => c.node === proxy!.url), dry.text);
  const purge = await cli(['users', 'purge', '--grace', '0']);
  assert.equal(purge.code, 0, purge.text);
  for (const a of accounts) {
    const live = await nodeRequest(a.token, 'GET', `storage/passwords/${a.record.id}`);
    assert.equal(live.status, 200, `${a.sub}'s live data: ${live.text}`);
    assert.equal(live.json.payload, a.record.payload);
    if (a.replacedToken) {
      const gone = await nodeRequest(a.replacedToken, 'GET', `storage/passwords/${a.record.id}`);
      assert.equal(gone.status, 404, `replaced uid ${a.replacedUid}: ${gone.text}`);
    }
  }
  assert.deepEqual(await nodeLoad(), { load: ACCOUNTS + 1, live: ACCOUNTS + 1 });
  await noDrift();
});
