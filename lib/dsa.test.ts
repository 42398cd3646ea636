// BrowserID DSA keys (DESIGN §9.5): parsing and its refusals, the SPKI we build
// for node:crypto, and the signature encoding; keys made by node:crypto.
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import {
  browserIdDsaFromKeyObject,
  DSA_SIZES,
  DsaPublicKey,
  dsaKeyObject,
  dsaSignature,
  dsaSpki,
  isPrime,
  modPow,
  parseDsaPublicKey,
  type BrowserIdDsaPublicKey,
} from './dsa.js';

interface Made {
  privateKey: KeyObject;
  publicKey: KeyObject;
  ds: BrowserIdDsaPublicKey;
}
const keys: Record<'DS128' | 'DS256', Made> = {} as never;

before(() => {
  for (const [alg, modulusLength, divisorLength] of [['DS128', 1024, 160], ['DS256', 2048, 256]] as const) {
    const { privateKey, publicKey } = generateKeyPairSync('dsa', { modulusLength, divisorLength });
    keys[alg] = { privateKey, publicKey, ds: browserIdDsaFromKeyObject(publicKey) };
  }
});

const hex = (v: bigint) => v.toString(16);
const big = (h: string) => BigInt(`0x${h}`);

describe('parseDsaPublicKey', () => {
  test('accepts both sizes, picking the algorithm from them; hex in either case', () => {
    for (const alg of ['DS128', 'DS256'] as const) {
      const k = parseDsaPublicKey({ ...keys[alg].ds });
      assert.equal(k.alg, alg);
      assert.equal(k.y, big(keys[alg].ds.y));
    }
    const { ds } = keys.DS128;
    assert.equal(parseDsaPublicKey({ ...ds, p: ds.p.toUpperCase() }).p, big(ds.p));
  });

  test('malformed hex → TypeError naming the member', () => {
    const { ds } = keys.DS128;
    for (const [name, v] of [['p', undefined], ['q', 7], ['g', ''], ['y', 'xyz'], ['p', `0x${ds.p}`], ['q', ` ${ds.q}`], ['g', '1'.repeat(513)], ['q', 'f'.repeat(65)], ['y', `-${ds.y}`]] as const) {
      assert.throws(() => parseDsaPublicKey({ ...ds, [name]: v }), (e) => e instanceof TypeError && e.message.includes(`"${name}"`), `${name}=${String(v).slice(0, 20)}`);
    }
  });

  test('sizes other than 1024/160 and 2048/256 → TypeError', () => {
    const bits = (n: number) => hex((1n << BigInt(n - 1)) | 1n);
    const { ds } = keys.DS128;
    for (const [p, q] of [[1024, 256], [2048, 160], [1023, 160], [1024, 159], [2048, 224], [512, 160], [2047, 256]]) {
      assert.throws(() => parseDsaPublicKey({ ...ds, p: bits(p), q: bits(q) }), /1024 and 160 bits/, `${p}/${q}`);
    }
    // Larger ones are refused by their length before any arithmetic.
    assert.throws(() => parseDsaPublicKey({ ...ds, p: bits(3072), q: bits(256) }), /"p" must be a hex string of at most 512 digits/);
  });

  test('g or y outside 1 < v < p → TypeError', () => {
    const { ds } = keys.DS256;
    const p = big(ds.p);
    for (const v of [0n, 1n, p, p + 1n]) {
      assert.throws(() => parseDsaPublicKey({ ...ds, g: hex(v) }), /"g" must be between/, `g=${v}`);
      assert.throws(() => parseDsaPublicKey({ ...ds, y: hex(v) }), /"y" must be between/, `y=${v}`);
    }
  });

  test('q not dividing p - 1, or g / y outside the subgroup of order q (e.g. p - 1, of order 2) → TypeError', () => {
    const { ds } = keys.DS128;
    const [p, q] = [big(ds.p), big(ds.q)];
    assert.throws(() => parseDsaPublicKey({ ...ds, q: hex(q + 2n) }), /q must divide p - 1/);
    assert.throws(() => parseDsaPublicKey({ ...ds, g: hex(p - 1n) }), /"g" must generate/);
    assert.throws(() => parseDsaPublicKey({ ...ds, y: hex(p - 1n) }), /"y" must lie/);
    // 2 is a generator of the whole group for most p, so not of order q.
    const two = modPow(2n, q, p) === 1n ? 3n : 2n;
    assert.throws(() => parseDsaPublicKey({ ...ds, y: hex(two) }), /"y" must lie/);
  });
});

/**
 * A key of the right sizes with q | p − 1 and g = y = p − 1 (of order 2), which
 * (p − 1)^q ≡ 1 admits when q is even; p is not prime and no private key exists.
 */
function evenQKey(alg: 'DS128' | 'DS256', q = (1n << BigInt(DSA_SIZES[alg].qBits - 1)) + 2n): BrowserIdDsaPublicKey {
  const p = q * (1n << BigInt(DSA_SIZES[alg].pBits - DSA_SIZES[alg].qBits)) + 1n;
  return { algorithm: 'DS', p: hex(p), q: hex(q), g: hex(p - 1n), y: hex(p - 1n) };
}

