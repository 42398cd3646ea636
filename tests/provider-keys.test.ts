// Keys from the provider (DESIGN §13.1) with access tokens as Mozilla accounts
// makes them (§13.2), over real HTTP: a real login (in this process, and as its
// own process where its log lines are the point) against directory and
// nodeassign on a temp SQLite file, and the provider stand-in of
// tests/support/oauth-provider.ts serving discovery and the key set.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Env } from '../lib/config.js';
import { httpRequest, type HttpResponse } from '../services/login/testkit.js';
import type { RunningLogin } from '../services/login/server.js';
import { MASTER_SECRETS, System } from './login.suite.js';
import { startLoginProcess, type LoginProcess } from './support/login-process.js';
import { bearerHeaders, mozillaKid, signingKey, writeJwks, type SigningKey } from './support/oauth.js';
import { startOAuthProvider, type OAuthProvider, type ProviderFailure } from './support/oauth-provider.js';
import { loadOpenApi, responseProblems } from './support/openapi.js';
import { metricValue } from './support/prometheus.js';
import { eventually as waitUntil, TEST_AUTH } from './support/services.js';
import { startTestStack } from './support/stack.js';
import { makePki } from './support/tls.js';

const METRICS_SECRET = 'metrics-hash-secret-for-provider-tests';
const dir = mkdtempSync(path.join(tmpdir(), 'provider-keys-'));
let sys: System;
/** k1, k2: the provider's keys (k2 its next one); rogue: a key it never published, with k1's kid. */
let k1: SigningKey;
let k2: SigningKey;
let rogue: SigningKey;
const providers: OAuthProvider[] = [];
let files = 0;

before(async () => {
  const kid = mozillaKid();
  [k1, k2, rogue] = await Promise.all([signingKey('RS256', kid), signingKey('RS256', mozillaKid()), signingKey('RS256', kid)]);
  sys = new System(`sqlite:${path.join(dir, 'tokenserver.db')}`);
  await sys.start();
});

after(async () => {
  await sys.close();
  for (const p of providers) await p.close();
  rmSync(dir, { recursive: true, force: true });
});

async function provider(keys: SigningKey[] = [k1]): Promise<OAuthProvider> {
  const p = await startOAuthProvider({ keys });
  providers.push(p);
  return p;
}

/** A cache file path of its own. */
const cacheFile = () => path.join(dir, `oauth-jwks-${++files}.json`);

/** A login in this process with Bearer keys from `p` (discovery by default), its metrics on a port of their own. */
function loginWith(p: OAuthProvider, env: Env = {}): Promise<RunningLogin> {
  return sys.startLogin({ OAUTH_ISSUER: p.issuer, METRICS_HASH_SECRET: METRICS_SECRET, LOGIN_METRICS_PORT: '0', OAUTH_JWKS_CACHE: cacheFile(), ...env });
}

/** What a login process needs besides its keys: this file's directory and nodeassign, its secrets. */
function processEnv(): Env {
  return {
    APPLICATIONS: 'sync/1.5',
    MASTER_SECRETS: MASTER_SECRETS.join(','),
    INTERNAL_SECRET: TEST_AUTH.internalSecret,
    DIRECTORY_ADDR: `127.0.0.1:${sys.directoryPort}`,
    NODEASSIGN_ADDR: `127.0.0.1:${sys.nodeAssignPort}`,
  };
}

const newSub = () => randomBytes(16).toString('hex');

const openapi = loadOpenApi();
/** `res` is as docs/openapi.yaml describes it. */
function documented(res: HttpResponse, method: string, requestPath: string): void {
  assert.deepEqual(responseProblems(openapi, { method, path: requestPath, status: res.status, headers: res.headers, text: res.text }), [], `${method} ${requestPath} → ${res.status}`);
}

/** A Firefox-shaped token request (§13.2: X-KeyID, no X-Client-State) for a new account, signed by `key`. */
async function bearer(login: RunningLogin | LoginProcess, issuer: string, key: SigningKey, header: Record<string, unknown> = {}): Promise<HttpResponse> {
  const headers = await bearerHeaders(key, issuer, newSub(), { generation: Date.now(), kca: Date.now(), header });
  return httpRequest(`${login.url}/1.0/sync/1.5`, { headers });
}

