// Bearer (DESIGN §9.1), keys_changed_at through HTTP (§9.2), the response and
// token additions (§9.3) and the account events webhook (§9.4): real login,
// directory and nodeassign over gRPC on a temp SQLite file, access tokens and
// event tokens signed with jose by keys made here.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac, createPublicKey, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { call, grpcClient } from '../lib/grpc.js';
import { DirectoryClient } from '../lib/gen/directory.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { nodeSecrets, parseToken } from '../lib/token.js';
import { httpRequest, type HttpResponse } from '../services/login/testkit.js';
import type { RunningLogin } from '../services/login/server.js';
import { MASTER_SECRETS, System } from './login.suite.js';
import { TEST_AUTH } from './support/services.js';
import { accessToken, bearerHeaders, compactJws, keyIdHeader, OLDSYNC_SCOPE, signerOf, signingKey, signJwt, writeJwks, type BearerOptions, type SigningKey } from './support/oauth.js';

const ISSUER = 'https://accounts.test.example';
const WEBHOOK_AUDIENCE = 'https://token.test.example/webhook';
const METRICS_SECRET = 'metrics-hash-secret-for-tests';
const NODE = 'https://sync-1.test.example';
const DELETE_USER = 'https://schemas.accounts.firefox.com/event/delete-user';
const PASSWORD_CHANGE = 'https://schemas.accounts.firefox.com/event/password-change';
const rpcOpts = { deadlineMs: 5000, retryAfter: 1 };

const dir = mkdtempSync(path.join(tmpdir(), 'bearer-test-'));
let sys: System;
let login: RunningLogin;
let keys: { rs: SigningKey; es: SigningKey; rogue: SigningKey; hook: SigningKey; rogueHook: SigningKey };

before(async () => {
  const [rs, es, rogue, hook, rogueHook] = await Promise.all([
    signingKey('RS256', 'rs-1'),
    signingKey('ES256', 'es-1'),
    signingKey('RS256', 'rs-1'),
    signingKey('RS256', 'hook-1'),
    signingKey('RS256', 'hook-1'),
  ]);
  keys = { rs, es, rogue, hook, rogueHook };
  sys = new System(`sqlite:${path.join(dir, 'tokenserver.db')}`);
  await sys.start();
  login = await sys.startLogin({
    OAUTH_JWKS: writeJwks(dir, 'oauth.json', [rs, es]),
    OAUTH_ISSUER: ISSUER,
    METRICS_HASH_SECRET: METRICS_SECRET,
    WEBHOOK_JWKS: writeJwks(dir, 'webhook.json', [hook]),
    WEBHOOK_AUDIENCE,
  });
});

after(async () => {
  await sys.close();
  rmSync(dir, { recursive: true, force: true });
});

const newSub = () => randomBytes(16).toString('hex');

async function bearer(sub: string, o: BearerOptions = {}): Promise<HttpResponse> {
  return sys.get('/1.0/sync/1.5', await bearerHeaders(keys.rs, ISSUER, sub, o), { login });
}

function assert401(res: HttpResponse, statusString: string, what = ''): void {
  assert.equal(res.status, 401, `${what}: ${res.text}`);
  assert.equal(res.json?.status, statusString, `${what}: ${res.text}`);
  assert.deepEqual(res.headers.get('www-authenticate'), ['Assertion', 'BrowserID', 'Bearer'], what);
}

const payloadOf = (res: HttpResponse) => parseToken(res.json.id, nodeSecrets(MASTER_SECRETS, NODE)).payload;

