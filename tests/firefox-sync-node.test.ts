// The Firefox flow, whole, against Mozilla's real storage node: `npm start`
// as a real process with Bearer, its keys found by discovery at a stand-in
// Mozilla accounts (OAUTH_ISSUER alone), Mozilla's
// syncserver storage-only on MariaDB given the secret `cli nodes secret`
// prints, the node registered with the CLI, a login with Firefox-shaped
// tokens, and Hawk PUT/GET/DELETE on the node, which checks our tokens itself.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { runCli } from '../cli/run.js';
import { readDevMasterSecrets } from '../lib/dev-secrets.js';
import { deriveNodeSecret, makeToken, parseToken } from '../lib/token.js';
import { httpRequest } from '../services/login/testkit.js';
import { startNpmStart, type NpmStart } from './support/npm-start.js';
import { accessToken, keyIdHeader, OLDSYNC_SCOPE, signingKey, type SigningKey } from './support/oauth.js';
import { startOAuthProvider, type OAuthProvider } from './support/oauth-provider.js';
import { freePort } from './support/services.js';
import { startMariadb, type SqlServer } from './support/sql-servers.js';
import { nodeRequest, startSyncServer, syncserverBinary, type NodeToken, type SyncServer } from './support/syncserver.js';

const binary = syncserverBinary();
const bin = 'bin' in binary ? binary.bin : '';

let skip: string | undefined = 'skip' in binary ? binary.skip : undefined;
let db: SqlServer | undefined;
let site: NpmStart | undefined;
let node: SyncServer | undefined;
let accounts: OAuthProvider | undefined;
let key: SigningKey;
let dir = '';
let nodeUrl = '';
let siteEnv: Record<string, string> = {};

