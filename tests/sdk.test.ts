// The SDK against the real system: the embedded stack (directory, nodeassign,
// login, node-gateway, demo app) on loopback ephemeral ports with SQLite in a
// temp folder. Requests are counted by wrapping the real fetch.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loginConfig, type Env, type LoginConfig } from '../lib/config.js';
import { bundle, generateKey, signAssertion, signCertificate, type KeyPair } from '../lib/idp.js';
import { startLogin } from '../services/login/server.js';
import { startStack, type Stack } from '../scripts/stack.js';
import { TEST_AUTH } from './support/services.js';
import {
  BackoffError,
  hawkFetch,
  InvalidClientStateError,
  InvalidCredentialsError,
  InvalidGenerationError,
  InvalidTimestampError,
  LoginError,
  NewUsersDisabledError,
  ServiceUnavailableError,
  TokenClient,
  type AssertionProvider,
  type TokenClientOptions,
} from '../sdk/index.js';

const ISSUER = 'sdk-test.localhost';
const MINUTE = 60_000;

let dir: string;
let env: Env;
let stack: Stack;
let issuerKey: KeyPair;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'sdk-test-'));
  issuerKey = await generateKey('ES256');
  const trusted = path.join(dir, 'trusted-issuers.json');
  writeFileSync(trusted, JSON.stringify({ [ISSUER]: { keys: [issuerKey.publicJwk], domains: ['example.com'] } }));
  env = {
    DATA_DIR: dir,
    APPLICATIONS: 'sync/1.5',
    MASTER_SECRETS: randomBytes(32).toString('hex'),
    INTERNAL_SECRET: TEST_AUTH.internalSecret,
    TRUSTED_ISSUERS: trusted,
    LOGIN_PORT: '0',
    GATEWAY_PORT: '0',
    DIRECTORY_PORT: '0',
    NODEASSIGN_PORT: '0',
    DEMO_APP_PORT: '0',
  };
  stack = await startStack(env);
});

after(async () => {
  await stack?.close();
  rmSync(dir, { recursive: true, force: true });
});

const uniqueEmail = () => `u-${randomBytes(6).toString('hex')}@example.com`;

/**
 * Assertions from our test issuer. By default dated by the SDK's corrected
 * clock (`now`); `dateBy: 'real'` uses the machine's clock instead.
 */
function assertions(email: string, opts: { generation?: number; dateBy?: 'sdk' | 'real'; expiredBy?: number } = {}): AssertionProvider {
  let user: Promise<KeyPair> | undefined;
  return async (audience, { now }) => {
    user ??= generateKey('ES256');
    const key = await user;
    const t = opts.dateBy === 'real' ? Date.now() : now;
    const cert = await signCertificate(issuerKey, { issuer: ISSUER, email, publicKey: key.publicJwk, generation: opts.generation, iatMs: t, ttlSeconds: 600 });
    const expMs = opts.expiredBy === undefined ? t + 2 * MINUTE : t - opts.expiredBy;
    return bundle(cert, await signAssertion(key, { audience, expMs }));
  };
}

/** The real fetch, counting requests to the login service and to the gateway. */
function counted() {
  const urls: string[] = [];
  const f: typeof fetch = (input, init) => {
    urls.push(input instanceof Request ? input.url : String(input));
    return fetch(input, init);
  };
  const to = (base: string) => urls.filter((u) => u.startsWith(base + '/')).length;
  return { fetch: f, to, logins: () => to(stack.loginUrl), gateway: () => to(stack.gatewayUrl) };
}

function client(opts: Partial<TokenClientOptions> & { assertion: AssertionProvider }): TokenClient {
  return new TokenClient({ loginUrl: stack.loginUrl, app: 'sync', version: '1.5', ...opts });
}