async function metricsPage(login: RunningLogin): Promise<string> {
  return (await httpRequest(`http://127.0.0.1:${login.metricsPort}/metrics`)).text;
}

/** Polls `check` for up to 60 s: the waits here include a provider's refresh interval. */
const eventually = (what: string, check: () => Promise<boolean>) => waitUntil(what, check, { timeoutMs: 60_000 });

describe('keys by discovery (OAUTH_ISSUER alone)', () => {
  test('a Mozilla-shaped access token verifies against the discovered set; heartbeat and metrics say so', async () => {
    const p = await provider();
    const login = await loginWith(p);
    assert.equal(p.discoveryCount(), 1);
    assert.equal(p.fetchCount(), 1);
    const res = await bearer(login, p.issuer, k1);
    assert.equal(res.status, 200, res.text);
    const heartbeat = await httpRequest(`${login.url}/__heartbeat__`);
    assert.equal(heartbeat.status, 200, heartbeat.text);
    assert.equal(heartbeat.json.checks.oauth_jwks, 'ok');
    documented(heartbeat, 'GET', '/__heartbeat__');
    const page = await metricsPage(login);
    assert.equal(metricValue(page, 'login_jwks_fetches_total', { set: 'oauth', outcome: 'ok' }), 1);
    assert.ok(metricValue(page, 'login_jwks_age_seconds', { set: 'oauth' }) >= 0);
    assert.match(page, /login_jwks_age_seconds\{[^}]*set="oauth"/);
    // A key it never published is refused, even with a published kid.
    assert.equal((await bearer(login, p.issuer, rogue)).status, 401);
    // The token's iss must still be OAUTH_ISSUER.
    assert.equal((await bearer(login, 'https://accounts.firefox.com', k1)).status, 401);
    await login.close();
  });

  test('tokens and keys exactly as Mozilla accounts makes them (DESIGN §13.2) log in; X-KeyID and no X-Client-State', async () => {
    const p = await provider();
    const served = JSON.parse((await httpRequest(p.jwksUri)).text).keys;
    assert.deepEqual(Object.keys(served[0]).sort(), ['alg', 'e', 'fxa-createdAt', 'kid', 'kty', 'n', 'use']);
    const login = await loginWith(p);
    const headers = await bearerHeaders(k1, p.issuer, newSub(), { generation: 1_700_000_000_000, kca: 1_700_000_000_000 });
    assert.deepEqual(Object.keys(headers).sort(), ['Authorization', 'X-KeyID']);
    const [h, c] = headers.Authorization.slice('Bearer '.length).split('.').slice(0, 2).map((part) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8')));
    assert.deepEqual(h, { alg: 'RS256', kid: k1.kid, typ: 'at+JWT' });
    assert.deepEqual(Object.keys(c).sort(), ['aud', 'client_id', 'exp', 'fxa-generation', 'fxa-profileChangedAt', 'iat', 'iss', 'jti', 'scope', 'sub']);
    assert.equal(c.aud, 'https://token.services.mozilla.com');
    assert.equal(c.scope, 'profile https://identity.mozilla.com/apps/oldsync');
    const res = await httpRequest(`${login.url}/1.0/sync/1.5`, { headers });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.hashed_fxa_uid.length, 32);
    await login.close();
  });

  test('OAUTH_JWKS as a URL: no discovery, the set from that URL', async () => {
    const p = await provider();
    const login = await loginWith(p, { OAUTH_ISSUER: undefined, OAUTH_JWKS: p.jwksUri });
    assert.equal(p.discoveryCount(), 0);
    assert.equal(p.fetchCount(), 1);
    const headers = await bearerHeaders(k1, 'https://any-issuer.example', newSub());
    assert.equal((await httpRequest(`${login.url}/1.0/sync/1.5`, { headers })).status, 200);
    await login.close();
  });

  test('a same-origin redirect is followed', async () => {
    const p = await provider();
    p.fail('moved');
    const login = await loginWith(p);
    assert.equal((await bearer(login, p.issuer, k1)).status, 200);
    await login.close();
  });
});

