// The same requests to Mozilla's Rust tokenserver and to ours, side by side.
// Both run with one site's settings: the same Mozilla-accounts key (Mozilla's
// as its FXA_OAUTH_PRIMARY_JWK, ours found by discovery of OAUTH_ISSUER), the same
// e-mail domain, metrics secret and node type. Each case sends one request
// to both. Where docs/compatibility.md says the two agree, the answers must be
// equal: status, status string and `errors` entry, or for a 200 the duration,
// hashalg, node_type, hashed_fxa_uid, the endpoint's path and the token's
// payload (fxa_uid, fxa_kid, the hashed ids, its lifetime) and key. Where it lists a
// difference, each side must give the answer written here, so a change on
// either side shows. Last, Hawk: one token of ours, used on Mozilla's storage
// node and on our node-gateway. Mozilla's syncserver (tokenserver on
// PostgreSQL, storage on MariaDB) and our `npm start` run as users run them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { hawkHeader } from '../lib/hawk.js';
import { derivedSecret, parseToken } from '../lib/token.js';
import { httpRequest, type HttpResponse } from '../services/login/testkit.js';
import { startNpmStart, type NpmStart } from './support/npm-start.js';
import { accessToken, compactJws, keyIdHeader, OLDSYNC_SCOPE, signingKey, type SigningKey } from './support/oauth.js';
import { startOAuthProvider, type OAuthProvider } from './support/oauth-provider.js';
import { startMozillaDatabases, startSyncServer, syncserverBinary, type MozillaDatabases, type SyncServer, userIds } from './support/syncserver.js';

const FXA_EMAIL_DOMAIN = 'api.accounts.side-by-side.example';
const NODE_TYPE = 'mysql';
const TOKEN_PATH = '/1.0/sync/1.5';

const binary = syncserverBinary();
let skip: string | undefined = 'skip' in binary ? binary.skip : undefined;
let databases: MozillaDatabases | undefined;
let provider: OAuthProvider | undefined;
let mozilla: SyncServer | undefined;
let ours: NpmStart | undefined;
let key: SigningKey;
/** Another RSA key under the same kid: a forged signature to both servers. */
let forger: SigningKey;
let dir = '';
/** Both servers sign tokens with it (ours with TOKEN_SECRETS=master), as on a site that moved. */
const masterSecret = randomBytes(32).toString('hex');

before(async () => {
  if (skip) return;
  const dbs = await startMozillaDatabases();
  if ('skip' in dbs) {
    skip = dbs.skip;
    return;
  }
  databases = dbs;
  key = await signingKey('RS256', 'accounts-key-1');
  forger = await signingKey('RS256', 'accounts-key-1');
  provider = await startOAuthProvider({ keys: [key] });
  const metricsHashSecret = randomBytes(24).toString('hex');
  mozilla = await startSyncServer({
    bin: (binary as { bin: string }).bin,
    masterSecret,
    storageDbUrl: dbs.storageDb.url,
    tokenserver: { databaseUrl: dbs.tokenDb.url, nodeType: NODE_TYPE, fxaEmailDomain: FXA_EMAIL_DOMAIN, fxaMetricsHashSecret: metricsHashSecret, jwk: key.publicJwk },
  });
  dir = mkdtempSync(path.join(tmpdir(), 'beside-mozilla-'));
  ours = await startNpmStart({
    DATA_DIR: dir,
    APPLICATIONS: 'sync/1.5',
    TOKEN_SECRETS: 'master',
    MASTER_SECRETS: masterSecret,
    OAUTH_ISSUER: provider.issuer,
    OAUTH_EMAIL_DOMAIN: FXA_EMAIL_DOMAIN,
    METRICS_HASH_SECRET: metricsHashSecret,
    NODE_TYPE,
  });
});

