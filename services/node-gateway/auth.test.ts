import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequest, InvalidCredentials, InvalidTimestamp, ProtocolError, ServiceUnavailable, Unauthorized } from '../../lib/errors.js';
import { hawkHeader, parseHawkHeader, payloadHash, timestampMac } from '../../lib/hawk.js';
import { makeToken, nodeSecrets, type TokenPayload } from '../../lib/token.js';
import { acceptNonce, authenticate, checkPathUid, checkPayloadHash, checkTarget, guardedNode, rememberNonce, tokenCache, verifyToken, type AuthRequest } from './auth.js';
import { NonceCache } from './nonces.js';

const NODE_URL = 'https://node-1.example:8443';
const MASTERS = ['newest-master-secret-0123456789', 'older-master-secret-0123456789'];
const NOW_MS = 1_700_000_000_000;
const NOW = NOW_MS / 1000;
const node = guardedNode(NODE_URL, MASTERS, 'derived');

function token(overrides: Partial<TokenPayload> = {}, secret = node.secrets[0]): { id: string; key: string } {
  return makeToken({ uid: 42, node: NODE_URL, expires: NOW + 300, salt: 'a1b2c3', ...overrides }, secret);
}

function signed(
  t: { id: string; key: string },
  o: { method?: string; target?: string; ts?: number; nonce?: string; url?: string; payload?: string; contentType?: string } = {},
): AuthRequest {
  const method = o.method ?? 'GET';
  const target = o.target ?? '/1.5/42/info/collections';
  const authorization = hawkHeader({
    id: t.id,
    key: t.key,
    method,
    url: o.url ?? NODE_URL + target,
    ts: o.ts ?? NOW,
    nonce: o.nonce,
    payload: o.payload,
    contentType: o.contentType,
  });
  return { method, target, authorization };
}

function run(req: AuthRequest, nowMs = NOW_MS) {
  return authenticate(req, node, { skewSeconds: 60, nowMs });
}

function failsWith(fn: () => unknown, cls: abstract new (...args: never[]) => ProtocolError, pattern: RegExp): ProtocolError {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof cls, `expected ${cls.name}, got ${String(caught)}`);
  assert.match((caught as Error).message, pattern);
  return caught as ProtocolError;
}

function fails(req: AuthRequest, cls: typeof ProtocolError, pattern: RegExp): ProtocolError {
  return failsWith(() => run(req), cls, pattern);
}

test('guardedNode: host and port of the public URL, the node secrets', () => {
  assert.deepEqual({ ...node, secrets: node.secrets.length }, { url: NODE_URL, host: 'node-1.example', port: 8443, secrets: 2 });
  assert.equal(guardedNode('https://n.example', MASTERS, 'derived').port, 443);
  assert.equal(guardedNode('http://n.example', MASTERS, 'derived').port, 80);
  assert.deepEqual(node.secrets, nodeSecrets(MASTERS, NODE_URL));
});

test("guardedNode with NODE_SECRETS: its node's secrets as given, which verify that node's tokens and no other's", () => {
  const held = guardedNode(NODE_URL, { nodeSecrets: nodeSecrets(MASTERS, NODE_URL) }, 'derived');
  assert.deepEqual(held.secrets, node.secrets);
  assert.deepEqual(guardedNode(NODE_URL, { masterSecrets: MASTERS }, 'derived').secrets, node.secrets);
  const newestOnly = guardedNode(NODE_URL, { nodeSecrets: [node.secrets[0]] }, 'derived');
  const as = (n: typeof node, t: { id: string; key: string }) => authenticate(signed(t), n, { skewSeconds: 60, nowMs: NOW_MS });
  assert.equal(as(newestOnly, token()).uid, 42);
  failsWith(() => as(newestOnly, token({}, node.secrets[1])), InvalidCredentials, /signature/);
  failsWith(() => as(held, token({}, nodeSecrets(MASTERS, 'https://node-2.example:8443')[0])), InvalidCredentials, /signature/);
});