describe('rotation and withdrawal without a restart', () => {
  test('a new kid is fetched once and verifies; a withdrawn key stops after the next refresh', async () => {
    const p = await provider([k1]);
    const login = await loginWith(p, { OAUTH_JWKS_MIN_INTERVAL: '1', OAUTH_JWKS_REFRESH: '3600' });
    assert.equal((await bearer(login, p.issuer, k2)).status, 401, 'k2 is not published yet');
    p.setKeys([k1, k2]);
    // Past the interval since that fetch, every request with the new kid waits on one shared fetch and verifies.
    await new Promise((r) => setTimeout(r, 1200));
    const fetched = p.fetchCount();
    const rotated = await Promise.all(Array.from({ length: 10 }, () => bearer(login, p.issuer, k2)));
    assert.deepEqual(rotated.map((r) => r.status), Array(10).fill(200));
    assert.equal(p.fetchCount(), fetched + 1, 'one fetch for all of them');
    assert.equal((await bearer(login, p.issuer, k1)).status, 200, 'k1 still published');
    p.setKeys([k2]);
    // k1's kid is known, so nothing fetches until a refresh does: an unknown kid asks for one.
    const before = p.fetchCount();
    await eventually('k1 refused once withdrawn', async () => {
      await bearer(login, p.issuer, await signingKey('RS256', mozillaKid()));
      return (await bearer(login, p.issuer, k1)).status === 401;
    });
    assert.ok(p.fetchCount() > before);
    assert.equal((await bearer(login, p.issuer, k2)).status, 200);
    await login.close();
  });

  test('the background refresh picks up a rotation and a withdrawal on its own', async () => {
    const p = await provider([k1]);
    const login = await loginWith(p, { OAUTH_JWKS_REFRESH: '1', OAUTH_JWKS_MIN_INTERVAL: '3600' });
    p.setKeys([k2]);
    await eventually('background refresh', async () => p.fetchCount() >= 2);
    // The refresh that counted may still be in flight: poll the answer.
    await eventually('k1 withdrawn', async () => (await bearer(login, p.issuer, k1)).status === 401);
    // k2 verifies without a fetch of its own (the min interval is an hour).
    assert.equal((await bearer(login, p.issuer, k2)).status, 200);
    await login.close();
  });
});

describe('a flood of unknown kids', () => {
  test('concurrent tokens with unknown kids share one fetch; more within the interval fetch nothing', async () => {
    const interval = 3;
    const p = await provider([k1]);
    const login = await loginWith(p, { OAUTH_JWKS_MIN_INTERVAL: String(interval) });
    const strangers = await Promise.all([1, 2, 3].map(() => signingKey('RS256', mozillaKid())));
    // The start fetch counts as the last one: wait out its interval.
    await new Promise((r) => setTimeout(r, interval * 1000 + 200));
    const start = p.fetchCount();
    const started = Date.now();
    const flood = await Promise.all(Array.from({ length: 60 }, (_, i) => bearer(login, p.issuer, strangers[i % 3], { kid: `unknown-${i}-${randomBytes(4).toString('hex')}` })));
    assert.ok(flood.every((r) => r.status === 401), 'every unknown kid refused');
    // One shared fetch for the whole flood (and one more only if it outlasted an interval on a slow machine).
    const floodAllowed = 1 + Math.floor((Date.now() - started) / (interval * 1000));
    assert.ok(p.fetchCount() - start >= 1 && p.fetchCount() - start <= floodAllowed, `${p.fetchCount() - start} fetches for the flood, at most ${floodAllowed}`);
    const more = await Promise.all(Array.from({ length: 20 }, (_, i) => bearer(login, p.issuer, strangers[i % 3], { kid: `again-${i}` })));
    assert.ok(more.every((r) => r.status === 401));
    // At most one more per interval that has passed since (none on a quick machine).
    const allowed = 1 + Math.floor((Date.now() - started) / (interval * 1000));
    assert.ok(p.fetchCount() - start <= allowed, `${p.fetchCount() - start} fetches, at most ${allowed} allowed`);
    await login.close();
  });
});