describe('Bearer (DESIGN §9.1, §9.3)', () => {
  test('200: a token for <sub>@api.accounts.firefox.com with fxa_uid, fxa_kid and hashed_fxa_uid', async () => {
    const sub = newSub();
    const res = await bearer(sub, { kca: 1_700_000_000_123, generation: 1_700_000_000_123, state: '0123456789abcdef0123456789abcdef' });
    assert.equal(res.status, 200, res.text);
    const payload = payloadOf(res);
    assert.equal(payload.fxa_uid, sub);
    assert.equal(payload.fxa_kid, '1700000000123-ASNFZ4mrze8BI0VniavN7w');
    assert.equal(res.json.hashed_fxa_uid, createHmac('sha256', METRICS_SECRET).update(sub).digest('hex').slice(0, 32));
    const user = await directoryUser(sub);
    assert.equal(user.email, `${sub}@api.accounts.firefox.com`);
    assert.equal(user.clientState, '0123456789abcdef0123456789abcdef', 'the record keeps lowercase hex');
    assert.equal(user.keysChangedAt, 1_700_000_000_123);
  });

  test('ES256, typ application/at+jwt, a token without kid, and a matching X-Client-State all pass', async () => {
    assert.equal((await bearer(newSub(), { key: keys.es })).status, 200);
    assert.equal((await bearer(newSub(), { header: { typ: 'application/at+jwt' } })).status, 200);
    assert.equal((await bearer(newSub(), { header: { kid: undefined } })).status, 200);
    assert.equal((await bearer(newSub(), { headers: { 'X-Client-State': 'AAAA' } })).status, 200);
  });

  test('fxa_kid carries the generation when there is no kca', async () => {
    const res = await bearer(newSub(), { kca: 0, generation: 42, state: 'ff' });
    assert.equal(res.status, 200, res.text);
    assert.equal(payloadOf(res).fxa_kid, '0000000000042-_w');
  });

  test('an empty client state in X-KeyID: fxa_kid is the padded kca and a dash, as both Mozilla servers write it', async () => {
    const res = await bearer(newSub(), { kca: 1000, generation: 1000, state: '' });
    assert.equal(res.status, 200, res.text);
    assert.equal(payloadOf(res).fxa_kid, '0000000001000-');
  });

  test('every §9.1 refusal with its status', async () => {
    const now = Math.floor(Date.now() / 1000);
    const sub = newSub();
    const cases: Array<[string, BearerOptions, string]> = [
      ['typ JWT', { header: { typ: 'JWT' } }, 'invalid-credentials'],
      ['no typ', { header: { typ: undefined } }, 'invalid-credentials'],
      ['signed by a key not in the JWKS, same kid', { key: keys.rogue }, 'invalid-credentials'],
      ['unknown kid', { header: { kid: 'nope' } }, 'invalid-credentials'],
      ['another issuer', { claims: { iss: 'https://evil.example' } }, 'invalid-credentials'],
      ['scope without oldsync', { claims: { scope: 'profile' } }, 'invalid-credentials'],
      ['scope as a prefix', { claims: { scope: `${OLDSYNC_SCOPE}x` } }, 'invalid-credentials'],
      ['sub with a dot', { claims: { sub: 'a.b' } }, 'invalid-credentials'],
      ['sub too long', { claims: { sub: 'a'.repeat(65) } }, 'invalid-credentials'],
      ['no exp', { claims: { exp: undefined } }, 'invalid-credentials'],
      ['expired', { claims: { exp: now - 3600 } }, 'invalid-timestamp'],
      ['issued in the future beyond the skew', { claims: { iat: now + 600 } }, 'invalid-timestamp'],
      ['exp beyond MAX_ACCESS_TOKEN_LIFETIME', { claims: { exp: now + 86_400 + 3600 } }, 'invalid-timestamp'],
      ['fxa-generation not an integer', { claims: { 'fxa-generation': 1.5 } }, 'invalid-generation'],
      ['no X-KeyID', { headers: { 'X-KeyID': undefined } }, 'invalid-key-id'],
      ['X-KeyID not visible ASCII', { headers: { 'X-KeyID': '1000-qq\u00e9' } }, 'invalid-key-id'],
      ['X-KeyID without a dash', { headers: { 'X-KeyID': '1000' } }, 'invalid-credentials'],
      ['X-KeyID kca not a number', { headers: { 'X-KeyID': 'abc-qqo' } }, 'invalid-credentials'],
      ['X-KeyID state not base64url', { headers: { 'X-KeyID': '1000-qq+o' } }, 'invalid-credentials'],
      ['X-KeyID state padded', { headers: { 'X-KeyID': '1000-qg==' } }, 'invalid-credentials'],
      ['X-Client-State differs from X-KeyID', { headers: { 'X-Client-State': 'bbbb' } }, 'invalid-client-state'],
    ];
    for (const [what, o, status] of cases) assert401(await bearer(sub, o), status, what);
    for (const h of ['Bearer', 'Bearer a.b', 'Bearer !!!.x.y', `Bearer ${'x'.repeat(100)}`]) {
      const res = await sys.get('/1.0/sync/1.5', { Authorization: h, 'X-KeyID': '1000-qqo' }, { login });
      assert.equal(res.status, 401, h);
      assert.ok(['error', 'invalid-credentials'].includes(res.json.status), `${h}: ${res.text}`);
    }
    assert.equal(await directoryUserOrNull(sub), null, 'no refusal created a record');
  });

  test('iat within the skew and exp up to MAX_ACCESS_TOKEN_LIFETIME ahead are accepted', async () => {
    const now = Math.floor(Date.now() / 1000);
    assert.equal((await bearer(newSub(), { claims: { iat: now + 30 } })).status, 200);
    assert.equal((await bearer(newSub(), { claims: { exp: now + 86_400 - 60 } })).status, 200);
  });

  test('two Authorization headers are a 400 at login and at the webhook, whichever comes first', async () => {
    const token = await accessToken(keys.rs, newSub(), { iss: ISSUER });
    for (const [method, target] of [['GET', '/1.0/sync/1.5'], ['POST', '/1.0/webhooks/fxa/events']]) {
      const res = await new Promise<{ status: number; json: any }>((resolve, reject) => {
        const url = new URL(login.url);
        const req = http.request({ host: url.hostname, port: url.port, method, path: target, headers: { Authorization: [`Bearer ${token}`, 'Bearer x.y.z'], 'X-KeyID': keyIdHeader(1000, 'aaaa') } }, (r) => {
          let text = '';
          r.on('data', (c: Buffer) => (text += c));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, json: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.end();
      });
      assert.equal(res.status, 400, `${method} ${target}`);
      assert.equal(res.json.status, 'error');
      assert.equal(res.json.errors[0].name, 'Authorization');
    }
  });

  test('the assertion schemes still work beside Bearer; an unknown scheme lists all three challenges', async () => {
    assert.equal((await sys.get('/1.0/sync/1.5', { Authorization: await sys.auth(sys.newEmail()) }, { login })).status, 200);
    assert401(await sys.get('/1.0/sync/1.5', { Authorization: 'Hawk id="x"' }, { login }), 'error', 'Hawk');
  });
});

describe('keys_changed_at through HTTP (DESIGN §9.2, the issue #12 sequence)', () => {
  test('one user: 200, same uid, 900 refused, gen behind kca refused, state change rules, new uid, missing kca refused', async () => {
    const sub = newSub();
    const first = await bearer(sub, { kca: 1000, generation: 1000 });
    assert.equal(first.status, 200, first.text);
    const again = await bearer(sub, { kca: 1000, generation: 1000 });
    assert.equal(again.status, 200);
    assert.equal(again.json.uid, first.json.uid);
    assert401(await bearer(sub, { kca: 900, generation: 1000 }), 'invalid-keysChangedAt', 'kca 900');
    assert401(await bearer(sub, { kca: 2000, generation: 1500 }), 'invalid-keysChangedAt', 'kca 2000, gen 1500');
    assert401(await bearer(sub, { kca: 1000, generation: 1000, state: 'bbbb' }), 'invalid-client-state', 'new state, kca 1000');
    const moved = await bearer(sub, { kca: 2000, generation: 2000, state: 'bbbb' });
    assert.equal(moved.status, 200, moved.text);
    assert.notEqual(moved.json.uid, first.json.uid, 'a new uid');
    assert401(await bearer(sub, { kca: 0, generation: 2000, state: 'bbbb' }), 'invalid-keysChangedAt', 'no kca after one was recorded');
    const user = await directoryUser(sub);
    assert.deepEqual([user.uid, user.keysChangedAt, user.generation], [moved.json.uid, 2000, 2000], 'refusals changed nothing');
  });

  test('BrowserID after Bearer for the same account: no kca → invalid-keysChangedAt', async () => {
    const sub = newSub();
    assert.equal((await bearer(sub, { kca: 1000, generation: 1000 })).status, 200);
    const res = await sys.get('/1.0/sync/1.5', { Authorization: await sys.auth(`${sub}@api.accounts.firefox.com`, { generation: 1000 }), 'X-Client-State': 'aaaa' }, { login });
    assert401(res, 'invalid-keysChangedAt', 'BrowserID');
  });
});

describe('Bearer and the webhook: algorithm confusion and foreign keys', () => {
  const now = () => Math.floor(Date.now() / 1000);
  const accessClaims = () => ({ sub: newSub(), iss: ISSUER, scope: `profile ${OLDSYNC_SCOPE}`, iat: now(), exp: now() + 60 });
  const eventClaims = () => ({ sub: newSub(), iss: ISSUER, aud: WEBHOOK_AUDIENCE, iat: now(), jti: randomBytes(8).toString('hex'), events: { [DELETE_USER]: {} } });
  const present = (token: string) => sys.get('/1.0/sync/1.5', { Authorization: `Bearer ${token}`, 'X-KeyID': keyIdHeader(1000, 'aaaa') }, { login });
  const deliver = (token: string) =>
    httpRequest(`${login.url}/1.0/webhooks/fxa/events`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: '{}' });
  const hmacOf = (secret: string | Buffer) => (input: Buffer) => createHmac('sha256', secret).update(input).digest();

  test('the control: tokens made by these helpers pass', async () => {
    const res = await present(compactJws({ alg: 'RS256', typ: 'at+jwt', kid: 'rs-1' }, accessClaims(), signerOf(keys.rs)));
    assert.equal(res.status, 200, res.text);
    assert.equal((await deliver(compactJws({ alg: 'RS256', kid: 'hook-1' }, eventClaims(), signerOf(keys.hook)))).status, 200);
  });

  test('alg none, HS256 keyed with the public key, an alg of another key type: 401 invalid-credentials', async () => {
    const rsPublic = createPublicKey({ key: keys.rs.publicJwk as never, format: 'jwk' });
    const secrets = [
      rsPublic.export({ type: 'spki', format: 'pem' }) as string,
      rsPublic.export({ type: 'pkcs1', format: 'pem' }) as string,
      JSON.stringify(keys.rs.publicJwk),
      Buffer.from(keys.rs.publicJwk.n!, 'base64url'),
    ];
    const cases: Array<[string, string]> = [
      ['alg none, no signature', compactJws({ alg: 'none', typ: 'at+jwt', kid: 'rs-1' }, accessClaims(), () => Buffer.alloc(0))],
      ['alg none with a signature', compactJws({ alg: 'none', typ: 'at+jwt', kid: 'rs-1' }, accessClaims(), signerOf(keys.rs))],
      ['alg None', compactJws({ alg: 'None', typ: 'at+jwt' }, accessClaims(), () => Buffer.from('x'))],
      ...secrets.map((secret, i): [string, string] => [`HS256 keyed with public key form ${i}`, compactJws({ alg: 'HS256', typ: 'at+jwt', kid: 'rs-1' }, accessClaims(), hmacOf(secret))]),
      ['RS256 header, signed by the ES256 key under its kid', compactJws({ alg: 'RS256', typ: 'at+jwt', kid: 'es-1' }, accessClaims(), signerOf(keys.es))],
      ['ES256 header on an RS256 signature', compactJws({ alg: 'ES256', typ: 'at+jwt', kid: 'rs-1' }, accessClaims(), signerOf(keys.rs))],
      ['PS256 header', compactJws({ alg: 'PS256', typ: 'at+jwt', kid: 'rs-1' }, accessClaims(), signerOf(keys.rs))],
    ];
    for (const [what, token] of cases) assert401(await present(token), 'invalid-credentials', what);
    for (const [what, token] of [
      ['webhook: alg none', compactJws({ alg: 'none', kid: 'hook-1' }, eventClaims(), () => Buffer.alloc(0))],
      ['webhook: HS256 keyed with the public key', compactJws({ alg: 'HS256', kid: 'hook-1' }, eventClaims(), hmacOf(JSON.stringify(keys.hook.publicJwk)))],
      ['webhook: ES256 (not a webhook algorithm)', compactJws({ alg: 'ES256' }, eventClaims(), signerOf(keys.es))],
    ]) {
      const res = await deliver(token);
      assert.equal(res.status, 401, `${what}: ${res.text}`);
      assert.equal(res.json?.status, 'invalid-credentials', what);
    }
  });

  test('a key named in the token (jwk, jku, x5u, x5c) is never used, nor fetched: 401', async () => {
    const attacker = await signingKey('RS256', 'rs-1');
    let fetched = 0;
    const server = http.createServer((_req, res) => {
      fetched++;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ keys: [attacker.publicJwk] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/jwks.json`;
    try {
      const headers: Array<Record<string, unknown>> = [
        { jwk: attacker.publicJwk },
        { jwk: attacker.publicJwk, kid: undefined },
        { jku: url },
        { jku: url, kid: 'attacker' },
        { x5u: url },
        { x5c: ['MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA'] },
      ];
      for (const extra of headers) {
        const header = Object.fromEntries(Object.entries({ alg: 'RS256', typ: 'at+jwt', kid: 'rs-1', ...extra }).filter(([, v]) => v !== undefined));
        assert401(await present(compactJws(header, accessClaims(), signerOf(attacker))), 'invalid-credentials', JSON.stringify(Object.keys(extra)));
        const res = await deliver(compactJws({ ...header, typ: undefined, kid: 'hook-1' }, eventClaims(), signerOf(attacker)));
        assert.equal(res.status, 401, `webhook ${JSON.stringify(Object.keys(extra))}: ${res.text}`);
      }
      assert.equal(fetched, 0, 'no key URL was fetched');
    } finally {
      server.close();
    }
  });

  test('a key of the other set never verifies: an access token signed by the webhook key, an event token by the OAuth key', async () => {
    for (const kid of ['hook-1', 'rs-1', undefined]) {
      const header = Object.fromEntries(Object.entries({ alg: 'RS256', typ: 'at+jwt', kid }).filter(([, v]) => v !== undefined));
      assert401(await present(compactJws(header, accessClaims(), signerOf(keys.hook))), 'invalid-credentials', `webhook key, kid ${kid}`);
    }
    for (const kid of ['rs-1', 'hook-1', undefined]) {
      const header = Object.fromEntries(Object.entries({ alg: 'RS256', kid }).filter(([, v]) => v !== undefined));
      const res = await deliver(compactJws(header, eventClaims(), signerOf(keys.rs)));
      assert.equal(res.status, 401, `OAuth key at the webhook, kid ${kid}: ${res.text}`);
      assert.equal(res.json?.status, 'invalid-credentials');
    }
  });

  test('crit, b64: false and a kid that is no string are refused even when the signature is good', async () => {
    const signed = (extra: Record<string, unknown>) => compactJws({ alg: 'RS256', typ: 'at+jwt', kid: 'rs-1', ...extra }, accessClaims(), signerOf(keys.rs));
    const cases: Array<[string, string]> = [
      ['crit names an extension we do not know', signed({ crit: ['exp'], exp: 1 })],
      ['b64 false (unencoded payload) under crit', signed({ crit: ['b64'], b64: false })],
      ['kid a number', signed({ kid: 7 })],
      ['kid null', signed({ kid: null })],
    ];
    for (const [what, token] of cases) assert401(await present(token), 'invalid-credentials', what);
  });
});

describe('account events webhook (DESIGN §9.4)', () => {
  async function event(sub: string, events: Record<string, unknown>, o: { key?: SigningKey; claims?: Record<string, unknown>; body?: string; method?: string } = {}): Promise<HttpResponse> {
    const now = Math.floor(Date.now() / 1000);
    const token = await signJwt(o.key ?? keys.hook, { iss: ISSUER, aud: WEBHOOK_AUDIENCE, sub, iat: now, exp: now + 60, jti: randomBytes(8).toString('hex'), events, ...o.claims });
    return httpRequest(`${login.url}/1.0/webhooks/fxa/events`, {
      method: o.method ?? 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: o.body ?? '{}',
    });
  }

  test('password-change raises the generation to changeTime − 1, never lowers it; delivered twice, the same', async () => {
    const sub = newSub();
    const res = await bearer(sub, { kca: 1000, generation: 1000 });
    assert.equal(res.status, 200, res.text);
    for (let i = 0; i < 2; i++) {
      const r = await event(sub, { [PASSWORD_CHANGE]: { changeTime: 5001 } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.text, '');
    }
    assert.equal((await directoryUser(sub)).generation, 5000);
    assert.equal((await event(sub, { [PASSWORD_CHANGE]: { changeTime: 3000 } })).status, 200);
    assert.equal((await directoryUser(sub)).generation, 5000, 'never lowered');
    assert401(await bearer(sub, { kca: 1000, generation: 1000 }), 'invalid-generation', 'the old generation after the change');
    assert.equal((await bearer(sub, { kca: 1000, generation: 5000 })).status, 200);
  });

  test('delete-user retires the account in every application and releases its node slots; twice is the same; the next login is a new uid', async () => {
    const sub = newSub();
    const first = await bearer(sub, { kca: 1000, generation: 1000 });
    assert.equal(first.status, 200, first.text);
    const loadBefore = await nodeLoad();
    for (let i = 0; i < 2; i++) assert.equal((await event(sub, { [DELETE_USER]: {} })).status, 200);
    assert.equal(await nodeLoad(), loadBefore - 1, 'one slot given back, once');
    const retired = await directoryUser(sub);
    assert.equal(retired.uid, 0);
    assert.deepEqual(retired.replaced.map((r) => [r.uid, r.released]), [[first.json.uid, true]]);
    const again = await bearer(sub, { kca: 1000, generation: 1000 });
    assert.equal(again.status, 200, again.text);
    assert.notEqual(again.json.uid, first.json.uid);
  });

  test('other events are ignored (200); several events in one token all apply', async () => {
    const sub = newSub();
    assert.equal((await bearer(sub, { kca: 1000, generation: 1000 })).status, 200);
    assert.equal((await event(sub, { 'https://schemas.accounts.firefox.com/event/profile-change': {} })).status, 200);
    assert.equal((await event(sub, { [PASSWORD_CHANGE]: { changeTime: 7001 }, 'https://example/other': {} })).status, 200);
    assert.equal((await directoryUser(sub)).generation, 7000);
  });

  test('401 invalid-credentials for a bad token; 400 for malformed claims or body; 405 for GET; nothing changes', async () => {
    const sub = newSub();
    assert.equal((await bearer(sub, { kca: 1000, generation: 1000 })).status, 200);
    const change = { [PASSWORD_CHANGE]: { changeTime: 9001 } };
    const refused: Array<[string, Promise<HttpResponse>, number, string]> = [
      ['another key', event(sub, change, { key: keys.rogueHook }), 401, 'invalid-credentials'],
      ['wrong audience', event(sub, change, { claims: { aud: 'https://elsewhere.example' } }), 401, 'invalid-credentials'],
      ['wrong issuer', event(sub, change, { claims: { iss: 'https://evil.example' } }), 401, 'invalid-credentials'],
      ['expired', event(sub, change, { claims: { exp: Math.floor(Date.now() / 1000) - 3600 } }), 401, 'invalid-timestamp'],
      ['events not an object', event(sub, [] as unknown as Record<string, unknown>), 400, 'error'],
      ['changeTime missing', event(sub, { [PASSWORD_CHANGE]: {} }), 400, 'error'],
      ['body not JSON', event(sub, change, { body: '{"events": ' }), 400, 'error'],
      ['GET', httpRequest(`${login.url}/1.0/webhooks/fxa/events`), 405, 'error'],
    ];
    for (const [what, pending, status, statusString] of refused) {
      const res = await pending;
      assert.equal(res.status, status, `${what}: ${res.status} ${res.text}`);
      assert.equal(res.json?.status, statusString, what);
    }
    const noAuth = await httpRequest(`${login.url}/1.0/webhooks/fxa/events`, { method: 'POST', body: '{}' });
    assert.equal(noAuth.status, 401);
    const noToken = await httpRequest(`${login.url}/1.0/webhooks/fxa/events`, { method: 'POST', headers: { Authorization: 'Bearer' }, body: '{}' });
    assert.equal(noToken.status, 401);
    assert.equal(noToken.json?.status, 'invalid-credentials', 'Bearer without a token');
    assert.equal((await directoryUser(sub)).generation, 1000, 'no refused event changed the record');
  });

  function eventToken(sub: string, events: Record<string, unknown>, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return signJwt(keys.hook, { iss: ISSUER, aud: WEBHOOK_AUDIENCE, sub, iat: now, jti: randomBytes(8).toString('hex'), events, ...claims }, header);
  }

  function deliver(token: string, to: RunningLogin = login): Promise<HttpResponse> {
    return httpRequest(`${to.url}/1.0/webhooks/fxa/events`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: '{}' });
  }

  test('a delete-user token replayed after the account logged in again changes nothing (200), also through another login', async () => {
    const sub = newSub();
    const first = await bearer(sub);
    assert.equal(first.status, 200, first.text);
    const token = await eventToken(sub, { [DELETE_USER]: {} });
    assert.equal((await deliver(token)).status, 200);
    const again = await bearer(sub);
    assert.equal(again.status, 200, again.text);
    assert.notEqual(again.json.uid, first.json.uid);
    const replica = await sys.startLogin({ OAUTH_JWKS: writeJwks(dir, 'oauth2.json', [keys.rs]), OAUTH_ISSUER: ISSUER, METRICS_HASH_SECRET: METRICS_SECRET, WEBHOOK_JWKS: writeJwks(dir, 'webhook2.json', [keys.hook]), WEBHOOK_AUDIENCE });
    for (const to of [login, replica]) {
      const res = await deliver(token, to);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.text, '');
    }
    const user = await directoryUser(sub);
    assert.equal(user.uid, again.json.uid, 'the account keeps its new uid');
    assert.equal(user.node, NODE);
    assert.equal((await bearer(sub)).json.uid, again.json.uid);
  });

  test('freshness: iat within WEBHOOK_MAX_AGE or exp not beyond it; jti required; typ secevent+jwt when present', async () => {
    const sub = newSub();
    assert.equal((await bearer(sub, { kca: 1000, generation: 1000 })).status, 200);
    const now = Math.floor(Date.now() / 1000);
    const change = (t: number) => ({ [PASSWORD_CHANGE]: { changeTime: t } });
    const refused: Array<[string, Promise<string>, string]> = [
      ['iat a year ago, no exp', eventToken(sub, change(9001), { iat: now - 365 * 86_400 }), 'invalid-timestamp'],
      ['iat two hours ago', eventToken(sub, change(9001), { iat: now - 7200 }), 'invalid-timestamp'],
      ['iat in the future', eventToken(sub, change(9001), { iat: now + 600 }), 'invalid-timestamp'],
      ['exp two hours ahead', eventToken(sub, change(9001), { iat: undefined, exp: now + 7200 }), 'invalid-timestamp'],
      ['neither iat nor exp', eventToken(sub, change(9001), { iat: undefined }), 'invalid-credentials'],
      ['no jti', eventToken(sub, change(9001), { jti: undefined }), 'invalid-credentials'],
      ['jti not a string', eventToken(sub, change(9001), { jti: 7 }), 'invalid-credentials'],
      ['typ JWT', eventToken(sub, change(9001), {}, { typ: 'JWT' }), 'invalid-credentials'],
    ];
    for (const [what, pending, statusString] of refused) {
      const res = await deliver(await pending);
      assert.equal(res.status, 401, `${what}: ${res.text}`);
      assert.equal(res.json?.status, statusString, what);
    }
    assert.equal((await directoryUser(sub)).generation, 1000, 'no refused token changed the record');
    const accepted: Array<[string, Promise<string>, number]> = [
      ['typ secevent+jwt, iat now', eventToken(sub, change(2001), {}, { typ: 'secevent+jwt' }), 2000],
      ['typ application/secevent+jwt', eventToken(sub, change(3001), {}, { typ: 'application/secevent+jwt' }), 3000],
      ['exp 50 min ahead, no iat', eventToken(sub, change(4001), { iat: undefined, exp: now + 3000 }), 4000],
      ['iat 50 min ago', eventToken(sub, change(5001), { iat: now - 3000 }), 5000],
    ];
    for (const [what, pending, generation] of accepted) {
      const res = await deliver(await pending);
      assert.equal(res.status, 200, `${what}: ${res.text}`);
      assert.equal((await directoryUser(sub)).generation, generation, what);
    }
  });

  test('a delivery that fails gives its claim back: the retry applies', async () => {
    const sub = newSub();
    assert.equal((await bearer(sub)).status, 200);
    const jti = randomBytes(8).toString('hex');
    const token = await eventToken(sub, { [DELETE_USER]: {} }, { jti });
    await sys.stop('nodeassign');
    try {
      const res = await deliver(token);
      assert.equal(res.status, 503, res.text);
    } finally {
      await sys.startNodeAssign();
    }
    // The claim was given back: the directory takes a new claim of the same key.
    const key = createHash('sha256').update(`${ISSUER}\n${jti}`).digest('hex');
    const client = grpcClient(DirectoryClient, `127.0.0.1:${sys.directoryPort}`, TEST_AUTH);
    try {
      assert.equal((await call(client, client.claimEventToken, { key, expiresAt: Date.now() + 60_000 }, rpcOpts)).first, true);
      assert.equal((await call(client, client.claimEventToken, { key, expiresAt: Date.now() + 60_000 }, rpcOpts)).first, false);
    } finally {
      client.close();
    }
  });

  test('without WEBHOOK_JWKS the endpoint does not exist', async () => {
    const res = await httpRequest(`${sys.login.url}/1.0/webhooks/fxa/events`, { method: 'POST', body: '{}' });
    assert.equal(res.status, 404);
  });
});

async function directoryUserOrNull(sub: string) {
  const client = grpcClient(DirectoryClient, `127.0.0.1:${sys.directoryPort}`, TEST_AUTH);
  try {
    return (await call(client, client.getUser, { service: 'sync', email: `${sub}@api.accounts.firefox.com` }, rpcOpts)).user!;
  } catch {
    return null;
  } finally {
    client.close();
  }
}

async function directoryUser(sub: string) {
  const user = await directoryUserOrNull(sub);
  assert.ok(user, `no record for ${sub}`);
  return user;
}

async function nodeLoad(): Promise<number> {
  const client = grpcClient(NodeAssignClient, `127.0.0.1:${sys.nodeAssignPort}`, TEST_AUTH);
  try {
    const { nodes } = await call(client, client.listNodes, { service: 'sync' }, rpcOpts);
    return nodes.find((n) => n.url === NODE)!.currentLoad;
  } finally {
    client.close();
  }
}
