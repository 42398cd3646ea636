// DESIGN §11.2 over real HTTP: every refusal Mozilla's Rust tokenserver makes
// too (lib/errors.ts MOZILLA_ERRORS) answers with Mozilla's `errors` entry byte
// for byte and our status string; X-Content-Type-Options on every response of
// the login service; values beyond Number.MAX_SAFE_INTEGER refused as 4xx.
// Real login, directory and nodeassign over gRPC on a temp SQLite file; a
// second login whose directory is gone, and a third whose nodeassign answers
// an Allocate without a node (a backend fault, over real gRPC).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { MOZILLA_ERRORS, unsupportedVersion, type ErrorDetail, type MozillaErrorKey } from '../lib/errors.js';
import { NodeAssignService } from '../lib/gen/nodeassign.js';
import { startServer, type RunningServer } from '../lib/grpc.js';
import { httpRequest, type HttpResponse } from '../services/login/testkit.js';
import type { RunningLogin } from '../services/login/server.js';
import { System } from './login.suite.js';
import { TEST_AUTH } from './support/services.js';
import { bearerHeaders, signingKey, signJwt, writeJwks, type BearerOptions, type SigningKey } from './support/oauth.js';
import { rawRequest } from './support/stack.js';

const ISSUER = 'https://accounts.test.example';
const WEBHOOK_AUDIENCE = 'https://token.test.example/webhook';
const WEBHOOK_PATH = '/1.0/webhooks/fxa/events';

const dir = mkdtempSync(path.join(tmpdir(), 'mozilla-errors-'));
let sys: System;
/** Assertion, BrowserID and Bearer, and the webhook. */
let login: RunningLogin;
/** Its directory address has nothing behind it. */
let noDirectory: RunningLogin;
/** Its nodeassign answers every Allocate without a node. */
let faultyNodeAssign: RunningLogin;
let faulty: RunningServer;
let keys: { rs: SigningKey; rogue: SigningKey; hook: SigningKey };

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

before(async () => {
  const [rs, rogue, hook] = await Promise.all([signingKey('RS256', 'rs-1'), signingKey('RS256', 'rs-1'), signingKey('RS256', 'hook-1')]);
  keys = { rs, rogue, hook };
  sys = new System(`sqlite:${path.join(dir, 'tokenserver.db')}`);
  await sys.start();
  login = await sys.startLogin({
    OAUTH_JWKS: writeJwks(dir, 'oauth.json', [rs]),
    OAUTH_ISSUER: ISSUER,
    METRICS_HASH_SECRET: 'metrics-hash-secret-for-tests',
    WEBHOOK_JWKS: writeJwks(dir, 'webhook.json', [hook]),
    WEBHOOK_AUDIENCE,
  });
  noDirectory = await sys.startLogin({ DIRECTORY_ADDR: `127.0.0.1:${await closedPort()}` });
  faulty = await startServer(
    [{ definition: NodeAssignService, implementation: { allocate: (_call: unknown, cb: (err: null, res: object) => void) => cb(null, {}) }, name: 'faulty' }],
    '127.0.0.1',
    0,
    TEST_AUTH,
  );
  faultyNodeAssign = await sys.startLogin({ NODEASSIGN_ADDR: `127.0.0.1:${faulty.port}` });
});

after(async () => {
  await sys?.close();
  await faulty?.close();
  rmSync(dir, { recursive: true, force: true });
});

const newSub = () => randomBytes(16).toString('hex');
const TOKEN_PATH = '/1.0/sync/1.5';

async function bearer(sub: string, o: BearerOptions = {}): Promise<HttpResponse> {
  return sys.get(TOKEN_PATH, await bearerHeaders(keys.rs, ISSUER, sub, o), { login });
}

/** The first login must pass: it sets the record the second one is refused against. */
async function bearerAfter(sub: string, first: BearerOptions, second: BearerOptions): Promise<HttpResponse> {
  const res = await bearer(sub, first);
  assert.equal(res.status, 200, res.text);
  return bearer(sub, second);
}

async function assertionLogin(email: string, o: { generation?: number; clientState?: string } = {}, target: RunningLogin = login, p = TOKEN_PATH): Promise<HttpResponse> {
  const headers: Record<string, string> = { Authorization: await sys.auth(email, { generation: o.generation }) };
  if (o.clientState !== undefined) headers['X-Client-State'] = o.clientState;
  return sys.get(p, headers, { login: target });
}

async function webhook(authorization: string | undefined, body = '{}'): Promise<HttpResponse> {
  return httpRequest(`${login.url}${WEBHOOK_PATH}`, { method: 'POST', headers: authorization ? { Authorization: authorization } : {}, body });
}