describe('a provider that hangs', () => {
  test('a token with an unknown kid waits a bounded time; tokens with known kids do not wait on it at all', async () => {
    const p = await provider([k1]);
    const login = await loginWith(p, { OAUTH_JWKS_MIN_INTERVAL: '1' });
    await new Promise((r) => setTimeout(r, 1200));
    p.fail('hang');
    const stranger = await signingKey('RS256', mozillaKid());
    const order: string[] = [];
    const started = Date.now();
    const unknownKid = (async () => {
      const headers = await bearerHeaders(stranger, p.issuer, newSub());
      const res = await httpRequest(`${login.url}/1.0/sync/1.5`, { headers, timeoutMs: 60_000 });
      order.push('unknown kid');
      return res;
    })();
    // Once the refresh is under way (the stand-in has the request), a known kid is answered from memory.
    await eventually('the refresh reached the provider', async () => p.fetchCount() + p.discoveryCount() > 2);
    const known = await bearer(login, p.issuer, k1);
    order.push('known kid');
    assert.equal(known.status, 200);
    const res = await unknownKid;
    assert.equal(res.status, 401);
    assert.deepEqual(order, ['known kid', 'unknown kid']);
    // Bounded by OAUTH_JWKS_WAIT_MS (5 s) and the fetch timeout: generous here for a loaded machine.
    assert.ok(Date.now() - started < 30_000, `waited ${Date.now() - started} ms`);
    p.fail(null);
    await login.close();
  });
});

describe('the provider down', () => {
  test('a failed refresh keeps the last good set; the metrics count the failure', async () => {
    const p = await provider([k1]);
    const login = await loginWith(p, { OAUTH_JWKS_REFRESH: '1', OAUTH_JWKS_MIN_INTERVAL: '1' });
    p.fail('down');
    await eventually('a failed fetch counted', async () => metricValue(await metricsPage(login), 'login_jwks_fetches_total', { set: 'oauth', outcome: 'unreachable' }) >= 1);
    assert.equal((await bearer(login, p.issuer, k1)).status, 200, 'the last good set still verifies');
    assert.equal((await bearer(login, p.issuer, rogue)).status, 401);
    const heartbeat = await httpRequest(`${login.url}/__heartbeat__`);
    assert.equal(heartbeat.status, 200, 'a set is there, however old');
    const page = await metricsPage(login);
    await eventually('the set ages', async () => metricValue(await metricsPage(login), 'login_jwks_age_seconds', { set: 'oauth' }) >= 1);
    assert.ok(metricValue(page, 'login_jwks_fetches_total', { set: 'oauth', outcome: 'ok' }) >= 1);
    await login.close();
  });

  test('a restart while it is down starts from the disk copy (0600, written over a link, never through it)', async () => {
    const p = await provider([k1]);
    const cache = cacheFile();
    // A link where the cache goes: the write replaces it, and its target is untouched.
    const target = path.join(dir, 'link-target.txt');
    writeFileSync(target, 'not to be overwritten');
    symlinkSync(target, cache);
    const first = await loginWith(p, { OAUTH_JWKS_CACHE: cache });
    await first.close();
    assert.equal(readFileSync(target, 'utf8'), 'not to be overwritten');
    assert.ok(lstatSync(cache).isFile());
    assert.equal(statSync(cache).mode & 0o777, 0o600);
    const copy = JSON.parse(readFileSync(cache, 'utf8'));
    assert.equal(copy.source, p.issuer);
    assert.deepEqual(copy.keys.map((k: { kid: string }) => k.kid), [k1.kid]);
    p.fail('down');
    const second = await loginWith(p, { OAUTH_JWKS_CACHE: cache });
    assert.equal((await bearer(second, p.issuer, k1)).status, 200, 'verified with the cached set');
    assert.equal((await bearer(second, p.issuer, rogue)).status, 401);
    assert.equal((await httpRequest(`${second.url}/__heartbeat__`)).status, 200);
    assert.ok(metricValue(await metricsPage(second), 'login_jwks_age_seconds', { set: 'oauth' }) >= 0);
    await second.close();
  });

  test('a start from the disk copy tries the provider again within the min interval, not a refresh period later', async () => {
    const p = await provider([k1]);
    const cache = cacheFile();
    await (await loginWith(p, { OAUTH_JWKS_CACHE: cache })).close();
    p.fail('down');
    const login = await loginWith(p, { OAUTH_JWKS_CACHE: cache, OAUTH_JWKS_MIN_INTERVAL: '1', OAUTH_JWKS_REFRESH: '3600' });
    assert.equal((await bearer(login, p.issuer, k1)).status, 200, 'verified with the cached set');
    // Back, with k1 withdrawn: k1's kid is known, so only the background retry can learn it.
    p.fail(null);
    p.setKeys([k2]);
    await eventually('k1 refused once the provider is back', async () => (await bearer(login, p.issuer, k1)).status === 401);
    assert.equal((await bearer(login, p.issuer, k2)).status, 200);
    await login.close();
  });

  test('a disk copy of another provider is not used', async () => {
    const p = await provider([k1]);
    const other = await provider([rogue]);
    const cache = cacheFile();
    await (await loginWith(other, { OAUTH_JWKS_CACHE: cache })).close();
    p.fail('down');
    const login = await loginWith(p, { OAUTH_JWKS_CACHE: cache });
    const res = await bearer(login, p.issuer, rogue);
    assert.equal(res.status, 503, res.text);
    await login.close();
  });
});

