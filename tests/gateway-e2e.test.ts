// End to end: an assertion from a development IdP (lib/idp.ts) → the real
// login service (directory and nodeassign over gRPC, SQLite in a temp folder)
// → a tokenlib token → Hawk-signed requests through the node-gateway to the
// demo application, which reports who the gateway said the caller was.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gatewayConfig, loginConfig } from '../lib/config.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { call, grpcClient } from '../lib/grpc.js';
import { newSecret, TEST_AUTH } from './support/services.js';
import { hawkHeader } from '../lib/hawk.js';
import { loadOrCreateDevIdp, type DevIdp } from '../lib/idp.js';
import { startDemoApp, type DemoApp } from '../services/demo-app/server.js';
import { startDirectory } from '../services/directory/server.js';
import { startGateway, type Gateway } from '../services/node-gateway/server.js';
import { startLogin } from '../services/login/server.js';
import { startNodeAssign } from '../services/nodeassign/server.js';

const Hawk = createRequire(import.meta.url)('hawk') as {
  client: { header(uri: string, method: string, options: Record<string, unknown>): { header: string } };
};

// The node's public URL, as behind a TLS terminator: clients sign for it, the
// gateway checks MACs against it, whatever socket the request arrives on.
const NODE_URL = 'https://node-e2e.example';
const OLD_SECRET = newSecret();
const NEW_SECRET = newSecret();

const closers: Array<() => Promise<void>> = [];
let dir: string;
let idp: DevIdp;
let loginUrl: string;
let audience: string;
let gateway: Gateway;
/** Login and a gateway with TOKEN_SECRETS=master (the same directory, nodeassign and node). */
let masterLoginUrl: string;
let masterGateway: Gateway;
let demo: DemoApp;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'gateway-e2e-'));
  const storeUrl = `sqlite:${path.join(dir, 'store.db')}`;
  const directory = await startDirectory({ storeUrl, auth: TEST_AUTH });
  closers.push(directory.close);
  const nodeAssign = await startNodeAssign({ storeUrl, auth: TEST_AUTH });
  closers.push(nodeAssign.close);
  const client = grpcClient(NodeAssignClient, `127.0.0.1:${nodeAssign.port}`, TEST_AUTH);
  await call(client, client.addNode, { service: 'sync', url: NODE_URL, capacity: 100 }, { deadlineMs: 5000, retryAfter: 1 });
  client.close();

  idp = await loadOrCreateDevIdp(dir);
  audience = 'https://login-e2e.example';
  const env = {
    MASTER_SECRETS: OLD_SECRET,
    INTERNAL_SECRET: TEST_AUTH.internalSecret,
    APPLICATIONS: 'sync/1.5',
    AUDIENCES: audience,
    DIRECTORY_ADDR: `127.0.0.1:${directory.port}`,
    NODEASSIGN_ADDR: `127.0.0.1:${nodeAssign.port}`,
    LOGIN_PORT: '0',
  };
  const login = await startLogin(loginConfig(env, { trustedIssuers: idp.trustedIssuers }));
  closers.push(login.close);
  loginUrl = login.url;
  const masterLogin = await startLogin(loginConfig({ ...env, TOKEN_SECRETS: 'master' }, { trustedIssuers: idp.trustedIssuers }));
  closers.push(masterLogin.close);
  masterLoginUrl = masterLogin.url;

  demo = await startDemoApp();
  closers.push(demo.close);
  // The gateway was given a newer secret since login minted its tokens: rotation.
  gateway = await startGateway(
    gatewayConfig({ NODE_URL, UPSTREAM_URL: demo.url, MASTER_SECRETS: `${NEW_SECRET},${OLD_SECRET}`, GATEWAY_PORT: '0' }),
  );
  closers.push(gateway.close);
  masterGateway = await startGateway(
    gatewayConfig({ NODE_URL, UPSTREAM_URL: demo.url, MASTER_SECRETS: `${NEW_SECRET},${OLD_SECRET}`, GATEWAY_PORT: '0', TOKEN_SECRETS: 'master' }),
  );
  closers.push(masterGateway.close);
});

