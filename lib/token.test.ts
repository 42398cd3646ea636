import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hkdfSync, randomBytes } from 'node:crypto';
import { deriveNodeSecret, derivedSecret, encodeToken, hkdf, makeToken, newSalt, nodeSecrets, parseToken, signingKey } from './token.js';
import { InvalidCredentials, InvalidTimestamp } from './errors.js';
import { readVectors } from '../tests/support/vectors.js';

const vectors = readVectors<Array<{ master_secret: string; payload_json: string; signing_key_hex: string; token: string; derived_secret: string }>>('tokenlib.json');

test('tokenlib vectors: signing key, token and derived secret byte for byte', () => {
  assert.ok(vectors.length > 0);
  for (const v of vectors) {
    assert.equal(signingKey(v.master_secret).toString('hex'), v.signing_key_hex);
    assert.equal(encodeToken(v.payload_json, v.master_secret), v.token);
    const salt = JSON.parse(v.payload_json).salt;
    assert.equal(derivedSecret(v.token, salt, v.master_secret), v.derived_secret);
    const { payload } = parseToken(v.token, [v.master_secret], 1_600_000_000);
    assert.equal(payload.uid, 12345);
  }
});

test('node secrets differ per node and are hex of half the master length', () => {
  const master = 'a'.repeat(64);
  const a = deriveNodeSecret(master, 'https://a.example');
  const b = deriveNodeSecret(master, 'https://b.example');
  assert.match(a, /^[0-9a-f]{64}$/);
  assert.notEqual(a, b);
  assert.deepEqual(nodeSecrets(['new-secret-0123456789', master], 'https://a.example')[1], a);
});

test('rotation: a token signed with an older secret still parses', () => {
  const [newest, older] = nodeSecrets(['newest-master-secret-xyz', 'older-master-secret-abc'], 'https://n.example');
  const { id, key } = makeToken({ uid: 7, node: 'https://n.example', expires: 2e9, salt: 'abcdef' }, older);
  const { payload, secret } = parseToken(id, [newest, older], 1e9);
  assert.equal(secret, older);
  assert.equal(payload.uid, 7);
  assert.equal(derivedSecret(id, 'abcdef', secret), key);
  assert.equal(key.length, 44);
});

test('parseToken refuses expired, tampered, malformed and foreign tokens', () => {
  const secret = 'some-node-secret-0123456789';
  const { id } = makeToken({ uid: 1, node: 'https://n', expires: 1000, salt: '000000' }, secret);
  assert.throws(() => parseToken(id, [secret], 1000), InvalidTimestamp);
  assert.throws(() => parseToken(id, ['another-secret-0123456789'], 0), InvalidCredentials);
  const flipped = (id[5] === 'A' ? 'B' : 'A');
  assert.throws(() => parseToken(id.slice(0, 5) + flipped + id.slice(6), [secret], 0), InvalidCredentials);
  for (const bad of ['', '!!!!', 'a', 'abc=', 'x'.repeat(5000), Buffer.alloc(40).toString('base64url')]) {
    assert.throws(() => parseToken(bad, [secret], 0), InvalidCredentials, bad.slice(0, 10));
  }
  // Well signed but not a payload we accept.
  for (const json of ['[]', '{"uid":"1","node":"n","expires":5,"salt":""}', 'not json', '{"uid":-1,"node":"n","expires":5,"salt":""}']) {
    assert.throws(() => parseToken(encodeToken(json, secret), [secret], 0), InvalidCredentials, json);
  }
});

test('unpadded tokens are accepted, non-canonical encodings are not', () => {
  const secret = 'some-node-secret-0123456789';
  const { id } = makeToken({ uid: 1, node: 'https://n', expires: 5000, salt: '000000' }, secret);
  const bare = id.replace(/=+$/, '');
  assert.equal(parseToken(bare, [secret], 0).payload.uid, 1);
});

test('salts: 6 hex characters, fresh across refills of the random pool', () => {
  const salts = Array.from({ length: 3000 }, () => newSalt());
  for (const s of salts) assert.match(s, /^[0-9a-f]{6}$/);
  // 3000 draws from 2^24 values repeat a few at most; a pool served twice would repeat ~1000.
  assert.ok(new Set(salts).size > 2990, `only ${new Set(salts).size} distinct`);
});

// Cases below were found missing by mutation testing (npm run mutation -- lib/token.ts).

test('node secret: a known answer (HKDF-SHA256 computed independently, with Python hmac)', () => {
  // 49 characters: the secret is floor(49 / 2) = 24 bytes.
  const master = 'master-secret-for-a-known-answer-0123456789abcdef';
  assert.equal(deriveNodeSecret(master, 'https://node.example'), '29ffac5aa48aaa03a66a60aaccaeb4b8f36846541ba26983');
});

test('nodeSecrets: each node and each list of masters gets its own secrets', () => {
  const masters = ['first-master-secret-0123456789', 'second-master-secret-0123456789'];
  for (const node of ['https://a.example', 'https://b.example']) {
    assert.deepEqual(nodeSecrets(masters, node), masters.map((m) => deriveNodeSecret(m, node)));
  }
  // Lists that would join to the same text are still different lists.
  const [ab, c] = ['ab'.repeat(10), 'c'.repeat(20)];
  assert.deepEqual(nodeSecrets([ab, c], 'https://a.example'), [deriveNodeSecret(ab, 'https://a.example'), deriveNodeSecret(c, 'https://a.example')]);
  assert.deepEqual(nodeSecrets([`${ab}c`, c.slice(1)], 'https://a.example'), [deriveNodeSecret(`${ab}c`, 'https://a.example'), deriveNodeSecret(c.slice(1), 'https://a.example')]);
});