describe('the first start without the provider', () => {
  test('login starts; Bearer answers 503 + Retry-After and the heartbeat 503 until the set arrives', async () => {
    const p = await provider([k1]);
    p.fail('down');
    const login = await loginWith(p, { OAUTH_JWKS_MIN_INTERVAL: '1' });
    const res = await bearer(login, p.issuer, k1);
    assert.equal(res.status, 503, res.text);
    assert.equal(res.header('retry-after'), '1');
    assert.equal(res.json.status, 'error');
    // Mozilla's answer for a resource that is not available, as for a backend down.
    assert.deepEqual(res.json.errors, [{ location: 'body', name: '', description: 'Resource is not available' }]);
    assert.doesNotMatch(res.text, /OAUTH|jwks|127\.0\.0\.1/i, 'a 5xx body says nothing about internals');
    documented(res, 'GET', '/1.0/sync/1.5');
    const heartbeat = await httpRequest(`${login.url}/__heartbeat__`);
    assert.equal(heartbeat.status, 503, heartbeat.text);
    documented(heartbeat, 'GET', '/__heartbeat__');
    assert.equal(heartbeat.json.checks.oauth_jwks, 'unavailable');
    assert.ok(heartbeat.json.errors.some((e: { name: string }) => e.name === 'oauth_jwks'));
    assert.ok(heartbeat.header('retry-after'));
    const tries = p.fetchCount() + p.discoveryCount();
    p.fail(null);
    await eventually('the set arrives by itself', async () => (await bearer(login, p.issuer, k1)).status === 200);
    assert.ok(p.fetchCount() + p.discoveryCount() > tries);
    assert.equal((await httpRequest(`${login.url}/__heartbeat__`)).status, 200);
    await login.close();
  });

  test('a discovery document naming another issuer gives no set', async () => {
    const p = await provider([k1]);
    p.fail('wrong-issuer');
    const login = await loginWith(p);
    assert.equal(p.fetchCount(), 0, 'the set of an issuer that is not ours is never fetched');
    assert.equal((await bearer(login, p.issuer, k1)).status, 503);
    assert.equal(metricValue(await metricsPage(login), 'login_jwks_fetches_total', { set: 'oauth', outcome: 'issuer-mismatch' }), 1);
    await login.close();
  });
});