test('TOKEN_SECRETS=master: the node accepts tokens signed with the master secrets themselves, and no longer the derived ones', () => {
  const master = guardedNode(NODE_URL, MASTERS, 'master');
  assert.deepEqual(master.secrets, MASTERS);
  const as = (n: typeof node, t: { id: string; key: string }) => authenticate(signed(t), n, { skewSeconds: 60, nowMs: NOW_MS });
  for (const secret of MASTERS) assert.equal(as(master, token({}, secret)).uid, 42);
  failsWith(() => as(master, token({}, node.secrets[0])), InvalidCredentials, /signature/);
  failsWith(() => as(node, token({}, MASTERS[0])), InvalidCredentials, /signature/);
});

test('a good request yields the caller', () => {
  const t = token();
  const caller = run(signed(t));
  assert.equal(caller.uid, 42);
  assert.equal(caller.node, NODE_URL);
  assert.equal(caller.key, t.key);
  assert.equal(caller.hawk.id, t.id);
  // Paths exactly at the uid, with a query, and deeper.
  for (const target of ['/1.5/42', '/1.5/42?x=1', '/1.5/42/storage/tabs?full=1&a=%20']) run(signed(t, { target }));
});

test('rotation: a token from an older master secret is accepted', () => {
  assert.equal(run(signed(token({}, node.secrets[1])))?.uid, 42);
});

test('the token: bad signature, flipped byte, another node, expired', () => {
  fails(signed(token({}, nodeSecrets(['some-other-master-secret-0123'], NODE_URL)[0])), InvalidCredentials, /signature/);
  const t = token();
  const i = 10;
  const flipped = { id: t.id.slice(0, i) + (t.id[i] === 'A' ? 'B' : 'A') + t.id.slice(i + 1), key: t.key };
  fails(signed(flipped), InvalidCredentials, /signature|malformed/);
  // Signed with this node's secret but naming another node.
  fails(signed(token({ node: 'https://node-2.example:8443' })), InvalidCredentials, /another node/);
  // A token minted for another node with that node's secret.
  const foreign = makeToken({ uid: 42, node: 'https://node-2.example', expires: NOW + 300, salt: 'a1b2c3' }, nodeSecrets(MASTERS, 'https://node-2.example')[0]);
  fails(signed(foreign), InvalidCredentials, /signature/);
  fails(signed(token({ expires: NOW - 1 })), InvalidTimestamp, /expired/);
});

test('the MAC covers method, target, public host and port, and the key', () => {
  const t = token();
  const good = signed(t);
  fails({ ...good, method: 'DELETE' }, InvalidCredentials, /MAC/);
  fails({ ...good, target: '/1.5/42/info/quota' }, InvalidCredentials, /MAC/);
  fails(signed(t, { url: 'https://node-1.example/1.5/42/info/collections' }), InvalidCredentials, /MAC/);
  fails(signed(t, { url: 'https://127.0.0.1:8443/1.5/42/info/collections' }), InvalidCredentials, /MAC/);
  fails(signed({ id: t.id, key: token({ salt: 'ffffff' }).key }), InvalidCredentials, /MAC/);
  // A forged hash attribute breaks the MAC too.
  const withHash = signed(t, { method: 'POST', payload: 'x', contentType: 'text/plain' });
  const forged = withHash.authorization!.replace(/hash="[^"]+"/, `hash="${payloadHash('y', 'text/plain')}"`);
  fails({ ...withHash, authorization: forged }, InvalidCredentials, /MAC/);
});

test('a stale timestamp is 401 with a keyed server time', () => {
  const t = token();
  for (const ts of [NOW - 61, NOW + 61]) {
    const err = fails(signed(t, { ts }), InvalidTimestamp, /stale/);
    const challenge = err.headers['WWW-Authenticate'];
    const m = /^Hawk ts="(\d+)", tsm="([^"]+)", error="Stale timestamp"$/.exec(challenge);
    assert.ok(m, challenge);
    assert.equal(Number(m[1]), NOW);
    assert.equal(m[2], timestampMac(t.key, NOW));
  }
  // Within the skew on either side.
  run(signed(t, { ts: NOW - 60 }));
  run(signed(t, { ts: NOW + 60 }));
});

test('a stale timestamp under a bad MAC reveals no clock', () => {
  const t = token();
  const req = signed(t, { ts: NOW - 600 });
  const err = fails({ ...req, method: 'PUT' }, InvalidCredentials, /MAC/);
  assert.equal(err.headers['WWW-Authenticate'], undefined);
});