after(async () => {
  await ours?.stop();
  await mozilla?.stop();
  await provider?.close();
  await databases?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Request {
  method?: string;
  /** Default: the token path. */
  path?: string;
  headers: Record<string, string>;
}

const newSub = () => randomBytes(16).toString('hex');
const nowSeconds = () => Math.floor(Date.now() / 1000);

/** An access token as Mozilla accounts makes one for Firefox (DESIGN §13.2), with `claims` and `header` changed. */
function token(sub: string, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}, signer = key): Promise<string> {
  return accessToken(signer, sub, { iss: provider!.issuer, scope: OLDSYNC_SCOPE, 'fxa-generation': 1000, ...claims }, header);
}

/** Firefox's token request for a new account, with the token, X-KeyID or other headers changed. */
async function firefox(o: { sub?: string; claims?: Record<string, unknown>; header?: Record<string, unknown>; signer?: SigningKey; authPrefix?: string; keyId?: string | null; headers?: Record<string, string> } = {}): Promise<Request> {
  const headers: Record<string, string> = { Authorization: `${o.authPrefix ?? 'Bearer '}${await token(o.sub ?? newSub(), o.claims, o.header, o.signer)}` };
  if (o.keyId !== null) headers['X-KeyID'] = o.keyId ?? keyIdHeader(1000, 'aaaa');
  return { headers: { ...headers, ...o.headers } };
}

/**
 * What a client reads from an answer: `200`, or the status, status string and
 * `errors` entry (`location/name/description`), or the status and "empty".
 */
function summary(res: HttpResponse): string {
  if (res.status === 200) return '200';
  const body = res.json as { status?: string; errors?: Array<{ location: string; name: string; description: string }> } | undefined;
  if (!body?.errors) return `${res.status} ${res.text === '' ? 'empty' : 'not an error body'}`;
  return `${res.status} ${body.status} ${body.errors.map((e) => `${e.location}/${e.name}/${e.description}`).join(' ')}`;
}

/**
 * A 200's fields that both servers must give alike (uids, node URLs and salts are each server's own),
 * and the token's: read by our parser under the shared secret, its key the one derived from it.
 */
function grant(res: HttpResponse) {
  const body = res.json as { id: string; key: string; duration: number; hashalg: string; node_type: string; hashed_fxa_uid: string; api_endpoint: string; uid: number };
  const { payload } = parseToken(body.id, [masterSecret]);
  return {
    duration: body.duration,
    hashalg: body.hashalg,
    node_type: body.node_type,
    hashed_fxa_uid: body.hashed_fxa_uid,
    endpointPath: new URL(body.api_endpoint).pathname.endsWith(`/1.5/${body.uid}`),
    token: {
      uid: payload.uid === body.uid,
      keyDerived: body.key === derivedSecret(body.id, payload.salt, masterSecret),
      minutesLeft: Math.round((payload.expires - Date.now() / 1000) / 60),
      ...userIds(payload),
    },
  };
}

async function both(req: Request): Promise<{ mozilla: HttpResponse; ours: HttpResponse }> {
  const send = (base: string) => httpRequest(`${base}${req.path ?? TOKEN_PATH}`, { method: req.method ?? 'GET', headers: req.headers });
  const [m, o] = await Promise.all([send(mozilla!.url), send(ours!.loginUrl)]);
  return { mozilla: m, ours: o };
}

/** Both answer alike: `expected` is that answer's summary. */
async function same(req: Request, expected: string): Promise<{ mozilla: HttpResponse; ours: HttpResponse }> {
  const r = await both(req);
  const context = `Mozilla: ${r.mozilla.status} ${r.mozilla.text}\nours: ${r.ours.status} ${r.ours.text}`;
  assert.equal(summary(r.mozilla), expected, context);
  assert.equal(summary(r.ours), expected, context);
  if (expected === '200') assert.deepEqual(grant(r.ours), grant(r.mozilla), context);
  return r;
}

/** A documented difference: each side's answer. */
async function differ(req: Request, expected: { mozilla: string; ours: string }): Promise<{ mozilla: HttpResponse; ours: HttpResponse }> {
  const r = await both(req);
  const context = `Mozilla: ${r.mozilla.status} ${r.mozilla.text}\nours: ${r.ours.status} ${r.ours.text}`;
  assert.deepEqual({ mozilla: summary(r.mozilla), ours: summary(r.ours) }, expected, context);
  return r;
}

const UNAUTHORIZED = 'body//Unauthorized';
const INVALID_CREDENTIALS = `401 invalid-credentials ${UNAUTHORIZED}`;

describe("where Mozilla's tokenserver and ours answer alike", () => {
  const cases: Array<[string, () => Promise<Request>, string]> = [
    ['no Authorization', async () => ({ headers: {} }), `401 error ${UNAUTHORIZED}`],
    ['"Bearer" without a token', async () => ({ headers: { Authorization: 'Bearer' } }), `401 error ${UNAUTHORIZED}`],
    ['a scheme neither speaks (Basic)', async () => ({ headers: { Authorization: 'Basic Zm9vOmJhcg==' } }), '401 error body//Unsupported'],
    ['the scheme in lower case', () => firefox({ authPrefix: 'bearer ' }), '200'],
    ['a token that is not a JWS', async () => ({ headers: { Authorization: 'Bearer abc', 'X-KeyID': keyIdHeader(1000, 'aaaa') } }), INVALID_CREDENTIALS],
    ['no X-KeyID', () => firefox({ keyId: null }), '401 invalid-key-id header//Missing X-KeyID header'],
    ...['abc', '1000', '-qqo', 'x-qqo', '1000-qqo=', '1000-qq!o', '1e3-qqo', '-1-qqo', '99999999999999999999-qqo'].map(
      (keyId): [string, () => Promise<Request>, string] => [`X-KeyID ${JSON.stringify(keyId)}`, () => firefox({ keyId }), INVALID_CREDENTIALS],
    ),
    ...['1000-', '01000-qqo', '0-qqo', '1000-qqo-qqo'].map((keyId): [string, () => Promise<Request>, string] => [`X-KeyID ${JSON.stringify(keyId)} is accepted`, () => firefox({ keyId }), '200']),
    ['a signature by another key under the same kid', () => firefox({ signer: forger }), INVALID_CREDENTIALS],
    ['typ JWT', () => firefox({ header: { typ: 'JWT' } }), INVALID_CREDENTIALS],
    ['no typ', () => firefox({ header: { typ: undefined } }), INVALID_CREDENTIALS],
    ['alg none', async () => ({
      headers: {
        Authorization: `Bearer ${compactJws({ alg: 'none', typ: 'at+JWT', kid: 'accounts-key-1' }, { sub: newSub(), iss: provider!.issuer, scope: OLDSYNC_SCOPE, exp: nowSeconds() + 60 }, () => Buffer.alloc(0))}`,
        'X-KeyID': keyIdHeader(1000, 'aaaa'),
      },
    }), INVALID_CREDENTIALS],
    ...([['profile', 'profile'], ['no', undefined], ['an array for', [OLDSYNC_SCOPE]], ['a sub-scope as', `${OLDSYNC_SCOPE}/bookmarks`], ['a :write scope as', `${OLDSYNC_SCOPE}:write`]] as const).map(
      ([what, scope]): [string, () => Promise<Request>, string] => [`${what} scope`, () => firefox({ claims: { scope } }), INVALID_CREDENTIALS],
    ),
    ['no sub', () => firefox({ claims: { sub: undefined } }), INVALID_CREDENTIALS],
    ['a number for sub', () => firefox({ claims: { sub: 12345 } }), INVALID_CREDENTIALS],
    ['no exp', () => firefox({ claims: { exp: undefined } }), INVALID_CREDENTIALS],
    ['no fxa-generation', () => firefox({ claims: { 'fxa-generation': undefined } }), '200'],
    ['fxa-generation 0', () => firefox({ claims: { 'fxa-generation': 0 } }), '200'],
    ['keys_changed_at above the generation, for a new account', () => firefox({ claims: { 'fxa-generation': 10 }, keyId: keyIdHeader(20, 'aaaa') }), '200'],
    ['another aud (neither checks it)', () => firefox({ claims: { aud: 'https://elsewhere.example' } }), '200'],
    ['no kid', () => firefox({ header: { kid: undefined } }), '200'],
    ['X-Client-State equal to X-KeyID\'s', () => firefox({ headers: { 'X-Client-State': 'aaaa' } }), '200'],
    ['X-Client-State naming another state', () => firefox({ headers: { 'X-Client-State': 'bbbb' } }), `401 invalid-client-state ${UNAUTHORIZED}`],
    ['X-Client-State not matching its pattern', () => firefox({ headers: { 'X-Client-State': 'a!a' } }), '400 error header/X-Client-State/Invalid client state value'],
    ['an unknown application', async () => ({ ...(await firefox()), path: '/1.0/foo/1.0' }), '404 error url/application/Unsupported application'],
    ['an unknown version', async () => ({ ...(await firefox()), path: '/1.0/sync/1.1' }), '404 error url/1.1/Unsupported application version'],
    ['a query parameter neither reads', async () => ({ ...(await firefox()), path: `${TOKEN_PATH}?x=1` }), '200'],
    ['Accept: */*', () => firefox({ headers: { Accept: '*/*' } }), '200'],
    ['a 12 kB token', async () => ({ headers: { Authorization: `Bearer ${'a'.repeat(12_000)}`, 'X-KeyID': keyIdHeader(1000, 'aaaa') } }), INVALID_CREDENTIALS],
  ];
  for (const [name, request, expected] of cases) {
    test(name, async (t) => {
      if (skip) return t.skip(skip);
      await same(await request(), expected);
    });
  }

  test('?duration: a shorter token when asked; the default for anything that is not a whole number of seconds below it', async (t) => {
    if (skip) return t.skip(skip);
    for (const [query, duration] of [['100', 100], ['abc', 3600], ['99999', 3600], ['-5', 3600], ['1.5', 3600]] as const) {
      const r = await same({ ...(await firefox()), path: `${TOKEN_PATH}?duration=${query}` }, '200');
      assert.equal(r.ours.json.duration, duration, `?duration=${query}`);
    }
  });

  test("one account's keys_changed_at and client-state changes, as Firefox makes them (DESIGN §9.2)", async (t) => {
    if (skip) return t.skip(skip);
    const sub = newSub();
    const login = (generation: number | undefined, kca: number, state: string) => firefox({ sub, claims: { 'fxa-generation': generation }, keyId: keyIdHeader(kca, state) });
    const steps: Array<[string, number | undefined, number, string, string]> = [
      ['first login', 1000, 1000, 'aaaa', '200'],
      ['again', 1000, 1000, 'aaaa', '200'],
      ['a new state with the same keys_changed_at', 1000, 1000, 'bbbb', '401 invalid-client-state header/X-Client-State/Unacceptable client-state value new value with no generation change'],
      ['a new keys_changed_at above the generation', 1000, 2000, 'bbbb', `401 invalid-keysChangedAt ${UNAUTHORIZED}`],
      ['a new state with new keys (password reset)', 2000, 2000, 'bbbb', '200'],
      ['the old state again', 3000, 3000, 'aaaa', '401 invalid-client-state header/X-Client-State/Unacceptable client-state value stale value'],
      ['an older keys_changed_at', 3000, 1500, 'bbbb', `401 invalid-keysChangedAt ${UNAUTHORIZED}`],
      ['an older generation', 1500, 2000, 'bbbb', `401 invalid-generation ${UNAUTHORIZED}`],
      ['no generation', undefined, 2000, 'bbbb', '200'],
      ['back to the current one', 2000, 2000, 'bbbb', '200'],
      ['a newer keys_changed_at and generation, the same state', 2500, 2500, 'bbbb', '200'],
      ['no keys_changed_at once one is recorded', 2500, 0, 'bbbb', `401 invalid-keysChangedAt ${UNAUTHORIZED}`],
      ['an empty state after a non-empty one', 4000, 4000, '', '401 invalid-client-state header/X-Client-State/Unacceptable client-state value empty string'],
      ['a new state with a new generation but the same keys_changed_at', 4000, 2500, 'cccc', '401 invalid-client-state header/X-Client-State/Unacceptable client-state value new value with no keys_changed_at change'],
      ['a second reset', 5000, 5000, 'cccc', '200'],
      ['the first reset\'s state again', 6000, 6000, 'bbbb', '401 invalid-client-state header/X-Client-State/Unacceptable client-state value stale value'],
    ];
    const uids: Array<{ mozilla: number; ours: number }> = [];
    for (const [step, generation, kca, state, expected] of steps) {
      await t.test(step, async () => {
        const r = await same(await login(generation, kca, state), expected);
        if (expected === '200') uids.push({ mozilla: r.mozilla.json.uid, ours: r.ours.json.uid });
      });
    }
    // Each reset gave a new uid on both servers, and nothing else did.
    const changes = (side: 'mozilla' | 'ours') => uids.filter((u, i) => i > 0 && u[side] !== uids[i - 1][side]).length;
    assert.deepEqual([changes('mozilla'), changes('ours')], [2, 2], JSON.stringify(uids));
  });
});

describe('where docs/compatibility.md says they differ, each answers as it says', () => {
  const cases: Array<[string, () => Promise<Request>, { mozilla: string; ours: string }]> = [
    ['an expired access token', () => firefox({ claims: { exp: nowSeconds() - 120, iat: nowSeconds() - 3600 } }), { mozilla: INVALID_CREDENTIALS, ours: `401 invalid-timestamp ${UNAUTHORIZED}` }],
    ['a space-separated scope list', () => firefox({ claims: { scope: `profile ${OLDSYNC_SCOPE}` } }), { mozilla: INVALID_CREDENTIALS, ours: '200' }],
    ['a comma-separated scope list', () => firefox({ claims: { scope: `profile,${OLDSYNC_SCOPE}` } }), { mozilla: '200', ours: INVALID_CREDENTIALS }],
    ['Accept: text/html', () => firefox({ headers: { Accept: 'text/html' } }), { mozilla: '200', ours: '406 error header/Accept/this endpoint answers application/json only' }],
    ['no Authorization, an unknown application', async () => ({ path: '/1.0/foo/1.0', headers: {} }), { mozilla: `401 error ${UNAUTHORIZED}`, ours: '404 error url/application/Unsupported application' }],
    ['POST', async () => ({ ...(await firefox()), method: 'POST' }), { mozilla: '405 empty', ours: '405 error url//method not allowed; allowed: GET, HEAD' }],
    ['HEAD', async () => ({ ...(await firefox()), method: 'HEAD' }), { mozilla: '405 empty', ours: '200' }],
    ['an unknown path', async () => ({ path: '/1.0/sync', headers: {} }), { mozilla: '404 empty', ours: '404 error url//no such endpoint' }],
    ['the token path with a trailing slash', async () => ({ ...(await firefox()), path: `${TOKEN_PATH}/` }), { mozilla: '404 empty', ours: '200' }],
    ['two spaces after "Bearer"', () => firefox({ authPrefix: 'Bearer  ' }), { mozilla: INVALID_CREDENTIALS, ours: '200' }],
    ["X-Client-State in upper case, X-KeyID's in lower", () => firefox({ keyId: keyIdHeader(1000, 'abcd'), headers: { 'X-Client-State': 'ABCD' } }), { mozilla: `401 invalid-client-state ${UNAUTHORIZED}`, ours: '200' }],
    ['a 45-byte client state in X-KeyID', () => firefox({ keyId: `1000-${'A'.repeat(60)}` }), { mozilla: '500 internal-error internal//Server error', ours: INVALID_CREDENTIALS }],
    ['a 300-character sub', () => firefox({ sub: 'a'.repeat(300) }), { mozilla: '500 internal-error internal//Server error', ours: INVALID_CREDENTIALS }],
    ['a sub with an @', () => firefox({ sub: 'Alice@Example' }), { mozilla: '200', ours: INVALID_CREDENTIALS }],
    ['a kid no key has', () => firefox({ header: { kid: 'no-such-key' } }), { mozilla: '200', ours: INVALID_CREDENTIALS }],
    ['another issuer', () => firefox({ claims: { iss: 'https://accounts.elsewhere.example' } }), { mozilla: '200', ours: INVALID_CREDENTIALS }],
    ['iat an hour ahead', () => firefox({ claims: { iat: nowSeconds() + 3600 } }), { mozilla: '200', ours: `401 invalid-timestamp ${UNAUTHORIZED}` }],
    ['fxa-generation null', () => firefox({ claims: { 'fxa-generation': null } }), { mozilla: '200', ours: `401 invalid-generation ${UNAUTHORIZED}` }],
    ['fxa-generation negative', () => firefox({ claims: { 'fxa-generation': -5 } }), { mozilla: '200', ours: `401 invalid-generation ${UNAUTHORIZED}` }],
    ['fxa-generation a string', () => firefox({ claims: { 'fxa-generation': '1000' } }), { mozilla: INVALID_CREDENTIALS, ours: `401 invalid-generation ${UNAUTHORIZED}` }],
    ['fxa-generation a fraction', () => firefox({ claims: { 'fxa-generation': 1000.5 } }), { mozilla: INVALID_CREDENTIALS, ours: `401 invalid-generation ${UNAUTHORIZED}` }],
    ['a BrowserID assertion', async () => ({ headers: { Authorization: 'BrowserID abc' } }), { mozilla: '401 error body//Unsupported', ours: INVALID_CREDENTIALS }],
    ['exp two days ahead (beyond MAX_ACCESS_TOKEN_LIFETIME)', () => firefox({ claims: { exp: nowSeconds() + 2 * 86_400 } }), { mozilla: '200', ours: `401 invalid-timestamp ${UNAUTHORIZED}` }],
    ['fxa-generation above 2^53', () => firefox({ claims: { 'fxa-generation': 2 ** 53 + 2 } }), { mozilla: '200', ours: `401 invalid-generation ${UNAUTHORIZED}` }],
    ['keys_changed_at above 2^53 in X-KeyID', () => firefox({ keyId: keyIdHeader(2 ** 53 + 2, 'aaaa') }), { mozilla: '200', ours: INVALID_CREDENTIALS }],
    ['an empty X-KeyID', () => firefox({ keyId: '' }), { mozilla: INVALID_CREDENTIALS, ours: '401 invalid-key-id header//Missing X-KeyID header' }],
    ['X-KeyID with a space inside', () => firefox({ keyId: '1000- qqo' }), { mozilla: INVALID_CREDENTIALS, ours: '401 invalid-key-id header//Invalid X-KeyID header' }],
    ['?duration given twice', async () => ({ ...(await firefox()), path: `${TOKEN_PATH}?duration=100&duration=200` }), { mozilla: '400 error url//invalid query params', ours: '200' }],
  ];
  for (const [name, request, expected] of cases) {
    test(name, async (t) => {
      if (skip) return t.skip(skip);
      await differ(await request(), expected);
    });
  }

  test('?duration=0: Mozilla mints a token of 0 seconds, ours the default', async (t) => {
    if (skip) return t.skip(skip);
    const d = await both({ ...(await firefox()), path: `${TOKEN_PATH}?duration=0` });
    assert.deepEqual([d.mozilla.status, d.mozilla.json.duration, d.ours.status, d.ours.json.duration], [200, 0, 200, 3600]);
  });

  test('X-Timestamp: on every 200 of both; on 401s only ours sends it (DESIGN §3)', async (t) => {
    if (skip) return t.skip(skip);
    const ok = await both(await firefox());
    const refused = await both({ headers: {} });
    assert.deepEqual(
      [ok.mozilla, ok.ours, refused.mozilla, refused.ours].map((r) => [r.status, /^\d+$/.test(r.header('x-timestamp') ?? '')]),
      [[200, true], [200, true], [401, false], [401, true]],
    );
  });
});

describe("Hawk: Mozilla's storage node beside our node-gateway, one token of ours for both", () => {
  type Grant = { id: string; key: string; uid: number; api_endpoint: string };
  /** A token from our login for a new account; both check it with the shared master secret. */
  const newGrant = async (keyId?: string): Promise<Grant> => {
    const res = await httpRequest(`${ours!.loginUrl}${TOKEN_PATH}`, await firefox({ keyId }));
    assert.equal(res.status, 200, res.text);
    return res.json;
  };
  let shared: Grant | undefined;
  /** The same request, signed by `sign` for each server's own URL: Mozilla's node serves storage itself, ours through the gateway. */
  async function hawkBoth(o: { method?: string; path: string; body?: string; sign: (url: string, method: string, grant: { id: string; key: string }) => string; twice?: boolean; grant?: Grant }) {
    const grant = o.grant ?? (shared ??= await newGrant());
    const send = async (url: string) => {
      const method = o.method ?? 'GET';
      const request = () => httpRequest(url, { method, body: o.body, headers: { Authorization: o.sign(url, method, grant), ...(o.body === undefined ? {} : { 'Content-Type': 'application/json' }) } });
      const first = await request();
      return o.twice ? request() : first;
    };
    const [m, g] = await Promise.all([send(`${mozilla!.url}/1.5/${grant.uid}/${o.path}`), send(`${grant.api_endpoint}/${o.path}`)]);
    return { mozilla: m.status, ours: g.status, statusString: g.json?.status, context: `Mozilla: ${m.status} ${m.text}\nours: ${g.status} ${g.text}` };
  }
  const signed = (extra: Partial<Parameters<typeof hawkHeader>[0]> = {}) => (url: string, method: string, grant: { id: string; key: string }) => hawkHeader({ id: grant.id, key: grant.key, method, url, ...extra });

  test('a fresh, well-signed request: both serve it', async (t) => {
    if (skip) return t.skip(skip);
    const r = await hawkBoth({ path: 'info/collections', sign: signed() });
    assert.deepEqual([r.mozilla, r.ours], [200, 200], r.context);
  });

  test("a token for an empty client state (its fxa_kid the padded kca and a dash): both serve it", async (t) => {
    if (skip) return t.skip(skip);
    const r = await hawkBoth({ path: 'info/collections', sign: signed(), grant: await newGrant('1000-') });
    assert.deepEqual([r.mozilla, r.ours], [200, 200], r.context);
  });

  test('a wrong key, or a MAC over another path: both refuse it', async (t) => {
    if (skip) return t.skip(skip);
    const wrongKey = await hawkBoth({ path: 'info/collections', sign: (url, method, grant) => hawkHeader({ id: grant.id, key: `${grant.key}x`, method, url }) });
    const otherPath = await hawkBoth({ path: 'info/collections', sign: (url, method, grant) => hawkHeader({ id: grant.id, key: grant.key, method, url: `${url}x` }) });
    assert.deepEqual([wrongKey.mozilla, wrongKey.ours, otherPath.mozilla, otherPath.ours], [401, 401, 401, 401], `${wrongKey.context}\n${otherPath.context}`);
  });

  test("signed an hour ago: Mozilla's node serves it, the gateway answers 401 invalid-timestamp", async (t) => {
    if (skip) return t.skip(skip);
    const r = await hawkBoth({ path: 'info/collections', sign: signed({ ts: nowSeconds() - 3600 }) });
    assert.deepEqual([r.mozilla, r.ours, r.statusString], [200, 401, 'invalid-timestamp'], r.context);
  });

  test("the same request twice: Mozilla's node serves both, the gateway refuses the second", async (t) => {
    if (skip) return t.skip(skip);
    const nonce = randomBytes(9).toString('base64url');
    const ts = nowSeconds();
    const r = await hawkBoth({ path: 'info/collections', sign: signed({ nonce, ts }), twice: true });
    assert.deepEqual([r.mozilla, r.ours], [200, 401], r.context);
  });

  test("a payload hash that does not match the body: Mozilla's node stores the body, the gateway answers 401", async (t) => {
    if (skip) return t.skip(skip);
    const r = await hawkBoth({ method: 'POST', path: 'storage/bookmarks', body: '[]', sign: signed({ payload: '[1]', contentType: 'application/json' }) });
    assert.deepEqual([r.mozilla, r.ours], [200, 401], r.context);
  });
});