describe('bad input from the provider (login as its own process: the log says why)', () => {
  let p: OAuthProvider;
  let elsewhere: OAuthProvider;
  let login: LoginProcess;

  before(async () => {
    p = await provider([k1]);
    // Where a redirect leads: another origin serving a key that is not the provider's.
    elsewhere = await provider([rogue]);
    login = await startLoginProcess({
      ...processEnv(),
      LOGIN_WORKERS: '1',
      OAUTH_ISSUER: p.issuer,
      METRICS_HASH_SECRET: METRICS_SECRET,
      OAUTH_JWKS_CACHE: cacheFile(),
      OAUTH_JWKS_REFRESH: '1',
      OAUTH_JWKS_MIN_INTERVAL: '1',
    });
  });

  after(async () => {
    await login?.stop();
  });

  const cases: Array<{ mode: ProviderFailure; outcome: string; why: RegExp }> = [
    { mode: 'garbage', outcome: 'malformed', why: /not JSON/ },
    { mode: 'huge', outcome: 'too-large', why: /more than \d+ bytes/ },
    { mode: 'redirect', outcome: 'redirect', why: /another origin/ },
    { mode: 'html', outcome: 'malformed', why: /text\/html, not JSON/ },
    { mode: 'weak-keys', outcome: 'no-usable-key', why: /no usable key.*2048/ },
    { mode: 'symmetric-keys', outcome: 'no-usable-key', why: /no usable key.*kty oct/ },
    { mode: 'wrong-issuer', outcome: 'issuer-mismatch', why: /names issuer "https:\/\/accounts\.attacker\.example"/ },
    { mode: 'status', outcome: 'status', why: /HTTP 500/ },
    { mode: 'down', outcome: 'unreachable', why: /127\.0\.0\.1/ },
  ];

  for (const c of cases) {
    test(`${c.mode}: the last good set stays, a log line says why, no login with another key`, async () => {
      const from = login.lines.length;
      p.fail(c.mode, { location: `${elsewhere.issuer}/v1/jwks` });
      const line = await login.waitFor((l) => login.lines.indexOf(l) >= from && l.msg.startsWith('key set fetch failed') && l.outcome === c.outcome, 60_000);
      assert.match(line.err, c.why);
      assert.match(line.msg, /the last good set stays/);
      assert.equal((await bearer(login, p.issuer, k1)).status, 200, 'the last good set verifies');
      assert.equal((await bearer(login, p.issuer, rogue)).status, 401, 'nothing else does');
      p.fail(null);
      await login.waitFor((l) => login.lines.indexOf(l) > login.lines.indexOf(line) && l.msg === 'key set fetched', 60_000);
    });
  }

  test('it never crashed, and skipped keys of a set that has good ones are logged', async () => {
    p.setKeys([k1, { kty: 'oct', kid: 'hmac', k: 'c2VjcmV0' }]);
    const from = login.lines.length;
    const skipped = await login.waitFor((l) => login.lines.indexOf(l) >= from && l.msg === 'key of the fetched set skipped', 60_000);
    assert.equal(skipped.kid, 'hmac');
    assert.match(skipped.reason, /kty oct/);
    assert.equal((await bearer(login, p.issuer, k1)).status, 200);
    assert.equal((await httpRequest(`${login.url}/__heartbeat__`)).status, 200);
  });
});

describe('over https', () => {
  test('a provider whose certificate login trusts (NODE_EXTRA_CA_CERTS) serves the keys; one it does not trust serves none', async () => {
    const pki = makePki(dir, 'provider', 'IP:127.0.0.1,DNS:localhost');
    const p = await startOAuthProvider({ keys: [k1], tls: { cert: pki.cert, key: pki.key } });
    providers.push(p);
    assert.match(p.issuer, /^https:\/\/localhost:\d+$/);
    const login = await startLoginProcess({
      ...processEnv(),
      LOGIN_WORKERS: '1',
      OAUTH_ISSUER: p.issuer,
      METRICS_HASH_SECRET: METRICS_SECRET,
      NODE_EXTRA_CA_CERTS: pki.ca,
    });
    try {
      assert.equal((await bearer(login, p.issuer, k1)).status, 200);
      assert.equal(p.discoveryCount(), 1);
    } finally {
      await login.stop();
    }
    // This process does not trust that CA: the fetch fails on the certificate, and nothing verifies.
    const untrusting = await loginWith(p);
    assert.equal((await bearer(untrusting, p.issuer, k1)).status, 503);
    assert.equal(metricValue(await metricsPage(untrusting), 'login_jwks_fetches_total', { set: 'oauth', outcome: 'unreachable' }), 1);
    await untrusting.close();
  });
});

