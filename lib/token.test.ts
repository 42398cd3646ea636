import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deriveNodeSecret, derivedSecret, encodeToken, makeToken, newSalt, nodeSecrets, parseToken, signingKey } from './token.js';
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