after(async () => {
  for (const close of closers.reverse()) await close().catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

interface Token {
  id: string;
  key: string;
  uid: number;
  api_endpoint: string;
  duration: number;
  hashalg: string;
}

async function tokenFor(email: string, login = loginUrl): Promise<Token> {
  const res = await fetch(`${login}/1.0/sync/1.5`, {
    headers: { Authorization: `Assertion ${await idp.makeAssertion(email, { audience })}` },
  });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as Token;
}

/** Sends to the gateway's socket a request signed for the public URL. */
async function throughGateway(url: string, init: { method?: string; authorization: string; body?: string; contentType?: string }, via = gateway) {
  const u = new URL(url);
  const res = await fetch(`${via.url}${u.pathname}${u.search}`, {
    method: init.method ?? 'GET',
    headers: { Authorization: init.authorization, ...(init.contentType ? { 'Content-Type': init.contentType } : {}) },
    body: init.body,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

test('a token from login opens the application, as its uid', async () => {
  const token = await tokenFor('alice@example.com');
  assert.equal(token.api_endpoint, `${NODE_URL}/1.5/${token.uid}`);
  assert.equal(token.hashalg, 'sha256');

  // Our client (the SDK's signer).
  const url = `${token.api_endpoint}/info/collections?full=1`;
  const get = await throughGateway(url, { authorization: hawkHeader({ id: token.id, key: token.key, method: 'GET', url }) });
  assert.equal(get.status, 200, JSON.stringify(get.body));
  assert.equal(get.body.uid, String(token.uid));
  assert.equal(get.body.node, NODE_URL);
  assert.equal(get.body.path, `/1.5/${token.uid}/info/collections`);
  assert.deepEqual(get.body.query, { full: '1' });

  // The reference client, with a signed body.
  const storage = `${token.api_endpoint}/storage/bookmarks`;
  const body = JSON.stringify([{ id: 'b1', payload: 'x' }]);
  const { header } = Hawk.client.header(storage, 'POST', {
    credentials: { id: token.id, key: token.key, algorithm: 'sha256' },
    payload: body,
    contentType: 'application/json',
  });
  const post = await throughGateway(storage, { method: 'POST', authorization: header, body, contentType: 'application/json' });
  assert.equal(post.status, 200, JSON.stringify(post.body));
  assert.equal(post.body.uid, String(token.uid));
  assert.equal(post.body.bodyBytes, Buffer.byteLength(body));
});

test("one user's token does not open another user's data, nor twice the same request", async () => {
  const bob = await tokenFor('bob@example.com');
  const carol = await tokenFor('carol@example.com');
  assert.notEqual(bob.uid, carol.uid);
  const carolsData = `${carol.api_endpoint}/storage/tabs`;
  const foreign = await throughGateway(carolsData, { authorization: hawkHeader({ id: bob.id, key: bob.key, method: 'GET', url: carolsData }) });
  assert.equal(foreign.status, 401);
  assert.equal(foreign.body.status, 'invalid-credentials');

  const own = `${bob.api_endpoint}/storage/tabs`;
  const authorization = hawkHeader({ id: bob.id, key: bob.key, method: 'GET', url: own });
  assert.equal((await throughGateway(own, { authorization })).status, 200);
  const replay = await throughGateway(own, { authorization });
  assert.equal(replay.status, 401);
  assert.equal(replay.body.status, 'invalid-credentials');
});

test('TOKEN_SECRETS=master: login and the gateway both sign and check with the master secrets; neither mode opens the other', async () => {
  const derived = await tokenFor('dan@example.com');
  const master = await tokenFor('dan@example.com', masterLoginUrl);
  assert.equal(master.uid, derived.uid, 'one user, whatever signs the token');
  const get = (token: Token, via: Gateway) => {
    const url = `${token.api_endpoint}/info/collections`;
    return throughGateway(url, { authorization: hawkHeader({ id: token.id, key: token.key, method: 'GET', url }) }, via);
  };
  const opened = await get(master, masterGateway);
  assert.equal(opened.status, 200, JSON.stringify(opened.body));
  assert.equal(opened.body.uid, String(master.uid));
  for (const [token, via] of [[master, gateway], [derived, masterGateway]] as const) {
    const refused = await get(token, via);
    assert.equal(refused.status, 401);
    assert.equal(refused.body.status, 'invalid-credentials');
  }
});