test('rememberNonce: new once, a replay 401, a full share or cache 503 + Retry-After', () => {
  const t = token();
  const nonces = new NonceCache({ capacity: 3, perToken: 2, skewSeconds: 60 }, NOW_MS);
  const hawk = (nonce: string, id = t.id) => parseHawkHeader(signed({ id, key: t.key }, { nonce }).authorization);
  rememberNonce(hawk('abc123'), nonces, NOW_MS);
  failsWith(() => rememberNonce(hawk('abc123'), nonces, NOW_MS), InvalidCredentials, /nonce already used/);
  rememberNonce(hawk('second'), nonces, NOW_MS);
  const full = failsWith(() => rememberNonce(hawk('third'), nonces, NOW_MS), ServiceUnavailable, /share/);
  assert.equal(full.status, 503);
  assert.equal(full.headers['Retry-After'], '61');
  rememberNonce(hawk('n', 'another-token'), nonces, NOW_MS);
  failsWith(() => rememberNonce(hawk('n', 'yet-another'), nonces, NOW_MS), ServiceUnavailable, /cache is full/);
});

test('acceptNonce: every verdict of either store; a refusal for want of room or knowledge is 503 with its Retry-After', () => {
  acceptNonce({ outcome: 'new' });
  failsWith(() => acceptNonce({ outcome: 'replayed' }), InvalidCredentials, /nonce already used/);
  for (const [outcome, why] of [['token-full', /share/], ['cache-full', /cache is full/], ['unknown', /lost nonces/]] as const) {
    const e = failsWith(() => acceptNonce({ outcome, retryAfter: 4 }), ServiceUnavailable, why);
    assert.equal(e.headers['Retry-After'], '4');
  }
});

test('authenticate records no nonce: a refused request cannot use up the cache', () => {
  const t = token();
  const req = signed(t, { nonce: 'abc123' });
  // The same header authenticates as often as asked; replay protection is rememberNonce's.
  assert.equal(run(req).uid, 42);
  assert.equal(run(req).uid, 42);
});

test('the path must be under the token uid', () => {
  const t = token();
  for (const target of ['/1.5/43/info/collections', '/1.5/420', '/1.5/4', '/1.5', '/', '/1.5//42', '//42/x', '/1.5/%343', '/1.5/4%32%30']) {
    fails(signed(t, { target }), InvalidCredentials, /not under this token/);
  }
  // Compared after decoding, as the application will read it.
  for (const target of ['/1.5/%342', '/1.5/%34%32/x']) assert.equal(run(signed(t, { target })).uid, 42);
});

test('checkTarget refuses targets an upstream could resolve elsewhere', () => {
  for (const target of ['http://evil.example/1.5/42', '*', '1.5/42']) assert.throws(() => checkTarget(target), /absolute path/);
  const refusedAs: Array<[string, RegExp]> = [
    ['/1.5/42/../43', /segments/],
    ['/1.5/42/./x', /segments/],
    ['/1.5/42/%2e%2E/43', /segments/],
    ['/1.5/42/.%2e', /segments/],
    ['/..', /segments/],
    ['/1.5/42/%2E', /segments/],
    ['/1.5/42/..%2F43', /encoded "\/"/],
    ['/1.5/42/%2e%2e%2f43', /encoded "\/"/],
    ['/1.5/42%2f..%2f43', /encoded "\/"/],
    ['/1.5/42\\..\\43', /backslash/],
    ['/1.5/42/..%5c43', /backslash/],
    ['/1.5/42/..%5C', /backslash/],
    ['/1.5/42/..;/43', /";"/],
    ['/1.5/42;x=1', /";"/],
    ['/1.5/42/%3b', /";"/],
    ['/1.5/42/a%00b', /NUL/],
    ['/1.5/42/%zz', /percent-encoded/],
    ['/1.5/42/%e2%82', /percent-encoded/],
    ['/1.5/42/x#/../43', /fragment/],
  ];
  for (const [target, message] of refusedAs) {
    assert.throws(() => checkTarget(target), (e: unknown) => e instanceof BadRequest && message.test(e.message), target);
  }
  // Dots inside segments, encoded ordinary characters and anything in the query are fine.
  for (const target of ['/1.5/42/a.b', '/1.5/42/...', '/1.5/42?x=../..;%2f', '/1.5/42/%41%20b', '/1.5/42/%E2%82%AC']) checkTarget(target);
  assert.deepEqual(checkTarget('/1.5/%34%32/a%20b?q=%2f'), ['', '1.5', '42', 'a b']);
  // The check comes first: a bad target is 400 whatever the header.
  fails({ method: 'GET', target: '/1.5/42/../43', authorization: undefined }, BadRequest, /segments/);
  fails({ method: 'GET', target: '/1.5/42/..%2F43', authorization: undefined }, BadRequest, /encoded/);
});