/** One more login service on the same backends, with some settings changed. */
async function extraLogin(changes: Partial<LoginConfig>) {
  const audience = 'http://extra-login.test';
  const config = loginConfig({ ...env, LOGIN_PORT: '0', AUDIENCES: audience, DIRECTORY_ADDR: stack.directoryAddr, NODEASSIGN_ADDR: stack.nodeAssignAddr });
  const login = await startLogin({ ...config, ...changes });
  return { login, audience };
}

test('a token is fetched once, then served from the cache (concurrent callers share the login)', async () => {
  const c = counted();
  const tokens = client({ assertion: assertions(uniqueEmail()), fetch: c.fetch });
  const [a, b] = await Promise.all([tokens.getToken(), tokens.getToken()]);
  const again = await tokens.getToken();
  assert.equal(c.logins(), 1);
  assert.equal(a, b);
  assert.equal(again, a);
  assert.ok(Number.isSafeInteger(a.uid));
  assert.equal(a.api_endpoint, `${stack.gatewayUrl}/1.5/${a.uid}`);
  assert.equal(a.duration, 3600);
  assert.equal(a.hashalg, 'sha256');
});

test('the cached token is replaced once 80 % of its duration has passed, not before', async () => {
  const c = counted();
  let shift = 0;
  const tokens = client({ assertion: assertions(uniqueEmail(), { dateBy: 'real' }), fetch: c.fetch, clock: () => Date.now() + shift });
  const first = await tokens.getToken();
  shift = 0.79 * 3600 * 1000;
  assert.equal(await tokens.getToken(), first);
  assert.equal(c.logins(), 1);
  shift = 0.81 * 3600 * 1000;
  const second = await tokens.getToken();
  assert.equal(c.logins(), 2);
  assert.notEqual(second.id, first.id);
  assert.equal(second.uid, first.uid);
});