describe('LOGIN_WORKERS=2: each worker keeps its own set', () => {
  test('one fetch per worker at start, one per worker at most for a flood of unknown kids; /metrics adds them up', async () => {
    const p = await provider([k1]);
    const interval = 3;
    const login = await startLoginProcess({
      ...processEnv(),
      LOGIN_WORKERS: '2',
      LOGIN_METRICS_PORT: '0',
      OAUTH_ISSUER: p.issuer,
      METRICS_HASH_SECRET: METRICS_SECRET,
      OAUTH_JWKS_CACHE: cacheFile(),
      OAUTH_JWKS_MIN_INTERVAL: String(interval),
    });
    try {
      assert.equal(p.fetchCount(), 2, 'each worker fetched once at start');
      assert.equal(p.discoveryCount(), 2);
      let page = (await httpRequest(login.metricsUrl!)).text;
      assert.equal(metricValue(page, 'login_jwks_fetches_total', { set: 'oauth', outcome: 'ok' }), 2);
      assert.match(page, /login_jwks_age_seconds\{[^}]*set="oauth"/);
      const stranger = await signingKey('RS256', mozillaKid());
      await new Promise((r) => setTimeout(r, interval * 1000 + 200));
      const started = Date.now();
      // A connection each, so the primary deals them to both workers.
      const flood = await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const headers = await bearerHeaders(stranger, p.issuer, newSub(), { header: { kid: `unknown-${i}` }, headers: { Connection: 'close' } });
          return httpRequest(`${login.url}/1.0/sync/1.5`, { headers });
        }),
      );
      assert.ok(flood.every((r) => r.status === 401));
      const allowed = 2 * (1 + Math.floor((Date.now() - started) / (interval * 1000)));
      assert.ok(p.fetchCount() - 2 >= 1 && p.fetchCount() - 2 <= allowed, `${p.fetchCount() - 2} fetches for the flood, at most ${allowed}`);
      assert.equal((await bearer(login, p.issuer, k1)).status, 200);
      page = (await httpRequest(login.metricsUrl!)).text;
      assert.equal(metricValue(page, 'login_jwks_fetches_total', { set: 'oauth', outcome: 'ok' }), p.fetchCount());
    } finally {
      await login.stop();
    }
  });
});

