// docs/openapi.yaml against the real login service: real requests (real
// directory and nodeassign over gRPC on a temp SQLite store, tests/login.suite.ts's
// System) producing every documented status and status string, each response
// checked against the document (status, headers, content type, body).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { RunningLogin } from '../services/login/server.js';
import { httpRequest, type HttpResponse } from '../services/login/testkit.js';
import { accessToken, keyIdHeader, signingKey, signJwt, writeJwks } from './support/oauth.js';
import { System } from './login.suite.js';
import { loadOpenApi, responseProblems, type OpenApiDocument } from './support/openapi.js';

let dir: string;
let sys: System;
let doc: OpenApiDocument;
/** Status → status strings seen, for the completeness check at the end. */
const seen = new Map<number, Set<string>>();

before(async () => {
  doc = loadOpenApi();
  dir = mkdtempSync(path.join(tmpdir(), 'openapi-test-'));
  // One client-state change a day, so that the 429 takes two logins.
  sys = new System(`sqlite:${path.join(dir, 'tokenserver.db')}`, { clientStateChangesPerDay: 1 });
  await sys.start();
});

after(async () => {
  await sys?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Checks `res` against the document and records what it covered. */
function conforms(res: HttpResponse, method: string, requestPath: string, expected: { status: number; statusString?: string }): void {
  const what = `${method} ${requestPath}`;
  assert.equal(res.status, expected.status, `${what}: ${res.text}`);
  if (expected.statusString !== undefined) assert.equal(res.json?.status, expected.statusString, `${what}: ${res.text}`);
  const problems = responseProblems(doc, { method, path: requestPath.split('?')[0], status: res.status, headers: res.headers, text: res.text });
  assert.deepEqual(problems, [], what);
  const strings = seen.get(res.status) ?? new Set<string>();
  strings.add(res.json?.status ?? '');
  seen.set(res.status, strings);
}

async function get(p: string, headers: Record<string, string> = {}, o: { method?: string; login?: RunningLogin; status: number; statusString?: string }) {
  const method = o.method ?? 'GET';
  const res = await sys.get(p, headers, { method, login: o.login });
  conforms(res, method, p, o);
  return res;
}

const TOKEN = '/1.0/sync/1.5';

test('200: a token (GET, HEAD, ?duration), with the caller’s X-Request-Id echoed', async () => {
  const email = sys.newEmail();
  const res = await get(TOKEN, { Authorization: await sys.auth(email), 'X-Request-Id': 'openapi-test-1' }, { status: 200 });
  assert.equal(res.header('x-request-id'), 'openapi-test-1');
  await get(`${TOKEN}?duration=60`, { Authorization: await sys.auth(email), Accept: 'application/json' }, { status: 200 });
  await get(TOKEN, { Authorization: await sys.auth(email) }, { method: 'HEAD', status: 200 });
});

test('400: a malformed X-Client-State, or Authorization sent twice', async () => {
  await get(TOKEN, { Authorization: await sys.auth(sys.newEmail()), 'X-Client-State': 'not valid!' }, { status: 400, statusString: 'error' });
  const auth = await sys.auth(sys.newEmail());
  // An array value is sent as one header line per value: the same header twice.
  const res = await httpRequest(`${sys.login.url}${TOKEN}`, { headers: { Authorization: [auth, auth] } as unknown as Record<string, string> });
  conforms(res, 'GET', TOKEN, { status: 400, statusString: 'error' });
});

test('401: every status string', async () => {
  await get(TOKEN, {}, { status: 401, statusString: 'error' });
  await get(TOKEN, { Authorization: 'Bearer abc' }, { status: 401, statusString: 'error' });
  await get(TOKEN, { Authorization: await sys.auth(sys.newEmail(), { audience: 'https://elsewhere.example' }) }, { status: 401, statusString: 'invalid-credentials' });
  const past = Date.now() - 10 * 60_000;
  await get(TOKEN, { Authorization: await sys.auth(sys.newEmail(), { expMs: past }) }, { status: 401, statusString: 'invalid-timestamp' });

  const email = sys.newEmail();
  assert.equal((await sys.token(email, {}, { generation: 5 })).status, 200);
  await get(TOKEN, { Authorization: await sys.auth(email, { generation: 4 }) }, { status: 401, statusString: 'invalid-generation' });

  const other = sys.newEmail();
  assert.equal((await sys.token(other, { 'X-Client-State': 'aaaa' })).status, 200);
  await get(TOKEN, { Authorization: await sys.auth(other) }, { status: 401, statusString: 'invalid-client-state' });
});

test('403: new users disabled', async () => {
  const closed = await sys.startLogin({ ALLOW_NEW_USERS: 'false' });
  await get(TOKEN, { Authorization: await sys.auth(sys.newEmail()) }, { login: closed, status: 403, statusString: 'new-users-disabled' });
});

test('403: user not allowed (ALLOWED_USERS)', async () => {
  const listed = await sys.startLogin({ ALLOWED_USERS: '@allowed.example' });
  await get(TOKEN, { Authorization: await sys.auth(sys.newEmail()) }, { login: listed, status: 403, statusString: 'user-not-allowed' });
});

test('404, 405 and 406', async () => {
  const auth = { Authorization: await sys.auth(sys.newEmail()) };
  await get('/1.0/unknown/1.5', auth, { status: 404, statusString: 'error' });
  await get('/1.0/sync/9.9', auth, { status: 404, statusString: 'error' });
  for (const method of ['POST', 'PUT', 'DELETE']) await get(TOKEN, auth, { method, status: 405, statusString: 'error' });
  await get('/__heartbeat__', {}, { method: 'POST', status: 405, statusString: 'error' });
  await get(TOKEN, { ...auth, Accept: 'text/html' }, { status: 406, statusString: 'error' });
});

test('429: a client-state change beyond the daily limit', async () => {
  const email = sys.newEmail();
  assert.equal((await sys.token(email, { 'X-Client-State': 'aaaa' }, { generation: 1 })).status, 200);
  assert.equal((await sys.token(email, { 'X-Client-State': 'bbbb' }, { generation: 2 })).status, 200);
  const res = await get(TOKEN, { Authorization: await sys.auth(email, { generation: 3 }), 'X-Client-State': 'cccc' }, { status: 429, statusString: 'error' });
  assert.ok(Number(res.header('retry-after')) > 0);
});

test('503: no node with room, and maintenance mode', async () => {
  await get('/1.0/empty/1.0', { Authorization: await sys.auth(sys.newEmail()) }, { status: 503, statusString: 'error' });
  const maintenance = await sys.startLogin({ MAINTENANCE_MODE: 'true' });
  await get(TOKEN, { Authorization: await sys.auth(sys.newEmail()) }, { login: maintenance, status: 503, statusString: 'error' });
});

test('heartbeat, lbheartbeat and version; no /metrics on the public port', async () => {
  await get('/__heartbeat__', {}, { status: 200, statusString: 'ok' });
  await get('/__lbheartbeat__', {}, { status: 200 });
  await get('/__version__', {}, { status: 200 });
  const metrics = await sys.get('/metrics', {});
  assert.equal(metrics.status, 404, 'served on LOGIN_METRICS_PORT only');
});

test('Bearer: 200, invalid-key-id, invalid-keysChangedAt; the webhook: 200, 400, 401, 413 (DESIGN §9)', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'openapi-bearer-'));
  try {
    const [key, hook] = await Promise.all([signingKey('RS256', 'k'), signingKey('RS256', 'h')]);
    const login = await sys.startLogin({
      OAUTH_JWKS: writeJwks(dir, 'oauth.json', [key]),
      METRICS_HASH_SECRET: 'openapi-metrics-secret',
      WEBHOOK_JWKS: writeJwks(dir, 'hook.json', [hook]),
      WEBHOOK_AUDIENCE: 'https://hook.example',
    });
    const sub = 'openapi0123456789';
    const token = await accessToken(key, sub, { 'fxa-generation': 2000 });
    await get(TOKEN, { Authorization: `Bearer ${token}`, 'X-KeyID': keyIdHeader(2000, 'aaaa') }, { login, status: 200 });
    await get(TOKEN, { Authorization: `Bearer ${token}` }, { login, status: 401, statusString: 'invalid-key-id' });
    await get(TOKEN, { Authorization: `Bearer ${token}`, 'X-KeyID': keyIdHeader(1000, 'aaaa') }, { login, status: 401, statusString: 'invalid-keysChangedAt' });
    const post = async (tokenValue: string, body: string, status: number, statusString?: string) => {
      const res = await httpRequest(`${login.url}/1.0/webhooks/fxa/events`, { method: 'POST', headers: { Authorization: `Bearer ${tokenValue}` }, body });
      conforms(res, 'POST', '/1.0/webhooks/fxa/events', { status, statusString });
    };
    const now = Math.floor(Date.now() / 1000);
    const event = await signJwt(hook, { aud: 'https://hook.example', sub, exp: now + 60, jti: 'openapi-event-1', events: { 'https://schemas.accounts.firefox.com/event/password-change': { changeTime: 3001 } } });
    await post(event, '{}', 200);
    await post(event, '{', 400, 'error');
    await post(token, '{}', 401, 'invalid-credentials');
    const stale = await signJwt(hook, { aud: 'https://hook.example', sub, iat: now - 7200, exp: now + 60, jti: 'openapi-event-2', events: {} });
    await post(stale, '{}', 401, 'invalid-timestamp');
    await post(event, 'x'.repeat(65_537), 413, 'error');
    // An array value is sent as one header line per value: the same header twice.
    const twice = await httpRequest(`${login.url}/1.0/webhooks/fxa/events`, {
      method: 'POST',
      headers: { Authorization: [`Bearer ${event}`, `Bearer ${event}`] } as unknown as Record<string, string>,
      body: '{}',
    });
    conforms(twice, 'POST', '/1.0/webhooks/fxa/events', { status: 400, statusString: 'error' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the webhook answers 404 where it is not enabled (no WEBHOOK_JWKS, as under npm start)', async () => {
  const res = await httpRequest(`${sys.login.url}/1.0/webhooks/fxa/events`, { method: 'POST', headers: { Authorization: 'Bearer abc' }, body: '{}' });
  conforms(res, 'POST', '/1.0/webhooks/fxa/events', { status: 404, statusString: 'error' });
});

test('heartbeat 503 while a backend is down', async () => {
  await sys.stop('nodeassign');
  const res = await get('/__heartbeat__', {}, { status: 503, statusString: 'error' });
  assert.deepEqual(res.json.checks, { directory: 'ok', nodeassign: 'unavailable' });
});

test('every documented status of the token endpoint, and every 401 status string, was produced above', () => {
  const documented = Object.keys((doc.paths['/1.0/{app}/{version}'].get as { responses: object }).responses).map(Number);
  // 500 is documented for completeness; a correct service gives no way to provoke it.
  for (const status of documented.filter((s) => s !== 500)) assert.ok(seen.has(status), `status ${status} not exercised`);
  const enumOf = (name: string) => ((doc.components as any).schemas[name].properties.status.enum as string[]).slice().sort();
  assert.deepEqual([...seen.get(401)!].sort(), enumOf('Unauthorized'));
  assert.deepEqual([...seen.get(403)!].sort(), enumOf('Forbidden'));
});