test('checkPathUid compares the exact second decoded segment', () => {
  checkPathUid(['', '1.5', '7'], 7);
  checkPathUid(['', '1.5', '7', ''], 7);
  checkPathUid(['', 'x', '7'], 7);
  assert.throws(() => checkPathUid(['', '1.5', '07'], 7), InvalidCredentials);
  assert.throws(() => checkPathUid(['', '', '7'], 7), InvalidCredentials);
  assert.throws(() => checkPathUid(['', '1.5'], 7), InvalidCredentials);
});

test('header problems surface as the parser reports them', () => {
  fails({ method: 'GET', target: '/1.5/42', authorization: undefined }, Unauthorized, /missing/);
  fails({ method: 'GET', target: '/1.5/42', authorization: 'Hawk id="x"' }, BadRequest, /missing Hawk attribute "ts"/);
  fails({ method: 'GET', target: '/1.5/42', authorization: 'Hawk id="not-a-token", ts="1", nonce="n", mac="m"' }, InvalidCredentials, /malformed token/);
});

test('checkPayloadHash', () => {
  const hash = payloadHash('{"a":1}', 'application/json');
  checkPayloadHash(Buffer.from('{"a":1}'), 'application/json; charset=utf-8', hash);
  assert.throws(() => checkPayloadHash(Buffer.from('{"a":2}'), 'application/json', hash), InvalidCredentials);
  assert.throws(() => checkPayloadHash(Buffer.from('{"a":1}'), 'text/plain', hash), InvalidCredentials);
  assert.throws(() => checkPayloadHash(Buffer.from('{"a":1}'), undefined, hash), InvalidCredentials);
  assert.equal(parseHawkHeader(signed(token(), { method: 'POST', payload: '' }).authorization).hash, payloadHash(''));
});

test('verified tokens are cached by id, expiry still checked on every use', () => {
  const tokens = tokenCache(100);
  const t = token({ expires: NOW + 10 });
  const first = verifyToken(t.id, node, NOW_MS, tokens);
  assert.equal(first.key, t.key);
  assert.equal(tokens.size, 1);
  assert.equal(verifyToken(t.id, node, NOW_MS + 1000, tokens), first, 'served from the cache');
  assert.throws(() => verifyToken(t.id, node, NOW_MS + 10_000, tokens), InvalidTimestamp);
  // Refused tokens are not remembered.
  assert.throws(() => verifyToken(token({ node: 'https://other.example' }).id, node, NOW_MS, tokens), InvalidCredentials);
  assert.equal(tokens.size, 1);
  // And through authenticate: the same caller, request after request.
  for (let i = 0; i < 3; i++) assert.equal(authenticate(signed(t), node, { skewSeconds: 60, tokens, nowMs: NOW_MS }).uid, 42);
});

// Found missing by mutation testing (npm run mutation -- services/node-gateway/auth.ts).
test('a refused target points at the path; a body without a content type is hashed with an empty one', () => {
  assert.throws(
    () => checkTarget('/1.5/42/../43'),
    (e: unknown) => e instanceof BadRequest && assert.deepEqual(e.detail(), { location: 'url', name: 'path', description: e.message }) === undefined,
  );
  checkPayloadHash(Buffer.from('x'), undefined, payloadHash('x', ''));
  assert.throws(
    () => checkPayloadHash(Buffer.from('y'), undefined, payloadHash('x', '')),
    (e: unknown) => e instanceof InvalidCredentials && e.message === 'payload hash does not match the body',
  );
});