describe('npm start: the copy under DATA_DIR', () => {
  test('the stack keeps the set at $DATA_DIR/oauth-jwks.json and logs in from it after a restart while the provider is down', async () => {
    const p = await provider([k1]);
    const dataDir = mkdtempSync(path.join(tmpdir(), 'provider-keys-stack-'));
    const env = { DATA_DIR: dataDir, OAUTH_ISSUER: p.issuer, METRICS_HASH_SECRET: METRICS_SECRET };
    try {
      let stack = await startTestStack(env);
      const login = { url: stack.loginUrl } as LoginProcess;
      try {
        assert.equal((await bearer(login, p.issuer, k1)).status, 200);
      } finally {
        await stack.close();
      }
      const copy = path.join(dataDir, 'oauth-jwks.json');
      assert.equal(statSync(copy).mode & 0o777, 0o600);
      assert.equal(JSON.parse(readFileSync(copy, 'utf8')).source, p.issuer);
      p.fail('down');
      stack = await startTestStack(env);
      try {
        assert.equal((await bearer({ url: stack.loginUrl } as LoginProcess, p.issuer, k1)).status, 200, 'verified with the copy');
      } finally {
        await stack.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('configuration', () => {
  test('http:// to a host that is not loopback stops login at start, naming the variable', async () => {
    for (const [variable, value] of [
      ['OAUTH_JWKS', 'http://accounts.example/v1/jwks'],
      ['OAUTH_ISSUER', 'http://accounts.example'],
      ['WEBHOOK_JWKS', 'http://accounts.example/v1/jwks'],
    ]) {
      const env: Env = { APPLICATIONS: 'sync/1.5', MASTER_SECRETS: MASTER_SECRETS.join(','), INTERNAL_SECRET: TEST_AUTH.internalSecret, METRICS_HASH_SECRET: METRICS_SECRET, [variable]: value };
      if (variable === 'WEBHOOK_JWKS') Object.assign(env, { OAUTH_JWKS: 'https://accounts.example/v1/jwks', WEBHOOK_AUDIENCE: 'https://aud' });
      await assert.rejects(startLoginProcess(env), new RegExp(`${variable}: http:// is accepted only to a loopback host`));
    }
  });
});

describe('the account events webhook with WEBHOOK_JWKS as a URL', () => {
  test('its set is fetched, kept and checked like Bearer\'s', async () => {
    const hook = await signingKey('RS256', mozillaKid());
    const p = await provider([hook]);
    const webhookCache = cacheFile();
    const login = await sys.startLogin({ WEBHOOK_JWKS: p.jwksUri, WEBHOOK_AUDIENCE: 'https://aud.example', WEBHOOK_JWKS_CACHE: webhookCache, LOGIN_METRICS_PORT: '0' });
    const { signJwt } = await import('./support/oauth.js');
    const now = Math.floor(Date.now() / 1000);
    const eventToken = (key: SigningKey) =>
      signJwt(key, { iss: 'https://accounts.example', aud: 'https://aud.example', sub: newSub(), iat: now, jti: randomBytes(8).toString('hex'), events: { 'https://schemas.accounts.firefox.com/event/profile-change': {} } });
    const post = async (key: SigningKey) => httpRequest(`${login.url}/1.0/webhooks/fxa/events`, { method: 'POST', headers: { Authorization: `Bearer ${await eventToken(key)}` } });
    assert.equal((await post(hook)).status, 200);
    assert.equal((await post(await signingKey('RS256', hook.kid))).status, 401);
    assert.equal(JSON.parse(readFileSync(webhookCache, 'utf8')).source, p.jwksUri);
    assert.equal(metricValue(await metricsPage(login), 'login_jwks_fetches_total', { set: 'webhook', outcome: 'ok' }), 1);
    await login.close();
    // No set at all: the sender is told to come back (503), not that its token is bad.
    p.fail('down');
    const down = await sys.startLogin({ WEBHOOK_JWKS: p.jwksUri, WEBHOOK_AUDIENCE: 'https://aud.example' });
    const res = await httpRequest(`${down.url}/1.0/webhooks/fxa/events`, { method: 'POST', headers: { Authorization: `Bearer ${await eventToken(hook)}` } });
    assert.equal(res.status, 503, res.text);
    assert.ok(res.header('retry-after'));
    documented(res, 'POST', '/1.0/webhooks/fxa/events');
    const heartbeat = await httpRequest(`${down.url}/__heartbeat__`);
    assert.equal(heartbeat.json.checks.webhook_jwks, 'unavailable');
    await down.close();
  });
});

// Found missing by mutation testing (npm run mutation -- services/login/jwks-source.ts).

describe('the key source: found missing by mutation testing', () => {
  test('a disk copy of this provider with no usable key is no set: 503 until the provider answers', async () => {
    const p = await provider([k1]);
    const cache = cacheFile();
    writeFileSync(cache, JSON.stringify({ source: p.issuer, fetched_at: Date.now(), keys: [{ kty: 'oct', kid: 'hmac', k: 'c2VjcmV0' }] }));
    p.fail('down');
    const login = await loginWith(p, { OAUTH_JWKS_CACHE: cache });
    const res = await bearer(login, p.issuer, k1);
    assert.equal(res.status, 503, res.text);
    assert.equal((await httpRequest(`${login.url}/__heartbeat__`)).status, 503);
    await login.close();
  });

  test('a set from a file verifies, and the heartbeat has no check of a fetched set', async () => {
    const login = await sys.startLogin({ OAUTH_JWKS: writeJwks(dir, 'file-set.json', [k1]), OAUTH_ISSUER: 'https://file.test.example', METRICS_HASH_SECRET: METRICS_SECRET });
    assert.equal((await bearer(login, 'https://file.test.example', k1)).status, 200);
    const heartbeat = await httpRequest(`${login.url}/__heartbeat__`);
    assert.equal(heartbeat.status, 200, heartbeat.text);
    assert.equal(heartbeat.json.checks.oauth_jwks, undefined, heartbeat.text);
    await login.close();
  });

  test('a stopped login fetches no more', async () => {
    const p = await provider([k1]);
    const login = await loginWith(p, { OAUTH_JWKS_REFRESH: '1' });
    await login.close();
    const fetched = p.fetchCount();
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal(p.fetchCount(), fetched);
  });
});