test('Hawk-signed GET and POST reach the demo app as the token uid', async () => {
  const c = counted();
  const tokens = client({ assertion: assertions(uniqueEmail()), fetch: c.fetch });
  const api = hawkFetch(tokens);
  const { uid, api_endpoint } = await tokens.getToken();

  const got = await api('storage/meta?full=1');
  assert.equal(got.status, 200);
  const getReply = await got.json();
  assert.equal(getReply.uid, String(uid));
  assert.equal(getReply.method, 'GET');
  assert.equal(getReply.path, `/1.5/${uid}/storage/meta`);
  assert.deepEqual(getReply.query, { full: '1' });

  const body = JSON.stringify({ hello: 'world', n: [1, 2, 3] });
  const posted = await api('/storage/notes', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  assert.equal(posted.status, 200);
  const postReply = await posted.json();
  assert.equal(postReply.uid, String(uid));
  assert.equal(postReply.method, 'POST');
  assert.equal(postReply.bodyBytes, Buffer.byteLength(body));

  // Binary body without a content type, to an absolute URL.
  const bytes = new Uint8Array([0, 1, 2, 255]);
  const put = await api(`${api_endpoint}/blob`, { method: 'PUT', body: bytes });
  assert.equal(put.status, 200);
  assert.equal((await put.json()).bodyBytes, 4);

  assert.equal(c.gateway(), 3);
  assert.equal(c.logins(), 1);
});

test('the gateway refuses a request outside the token uid, and the SDK does not loop on it', async () => {
  const c = counted();
  const tokens = client({ assertion: assertions(uniqueEmail()), fetch: c.fetch });
  const { uid } = await tokens.getToken();
  const res = await hawkFetch(tokens)(`${stack.gatewayUrl}/1.5/${uid + 1}/storage`);
  assert.equal(res.status, 401);
  assert.equal((await res.json()).status, 'invalid-credentials');
  // One retry with a new token, then the answer is returned as it is.
  assert.equal(c.gateway(), 2);
  assert.equal(c.logins(), 2);
});

test('an SDK clock 10 minutes ahead is corrected from X-Timestamp and everything works', async () => {
  const c = counted();
  const tokens = client({ assertion: assertions(uniqueEmail()), fetch: c.fetch, clock: () => Date.now() + 10 * MINUTE });
  // The first assertion is dated 10 minutes in the future: invalid-timestamp, clock corrected, one retry.
  const token = await tokens.getToken();
  assert.equal(c.logins(), 2);
  assert.ok(Math.abs(tokens.clockOffset + 10 * MINUTE) < 3000, `offset ${tokens.clockOffset}`);
  const res = await hawkFetch(tokens)('info');
  assert.equal(res.status, 200);
  assert.equal((await res.json()).uid, String(token.uid));
  assert.equal(c.gateway(), 1);
});

test('an SDK clock 10 minutes behind: the expired assertion is retried once with the server time', async () => {
  const c = counted();
  const tokens = client({ assertion: assertions(uniqueEmail()), fetch: c.fetch, clock: () => Date.now() - 10 * MINUTE });
  await tokens.getToken();
  assert.equal(c.logins(), 2);
  assert.ok(Math.abs(tokens.clockOffset - 10 * MINUTE) < 3000, `offset ${tokens.clockOffset}`);
});

test('a clock that jumps after login is corrected by the gateway stale-timestamp challenge', async () => {
  const c = counted();
  let shift = 0;
  const tokens = client({ assertion: assertions(uniqueEmail()), fetch: c.fetch, clock: () => Date.now() + shift });
  const { uid } = await tokens.getToken();
  shift = 10 * MINUTE;
  const res = await hawkFetch(tokens)('storage', { method: 'POST', body: 'payload' });
  assert.equal(res.status, 200);
  assert.equal((await res.json()).uid, String(uid));
  // Stale timestamp → MAC-checked server time → one retry with the same token.
  assert.equal(c.gateway(), 2);
  assert.equal(c.logins(), 1);
  assert.ok(Math.abs(tokens.clockOffset + 10 * MINUTE) < 3000, `offset ${tokens.clockOffset}`);
});

test('a token the gateway finds expired is dropped and replaced once', async () => {
  const c = counted();
  // A frozen SDK clock keeps the 2-second token "fresh" in the cache after the server expired it.
  const frozen = Date.now();
  const tokens = client({ assertion: assertions(uniqueEmail(), { dateBy: 'real' }), fetch: c.fetch, clock: () => frozen, duration: 2 });
  const first = await tokens.getToken();
  assert.equal(first.duration, 2);
  await new Promise((r) => setTimeout(r, 2100));
  const res = await hawkFetch(tokens)('info');
  assert.equal(res.status, 200);
  assert.equal(c.gateway(), 2);
  assert.equal(c.logins(), 2);
  assert.notEqual((await tokens.getToken()).id, first.id);
});

test('login refusals surface as typed errors', async () => {
  await assert.rejects(client({ assertion: assertions(uniqueEmail()), audience: 'http://not-this-login.test' }).getToken(), (e) => {
    assert.ok(e instanceof InvalidCredentialsError);
    assert.equal(e.status, 401);
    assert.equal(e.statusString, 'invalid-credentials');
    return true;
  });

  const stillExpired = counted();
  await assert.rejects(
    client({ assertion: assertions(uniqueEmail(), { expiredBy: 10 * MINUTE }), fetch: stillExpired.fetch }).getToken(),
    InvalidTimestampError,
  );
  assert.equal(stillExpired.logins(), 2, 'one retry only');

  const email = uniqueEmail();
  await client({ assertion: assertions(email, { generation: 5 }) }).getToken();
  await assert.rejects(client({ assertion: assertions(email, { generation: 3 }) }).getToken(), InvalidGenerationError);

  await assert.rejects(client({ assertion: assertions(uniqueEmail()), app: 'nope' }).getToken(), (e) => {
    assert.equal(e instanceof LoginError && e.constructor, LoginError);
    assert.equal((e as LoginError).status, 404);
    return true;
  });
});

test('setClientState drops the cached token; a client state seen before is InvalidClientStateError', async () => {
  const c = counted();
  const tokens = client({ assertion: assertions(uniqueEmail()), fetch: c.fetch, clientState: 'aaaa' });
  const first = await tokens.getToken();
  tokens.setClientState('bbbb');
  const second = await tokens.getToken();
  assert.equal(c.logins(), 2);
  assert.notEqual(second.uid, first.uid, 'a new client state gives a new uid');
  tokens.setClientState('aaaa');
  await assert.rejects(tokens.getToken(), (e) => {
    assert.ok(e instanceof InvalidClientStateError);
    assert.equal(e.statusString, 'invalid-client-state');
    return true;
  });
});

test('new-users-disabled is NewUsersDisabledError', async (t) => {
  const { login, audience } = await extraLogin({ allowNewUsers: false });
  t.after(() => login.close());
  await assert.rejects(client({ loginUrl: login.url, audience, assertion: assertions(uniqueEmail()) }).getToken(), (e) => {
    assert.ok(e instanceof NewUsersDisabledError);
    assert.equal(e.status, 403);
    return true;
  });
});

test('503 Retry-After: ServiceUnavailableError, and no request before it has passed', async (t) => {
  const { login, audience } = await extraLogin({ maintenanceMode: true, retryAfter: 30 });
  t.after(() => login.close());
  const c = counted();
  let shift = 0;
  const maintained = client({ loginUrl: login.url, audience, assertion: assertions(uniqueEmail()), fetch: c.fetch, clock: () => Date.now() + shift });

  await assert.rejects(maintained.getToken(), (e) => {
    assert.ok(e instanceof ServiceUnavailableError);
    assert.equal(e.retryAfter, 30);
    assert.equal(e.status, 503);
    return true;
  });
  shift = 29_000;
  await assert.rejects(maintained.getToken(), (e) => e instanceof ServiceUnavailableError && e.retryAfter <= 2);
  assert.equal(c.to(login.url), 1, 'no request inside the Retry-After window');
  shift = 31_000;
  await assert.rejects(maintained.getToken(), ServiceUnavailableError);
  assert.equal(c.to(login.url), 2, 'asked again once the window has passed');
});

/** A tiny real proxy in front of the stack's login that adds `X-Backoff` (the login sends it only under load). */
async function backoffProxy(seconds: number) {
  const server = http.createServer(async (req, res) => {
    const headers: Record<string, string> = {};
    for (const name of ['authorization', 'accept', 'x-client-state']) {
      const v = req.headers[name];
      if (typeof v === 'string') headers[name] = v;
    }
    const answer = await fetch(stack.loginUrl + req.url, { headers });
    const out: Record<string, string> = { 'X-Backoff': String(seconds) };
    for (const name of ['content-type', 'x-timestamp', 'retry-after']) {
      const v = answer.headers.get(name);
      if (v !== null) out[name] = v;
    }
    res.writeHead(answer.status, out);
    res.end(Buffer.from(await answer.arrayBuffer()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

test('X-Backoff: no login request before it has passed; an unexpired token serves meanwhile, then BackoffError', async (t) => {
  const proxy = await backoffProxy(300);
  t.after(() => proxy.close());
  const c = counted();
  let shift = 0;
  const tokens = client({
    loginUrl: proxy.url,
    audience: stack.audience,
    assertion: assertions(uniqueEmail(), { dateBy: 'real' }),
    fetch: c.fetch,
    clock: () => Date.now() + shift,
    duration: 100,
  });
  const first = await tokens.getToken();
  assert.equal(first.duration, 100);
  shift = 90_000; // past the refresh point (80 s), before expiry (100 s)
  assert.equal(await tokens.getToken(), first);
  shift = 101_000; // expired, backoff still on
  await assert.rejects(tokens.getToken(), (e) => {
    assert.ok(e instanceof BackoffError);
    assert.ok(e.retryAfter > 190 && e.retryAfter <= 200, String(e.retryAfter));
    return true;
  });
  assert.equal(c.to(proxy.url), 1);
  shift = 301_000;
  assert.notEqual((await tokens.getToken()).id, first.id);
  assert.equal(c.to(proxy.url), 2);
});