describe('parseDsaPublicKey: q must be an odd prime', () => {
  test('q = 2^159 + 2 or 2^255 + 2 with g = y = p − 1 → TypeError; node:crypto would verify r = 1 for it', () => {
    for (const alg of ['DS128', 'DS256'] as const) {
      const ds = evenQKey(alg);
      assert.throws(() => parseDsaPublicKey({ ...ds }), /q must be an odd prime/, alg);
      // What the refusal prevents: with no private key, r = s = 1 verifies every message whose digest is odd.
      const { digest, qBits } = DSA_SIZES[alg];
      const key = dsaKeyObject(new DsaPublicKey(alg, big(ds.p), big(ds.q), big(ds.g), big(ds.y)));
      const one = Buffer.concat([Buffer.alloc(qBits / 8 - 1), Buffer.from([1])]);
      const forged = Buffer.concat([one, one]);
      let message = 0;
      while ((createHash(digest).update(String(message)).digest().at(-1)! & 1) === 0) message++;
      assert.equal(verify(digest, Buffer.from(String(message)), { key, dsaEncoding: 'ieee-p1363' }, forged), true, `${alg}: the forgery the check stops`);
    }
  });

  test('an odd composite q dividing p − 1 → TypeError, before g and y are looked at', () => {
    // 2^159 + 1 and 2^255 + 1 are divisible by 3.
    for (const alg of ['DS128', 'DS256'] as const) {
      const ds = evenQKey(alg, (1n << BigInt(DSA_SIZES[alg].qBits - 1)) + 1n);
      assert.throws(() => parseDsaPublicKey({ ...ds }), /q must be an odd prime/, alg);
    }
  });

  test('isPrime: small numbers, the generated keys’ q, q − 1 and q²; the same answer when asked again', () => {
    assert.deepEqual([1n, 2n, 3n, 4n, 9n, 97n, 561n].map((n) => isPrime(n)), [false, true, true, false, false, true, false]);
    for (const alg of ['DS128', 'DS256'] as const) {
      const q = big(keys[alg].ds.q);
      for (let i = 0; i < 2; i++) {
        assert.equal(isPrime(q), true, alg);
        assert.equal(isPrime(q - 1n), false, alg);
        assert.equal(isPrime(q * q), false, alg);
      }
    }
  });
});

describe('dsaSpki / dsaKeyObject', () => {
  test('byte for byte the SubjectPublicKeyInfo node:crypto exports, for both sizes; the KeyObject verifies', () => {
    for (const alg of ['DS128', 'DS256'] as const) {
      const { publicKey, privateKey, ds } = keys[alg];
      const k = parseDsaPublicKey({ ...ds });
      assert.deepEqual(dsaSpki(k), publicKey.export({ format: 'der', type: 'spki' }), alg);
      const digest = alg === 'DS128' ? 'sha1' : 'sha256';
      const signature = sign(digest, Buffer.from('m'), { key: privateKey, dsaEncoding: 'ieee-p1363' });
      assert.equal(verify(digest, Buffer.from('m'), { key: dsaKeyObject(k), dsaEncoding: 'ieee-p1363' }, signature), true, alg);
      assert.equal(verify(digest, Buffer.from('n'), { key: dsaKeyObject(k), dsaEncoding: 'ieee-p1363' }, signature), false, `${alg}: another message`);
    }
  });
});

describe('dsaSpki: DER edge cases, round-tripped through node:crypto', () => {
  test('integers of 127, 128, 255 and 256 bytes (the length-form boundaries), with and without a zero prefix, and of odd hex length', () => {
    const { ds } = keys.DS256;
    const [p, q, g] = [big(ds.p), big(ds.q), big(ds.g)];
    // y is not checked here (no parse): only its encoding is. Each value's DER content length is named.
    const values: Array<[bigint, number]> = [
      [0x123n, 2],
      [(1n << BigInt(8 * 127 - 2)) + 1n, 127],
      [1n << BigInt(8 * 127 - 1), 128],
      [(1n << BigInt(8 * 128 - 4)) + 5n, 128],
      [1n << BigInt(8 * 255 - 1), 256],
      [(1n << BigInt(8 * 255 - 2)) + 3n, 255],
      [(1n << BigInt(8 * 256 - 2)) + 7n, 256],
    ];
    for (const [y, contentLength] of values) {
      const der = dsaSpki(new DsaPublicKey('DS256', p, q, g, y));
      const key = createPublicKey({ key: der, format: 'der', type: 'spki' });
      assert.deepEqual(key.export({ format: 'der', type: 'spki' }), der, `y of ${contentLength} bytes`);
      assert.deepEqual(browserIdDsaFromKeyObject(key), { algorithm: 'DS', p: ds.p, q: ds.q, g: ds.g, y: hex(y) }, `y of ${contentLength} bytes`);
      const integer = Buffer.from(y.toString(16).padStart(2 * contentLength, '0'), 'hex');
      assert.deepEqual(der.subarray(der.length - contentLength), integer, `y of ${contentLength} bytes ends the DER`);
    }
  });
});

describe('dsaSignature', () => {
  test('exactly 2 × |q| bytes stays; shorter is left-padded (as PyBrowserID reads it); longer → null', () => {
    const s40 = Buffer.alloc(40, 7);
    assert.equal(dsaSignature(s40, 'DS128'), s40);
    assert.deepEqual(dsaSignature(Buffer.from([1, 2]), 'DS128'), Buffer.concat([Buffer.alloc(38), Buffer.from([1, 2])]));
    assert.equal(dsaSignature(Buffer.alloc(41, 7), 'DS128'), null);
    assert.equal(dsaSignature(s40, 'DS256')?.length, 64);
    assert.equal(dsaSignature(Buffer.alloc(65), 'DS256'), null);
  });
});

describe('modPow', () => {
  test('small cases', () => {
    assert.equal(modPow(4n, 13n, 497n), 445n);
    assert.equal(modPow(5n, 0n, 7n), 1n);
    assert.equal(modPow(10n, 3n, 7n), 6n);
  });
});