/** The operator CLI in this process, next to `npm start` (it reads DATA_DIR's secrets, as a user's would). */
async function cli(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const env = { DATA_DIR: dir, DIRECTORY_ADDR: site!.directoryAddr, NODEASSIGN_ADDR: site!.nodeAssignAddr, APPLICATIONS: 'sync/1.5' };
  const code = await runCli(argv, env, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
  return { code, stdout, stderr };
}

/** A token request as Firefox makes it (DESIGN §13.2): an at+JWT access token, X-KeyID, no X-Client-State. */
async function firefoxLogin(sub: string, o: { kca?: number; state?: string; generation?: number } = {}) {
  const now = Math.floor(Date.now() / 1000);
  const generation = o.generation ?? 1_700_000_000_000;
  const token = await accessToken(
    key,
    sub,
    {
      iss: accounts!.issuer,
      aud: 'https://token.services.mozilla.com',
      client_id: '5882386c6d801776',
      jti: randomUUID(),
      scope: `profile ${OLDSYNC_SCOPE}`,
      iat: now,
      exp: now + 3600,
      'fxa-generation': generation,
      'fxa-profileChangedAt': generation,
    },
    { typ: 'at+JWT' },
  );
  return httpRequest(`${site!.loginUrl}/1.0/sync/1.5`, {
    headers: { Authorization: `Bearer ${token}`, 'X-KeyID': keyIdHeader(o.kca ?? generation, o.state ?? 'a1b2c3d4e5f60718293a4b5c6d7e8f90') },
  });
}

before(async () => {
  if (skip) return;
  const started = await startMariadb();
  if ('skip' in started) {
    skip = started.skip;
    return;
  }
  db = started.server;
  dir = mkdtempSync(path.join(tmpdir(), 'firefox-sync-'));
  key = await signingKey('RS256', `kid-${randomBytes(4).toString('hex')}`);
  // As Mozilla accounts publishes its keys: an extra member login ignores.
  key.publicJwk = { ...key.publicJwk, alg: 'RS256', ...{ 'fxa-createdAt': 1564502400 } };
  accounts = await startOAuthProvider({ keys: [key] });
  siteEnv = { DATA_DIR: dir, OAUTH_ISSUER: accounts.issuer, METRICS_HASH_SECRET: randomBytes(32).toString('hex') };
  site = await startNpmStart(siteEnv);
  // The URL clients reach the node at, known before it starts: what its token's node and the Hawk MAC name.
  nodeUrl = `http://127.0.0.1:${await freePort()}`;
  const added = await cli('nodes', 'add', 'sync', nodeUrl, '--capacity', '100');
  assert.equal(added.code, 0, added.stderr);
  const secret = await cli('nodes', 'secret', 'sync', nodeUrl);
  assert.equal(secret.code, 0, secret.stderr);
  node = await startSyncServer({ bin, masterSecret: secret.stdout.split('\n')[0], storageDbUrl: db.url, port: Number(new URL(nodeUrl).port) });
  // npm start registered its gateway (the demo node); Firefox users belong on the storage node only.
  const removed = await cli('nodes', 'remove', 'sync', site.gatewayUrl);
  assert.equal(removed.code, 0, removed.stderr);
});

after(async () => {
  await node?.stop();
  await site?.stop();
  await accounts?.close();
  await db?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("Firefox's flow on Mozilla's storage node: Bearer login, then Hawk PUT, GET, info/collections and DELETE on the node", async (t) => {
  if (skip) return t.skip(skip);
  const login = await firefoxLogin('0f1e2d3c4b5a69788796a5b4c3d2e1f0');
  assert.equal(login.status, 200, login.text);
  const token = login.json as NodeToken & { uid: number; hashed_fxa_uid: string };
  assert.equal(token.api_endpoint, `${nodeUrl}/1.5/${token.uid}`, 'the user is on the storage node');

  const record = { id: 'bm-1', payload: JSON.stringify({ ciphertext: randomBytes(24).toString('base64'), IV: 'iv', hmac: 'h' }) };
  const put = await nodeRequest(token, 'PUT', 'storage/bookmarks/bm-1', { payload: record.payload });
  assert.equal(put.status, 200, `${put.text}\n${node!.log()}`);
  const got = await nodeRequest(token, 'GET', 'storage/bookmarks/bm-1');
  assert.equal(got.status, 200, got.text);
  assert.deepEqual({ id: got.json.id, payload: got.json.payload }, record);
  const info = await nodeRequest(token, 'GET', 'info/collections');
  assert.equal(info.status, 200, info.text);
  assert.deepEqual(Object.keys(info.json), ['bookmarks']);

  // The next login (a new access token) finds the same uid and the same data.
  const again = await firefoxLogin('0f1e2d3c4b5a69788796a5b4c3d2e1f0');
  assert.equal(again.status, 200, again.text);
  assert.equal(again.json.uid, token.uid);
  assert.equal((await nodeRequest(again.json, 'GET', 'storage/bookmarks/bm-1')).json?.payload, record.payload);

  const deleted = await nodeRequest(token, 'DELETE', 'storage/bookmarks/bm-1');
  assert.equal(deleted.status, 200, deleted.text);
  assert.equal((await nodeRequest(token, 'GET', 'storage/bookmarks/bm-1')).status, 404);
});

test('the real node refuses a token for another node, a tampered token, a wrong key and another uid', async (t) => {
  if (skip) return t.skip(skip);
  const login = await firefoxLogin('1234567890abcdef1234567890abcdef');
  assert.equal(login.status, 200, login.text);
  const token = login.json as NodeToken & { uid: number };
  assert.equal((await nodeRequest(token, 'GET', 'info/collections')).status, 200, 'the untouched token works');

  // What our login hands a user of the gateway node: the same payload, signed with that node's secret.
  const master = readDevMasterSecrets(dir)![0];
  const { payload } = parseToken(token.id, [deriveNodeSecret(master, nodeUrl)]);
  const elsewhere = makeToken({ ...payload, node: site!.gatewayUrl }, deriveNodeSecret(master, site!.gatewayUrl));
  assert.equal((await nodeRequest({ ...token, ...elsewhere }, 'GET', 'info/collections')).status, 401, "another node's token");

  // One bit of the payload changed (the uid's digit), signature kept.
  const raw = Buffer.from(token.id, 'base64url');
  const at = raw.indexOf(Buffer.from(`"uid":${token.uid}`)) + 6;
  raw[at] ^= 1;
  assert.equal((await nodeRequest(token, 'GET', 'info/collections', undefined, { id: raw.toString('base64url') })).status, 401, 'a tampered token');
  assert.equal((await nodeRequest(token, 'GET', 'info/collections', undefined, { key: randomBytes(32).toString('base64url') })).status, 401, 'a MAC with another key');
  const otherUid = { ...token, api_endpoint: token.api_endpoint.replace(/\/\d+$/, `/${token.uid + 1000}`) };
  const other = await nodeRequest(otherUid, 'GET', 'info/collections');
  // syncstorage-rs answers 400 when the path's uid is not the token's.
  assert.ok([400, 401, 403].includes(other.status), `another uid's storage: ${other.status} ${other.text}`);
});

test('npm start again on the same DATA_DIR: no demo node comes back, and the user is still on the storage node with the same uid and data', async (t) => {
  if (skip) return t.skip(skip);
  const sub = 'abcdefabcdefabcdefabcdefabcdef01';
  const first = await firefoxLogin(sub);
  assert.equal(first.status, 200, first.text);
  assert.equal((await nodeRequest(first.json, 'PUT', 'storage/tabs/t1', { payload: 'tabs' })).status, 200);

  await site!.stop();
  site = await startNpmStart(siteEnv);
  const nodes = await cli('nodes', 'list', 'sync', '--json');
  assert.equal(nodes.code, 0, nodes.stderr);
  assert.deepEqual((JSON.parse(nodes.stdout) as { nodes: Array<{ url: string }> }).nodes.map((n) => n.url), [nodeUrl]);
  const again = await firefoxLogin(sub);
  assert.equal(again.status, 200, again.text);
  assert.deepEqual([again.json.uid, again.json.api_endpoint], [first.json.uid, first.json.api_endpoint]);
  assert.equal((await nodeRequest(again.json, 'GET', 'storage/tabs/t1')).json?.payload, 'tabs');
});