/** One request per row that makes login refuse it, and the entry when it is not the row's own. */
const SCENARIOS: Record<MozillaErrorKey, { request(): Promise<HttpResponse>; entry?: ErrorDetail }> = {
  missingAuthorization: { request: () => sys.get(TOKEN_PATH, {}, { login }) },
  malformedAuthorization: { request: () => sys.get(TOKEN_PATH, { Authorization: 'Bearer' }, { login }) },
  unsupportedScheme: { request: () => sys.get(TOKEN_PATH, { Authorization: 'Unsupported-Auth-Scheme IHACKYOU' }, { login }) },
  webhookUnsupportedScheme: { request: () => webhook('Basic dXNlcjpwYXNz') },
  invalidCredentials: { request: () => bearer(newSub(), { key: keys.rogue }) },
  expired: { request: () => bearer(newSub(), { claims: { exp: Math.floor(Date.now() / 1000) - 3600 } }) },
  malformedGeneration: { request: () => bearer(newSub(), { claims: { 'fxa-generation': 1.5 } }) },
  missingKeyId: { request: () => bearer(newSub(), { headers: { 'X-KeyID': undefined } }) },
  invalidKeyId: { request: () => bearer(newSub(), { headers: { 'X-KeyID': '1000-qq\u00e9' } }) },
  invalidClientStateHeader: { request: () => bearer(newSub(), { headers: { 'X-Client-State': 'state!' } }) },
  clientStateMismatch: { request: () => bearer(newSub(), { headers: { 'X-Client-State': 'bbbb' } }) },
  keysChangedAtAboveGeneration: { request: () => bearerAfter(newSub(), { kca: 1000, generation: 1000 }, { kca: 2000, generation: 1500 }) },
  emptyClientState: {
    async request() {
      const email = sys.newEmail();
      assert.equal((await assertionLogin(email, { generation: 1, clientState: 'aaaa' })).status, 200);
      return assertionLogin(email, { generation: 1 });
    },
  },
  staleClientState: {
    async request() {
      const sub = newSub();
      assert.equal((await bearer(sub, { kca: 1000, generation: 1000, state: 'aaaa' })).status, 200);
      assert.equal((await bearer(sub, { kca: 2000, generation: 2000, state: 'bbbb' })).status, 200);
      return bearer(sub, { kca: 3000, generation: 3000, state: 'aaaa' });
    },
  },
  clientStateWithoutGeneration: {
    async request() {
      const email = sys.newEmail();
      assert.equal((await assertionLogin(email, { generation: 5, clientState: 'aaaa' })).status, 200);
      return assertionLogin(email, { generation: 5, clientState: 'bbbb' });
    },
  },
  clientStateWithoutKeysChangedAt: { request: () => bearerAfter(newSub(), { kca: 1000, generation: 1000 }, { kca: 1000, generation: 2000, state: 'bbbb' }) },
  oldGeneration: { request: () => bearerAfter(newSub(), { kca: 1000, generation: 2000 }, { kca: 1000, generation: 1500 }) },
  oldKeysChangedAt: { request: () => bearerAfter(newSub(), { kca: 2000, generation: 2000 }, { kca: 1000, generation: 2000 }) },
  missingKeysChangedAt: { request: () => bearerAfter(newSub(), { kca: 2000, generation: 2000 }, { kca: 0, generation: 2000 }) },
  unsupportedApplication: { request: () => assertionLogin(sys.newEmail(), {}, login, '/1.0/xXx/token') },
  unsupportedVersion: { request: () => assertionLogin(sys.newEmail(), {}, login, '/1.0/sync/1.2'), entry: unsupportedVersion('1.2') },
  noNode: { request: () => assertionLogin(sys.newEmail(), {}, login, '/1.0/empty/1.0') },
  resourceUnavailable: { request: () => assertionLogin(sys.newEmail(), {}, noDirectory) },
  serverError: { request: () => assertionLogin(sys.newEmail(), {}, faultyNodeAssign) },
};

describe("Mozilla's errors entries (DESIGN §11.2), one request per row of MOZILLA_ERRORS", () => {
  for (const [key, row] of Object.entries(MOZILLA_ERRORS) as Array<[MozillaErrorKey, (typeof MOZILLA_ERRORS)[MozillaErrorKey]]>) {
    const ours = new row.error('');
    test(`${key}: ${ours.status} ${ours.statusString} ${JSON.stringify(row.entry)}`, async () => {
      const scenario = SCENARIOS[key];
      const res = await scenario.request();
      assert.equal(res.status, ours.status, `${res.status} ${res.text}`);
      assert.equal(res.header('content-type'), 'application/json');
      assert.equal(res.header('x-content-type-options'), 'nosniff');
      // Byte for byte: Mozilla's serde output has the same key order and no spaces.
      assert.equal(res.text, JSON.stringify({ status: ours.statusString, errors: [scenario.entry ?? row.entry] }));
    });
  }

  test('the 5xx answers say nothing of the fault behind them', async () => {
    const res = await SCENARIOS.serverError.request();
    assert.doesNotMatch(res.text, /nodeassign|Allocate|no node/);
    const down = await SCENARIOS.resourceUnavailable.request();
    assert.doesNotMatch(down.text, /127\.0\.0\.1|ECONNREFUSED|directory/);
  });
});