/** A valid token whose id encodes exactly `bytes` bytes (the JSON and its 32-byte signature). */
function tokenOfBytes(bytes: number, secret: string): string {
  const base = { uid: 1, node: 'https://n', expires: 5000, salt: '000000', pad: '' };
  base.pad = 'x'.repeat(bytes - 32 - JSON.stringify(base).length);
  return encodeToken(JSON.stringify(base), secret);
}

/** A token whose id is exactly `length` characters (a multiple of 4, so no padding). */
function tokenOfLength(length: number, secret: string): string {
  const id = tokenOfBytes((length / 4) * 3, secret);
  assert.equal(id.length, length);
  return id;
}

test('parseToken: the length cap, and the reason given for each refusal', () => {
  const secret = 'some-node-secret-0123456789';
  const refuses = (id: string, message: RegExp, cls: typeof InvalidCredentials | typeof InvalidTimestamp = InvalidCredentials) =>
    assert.throws(() => parseToken(id, [secret], 0), (e: unknown) => e instanceof cls && message.test((e as Error).message), id.slice(0, 20));
  assert.equal(parseToken(tokenOfLength(4096, secret), [secret], 0).payload.uid, 1);
  refuses(tokenOfLength(4100, secret), /^malformed token$/);
  refuses('', /^malformed token$/);
  refuses(Buffer.alloc(32).toString('base64url'), /^malformed token$/);
  refuses(Buffer.alloc(33).toString('base64url'), /^token signature does not match$/);
  refuses(encodeToken('not json', secret), /^malformed token payload$/);
  refuses(encodeToken('{"uid":1}', secret), /^malformed token payload$/);
  const { id } = makeToken({ uid: 1, node: 'https://n', expires: 5, salt: '000000' }, secret);
  assert.throws(() => parseToken(id, [secret], 5), (e: unknown) => e instanceof InvalidTimestamp && /^token expired$/.test((e as Error).message));
});

test('parseToken: payloads of the wrong shape are refused, uid 0 is a uid', () => {
  const secret = 'some-node-secret-0123456789';
  const ok = { uid: 0, node: 'https://n', expires: 5000, salt: '000000' };
  assert.equal(parseToken(encodeToken(JSON.stringify(ok), secret), [secret], 0).payload.uid, 0);
  for (const json of ['null', '5', '"text"', JSON.stringify({ ...ok, node: 5 }), JSON.stringify({ ...ok, salt: 123 }), JSON.stringify({ ...ok, expires: '9999' })]) {
    assert.throws(() => parseToken(encodeToken(json, secret), [secret], 0), InvalidCredentials, json);
  }
});

test('parseToken: the clock defaults to now', () => {
  const secret = 'some-node-secret-0123456789';
  const now = Math.floor(Date.now() / 1000);
  const fresh = makeToken({ uid: 1, node: 'https://n', expires: now + 3600, salt: '000000' }, secret).id;
  assert.equal(parseToken(fresh, [secret]).payload.uid, 1);
  const stale = makeToken({ uid: 1, node: 'https://n', expires: now - 10, salt: '000000' }, secret).id;
  assert.throws(() => parseToken(stale, [secret]), InvalidTimestamp);
});

test('token encoding: padding at most to the 4-character boundary, canonical trailing bits', () => {
  const secret = 'some-node-secret-0123456789';
  const whole = tokenOfLength(1024, secret); // no padding needed
  assert.throws(() => parseToken(`${whole}====`, [secret], 0), InvalidCredentials);
  // An id that needs '==': one '=' is wrong, as is a third.
  const bare = tokenOfBytes(301, secret).replace(/=+$/, '');
  assert.equal(bare.length % 4, 2, 'this id needs two padding characters');
  assert.equal(parseToken(`${bare}==`, [secret], 0).payload.uid, 1);
  for (const padded of [`${bare}=`, `${bare}===`]) assert.throws(() => parseToken(padded, [secret], 0), InvalidCredentials, padded);
  // The last character carries 2 bits of data and 4 unused ones: setting an unused bit is another spelling.
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const last = alphabet.indexOf(bare.at(-1)!);
  const respelled = bare.slice(0, -1) + alphabet[last ^ 1];
  assert.deepEqual(Buffer.from(respelled, 'base64url'), Buffer.from(bare, 'base64url'), 'same bytes');
  assert.throws(() => parseToken(respelled, [secret], 0), InvalidCredentials);
});

test('hkdf: RFC 5869 test case 3 (SHA-256, no salt, no info), and cases 1 and 2 as node computes them', () => {
  // Case 3 of RFC 5869 appendix A: salt and info empty, L = 42.
  const ikm = Buffer.alloc(22, 0x0b);
  assert.equal(
    hkdf(ikm, '', '', 42).toString('hex'),
    '8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8',
  );
  // Cases 1 and 2 take binary salt and info; ours takes them as strings (UTF-8), as every caller has them.
  for (const length of [0, 1, 31, 32, 33, 42, 64, 65, 82, 255 * 32]) {
    for (const salt of ['', 'abcdef', 'x'.repeat(100)]) {
      const secret = randomBytes(40).toString('hex');
      const info = `services.mozilla.com/tokenlib/v1/derive/${randomBytes(60).toString('base64url')}`;
      const expected = Buffer.from(hkdfSync('sha256', secret, salt, info, length));
      assert.deepEqual(hkdf(secret, salt, info, length), expected, `length ${length}, salt of ${salt.length}`);
      assert.deepEqual(hkdf(Buffer.from(secret), salt, info, length), expected);
    }
  }
});

test('hkdf refuses a length RFC 5869 does not allow', () => {
  for (const length of [-1, 1.5, 255 * 32 + 1, Number.NaN]) assert.throws(() => hkdf('k', '', '', length), RangeError, String(length));
});