describe('X-Content-Type-Options: nosniff on every response of the login service', () => {
  test('every route, method and status', async () => {
    const sub = newSub();
    const email = sys.newEmail();
    const event = await signJwt(keys.hook, {
      sub,
      aud: WEBHOOK_AUDIENCE,
      iss: ISSUER,
      exp: Math.floor(Date.now() / 1000) + 60,
      jti: randomBytes(8).toString('hex'),
      events: { 'https://schemas.accounts.firefox.com/event/password-change': { changeTime: 5000 } },
    });
    const cases: Array<[string, Promise<HttpResponse>, number]> = [
      ['token', assertionLogin(email), 200],
      ['token HEAD', sys.get(TOKEN_PATH, { Authorization: await sys.auth(email) }, { login, method: 'HEAD' }), 200],
      ['Bearer token', bearer(sub), 200],
      ['400', assertionLogin(email, { clientState: 'a b' }), 400],
      ['401', sys.get(TOKEN_PATH, {}, { login }), 401],
      ['404 unknown application', sys.get('/1.0/xXx/1.5', {}, { login }), 404],
      ['404 unknown path', sys.get('/nowhere', {}, { login }), 404],
      ['405', sys.get(TOKEN_PATH, {}, { login, method: 'DELETE' }), 405],
      ['406', sys.get(TOKEN_PATH, { Accept: 'text/html' }, { login }), 406],
      ['503 no node', assertionLogin(email, {}, login, '/1.0/empty/1.0'), 503],
      ['500', assertionLogin(sys.newEmail(), {}, faultyNodeAssign), 500],
      ['webhook 200', webhook(`Bearer ${event}`), 200],
      ['webhook 400', webhook(`Bearer ${event}`, '{"events": '), 400],
      ['webhook 401', webhook(undefined), 401],
      ['webhook 405', httpRequest(`${login.url}${WEBHOOK_PATH}`), 405],
      ['__heartbeat__', sys.get('/__heartbeat__', {}, { login }), 200],
      ['__heartbeat__ with a backend down', sys.get('/__heartbeat__', {}, { login: noDirectory }), 503],
      ['__lbheartbeat__', sys.get('/__lbheartbeat__', {}, { login }), 200],
      ['__version__', sys.get('/__version__', {}, { login }), 200],
    ];
    for (const [what, pending, status] of cases) {
      const res = await pending;
      assert.equal(res.status, status, `${what}: ${res.status} ${res.text}`);
      assert.deepEqual(res.headers.get('x-content-type-options'), ['nosniff'], what);
    }
    // A request the HTTP parser refuses before any handler runs.
    const raw = await rawRequest(login.url, { target: '/1.0/sync/1.5', headers: { 'X-Big': 'a'.repeat(20_000) } });
    assert.equal(raw.status, 431);
    assert.equal(raw.headers['x-content-type-options'], 'nosniff');
  });
});

describe('values beyond Number.MAX_SAFE_INTEGER at login', () => {
  const huge = 2 ** 53 + 2;

  test('a generation above 2^53 − 1: 401 invalid-generation, from an access token or a certificate', async () => {
    const expected = JSON.stringify({ status: 'invalid-generation', errors: [MOZILLA_ERRORS.malformedGeneration.entry] });
    const fromToken = await bearer(newSub(), { claims: { 'fxa-generation': huge } });
    assert.equal(fromToken.status, 401, fromToken.text);
    assert.equal(fromToken.text, expected);
    const fromCertificate = await assertionLogin(sys.newEmail(), { generation: huge });
    assert.equal(fromCertificate.status, 401, fromCertificate.text);
    assert.equal(fromCertificate.text, expected);
  });

  test('a keys_changed_at above 2^53 − 1 in X-KeyID: 401 invalid-credentials; in a webhook changeTime: 400', async () => {
    const res = await bearer(newSub(), { headers: { 'X-KeyID': `${huge}-qqo` } });
    assert.equal(res.status, 401, res.text);
    assert.equal(res.text, JSON.stringify({ status: 'invalid-credentials', errors: [MOZILLA_ERRORS.invalidCredentials.entry] }));
    const event = await signJwt(keys.hook, {
      sub: newSub(),
      aud: WEBHOOK_AUDIENCE,
      iss: ISSUER,
      exp: Math.floor(Date.now() / 1000) + 60,
      jti: randomBytes(8).toString('hex'),
      events: { 'https://schemas.accounts.firefox.com/event/password-change': { changeTime: huge } },
    });
    const change = await webhook(`Bearer ${event}`);
    assert.equal(change.status, 400, change.text);
    assert.equal(change.json.status, 'error');
  });
});
