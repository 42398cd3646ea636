import { test, describe, before } from 'node:test';
import assert from 'node:assert/strict';
import {
  algorithmsForKey,
  assertionClaims,
  certificateClaims,
  cheapRsaKey,
  checkAtOnce,
  cachedCertificateBytes,
  CERTIFICATE_CACHE_BYTES,
  checkTimes,
  createAssertionVerifier,
  decodeJws,
  importVerifyKey,
  isAcceptableRsaExponent,
  LruCache,
  MAX_AUTHORIZATION_LENGTH,
  parseAuthorization,
  padRsaSignature,
  signedBy,
  parseGeneration,
  splitBundle,
  userPublicKey,
  type AssertionVerifier,
} from './assertion.js';
import { base64UrlDecode, critProblem } from './jws.js';
import { createPublicKey, generateKeyPairSync, KeyObject, sign, verify } from 'node:crypto';
import { DsaPublicKey, dsaKeyObject, parseDsaPublicKey } from '../../lib/dsa.js';
import { ConfigError, InvalidCredentials, InvalidGeneration, InvalidTimestamp, Unauthorized } from '../../lib/errors.js';
import type { JsonWebKeyLike } from '../../lib/config.js';
import { bundle, generateDsaKey, generateKey, legacyRsaPublicKey, signAssertion, signCertificate, signJws, type DsaKeyPair, type KeyPair } from '../../lib/idp.js';
import { forgeExponentOneJws, signUnencodedJws } from './testkit.js';

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const jws = (header: unknown, payload: unknown, sig = 'c2ln') => `${b64(header)}.${b64(payload)}.${sig}`;

/**
 * A JWS from `signNth` whose signature starts with a zero byte, with that byte
 * left out (an integer written without it, as PyBrowserID writes DSA signatures).
 */
async function withShortSignature(signNth: (i: number) => Promise<string>): Promise<string> {
  for (let i = 0; i < 20_000; i++) {
    const [head, payload, sig] = (await signNth(i)).split('.');
    const bytes = Buffer.from(sig, 'base64url');
    if (bytes[0] === 0) return `${head}.${payload}.${bytes.subarray(1).toString('base64url')}`;
  }
  throw new Error('no signature with a leading zero byte in 20 000 tries');
}

describe('parseAuthorization', () => {
  test('splits scheme, certificate and assertion; scheme is case-insensitive', () => {
    assert.deepEqual(parseAuthorization('Assertion a.b.c~d.e.f'), { scheme: 'Assertion', certificate: 'a.b.c', assertion: 'd.e.f' });
    assert.equal(parseAuthorization('browserid x~y').scheme, 'BrowserID');
    assert.equal(parseAuthorization('BrowserID x~y ').assertion, 'y');
  });
  test('missing, unparseable, unknown scheme or no credentials → Unauthorized', () => {
    for (const h of [undefined, '', '   ', 'Assertion a~b c', '~~~', 'Bearer abc', 'Hawk id="x"', 'Assertion', 'Assertion   ']) {
      assert.throws(() => parseAuthorization(h), Unauthorized, String(h));
    }
  });
  test('wrong number of bundle parts or oversized credentials → InvalidCredentials', () => {
    for (const h of ['Assertion abc', 'Assertion a~b~c', 'Assertion ~b', 'Assertion a~', `Assertion ${'a'.repeat(20_000)}~b`]) {
      assert.throws(() => parseAuthorization(h), InvalidCredentials, h.slice(0, 40));
    }
  });
  test('the length is checked before any parsing: an oversized header of any shape → InvalidCredentials', () => {
    // Each would be Unauthorized (unparseable) if it were parsed first.
    for (const h of [`Assertion${' '.repeat(MAX_AUTHORIZATION_LENGTH)}x y`, `Assertion ${'\t'.repeat(MAX_AUTHORIZATION_LENGTH)}`, ':'.repeat(MAX_AUTHORIZATION_LENGTH + 1)]) {
      assert.throws(() => parseAuthorization(h), (e) => e instanceof InvalidCredentials && /too large/.test(e.message), h.slice(0, 12));
    }
    assert.throws(() => parseAuthorization(`Assertion ${'a'.repeat(MAX_AUTHORIZATION_LENGTH - 10)}`), InvalidCredentials, 'just under: parsed, one part');
  });
  test('16 KB adversarial blank runs (the old backtracking regex’s worst case) are refused as unparseable', () => {
    const blanks = ' \t'.repeat(4000);
    for (const h of [`Assertion${' '.repeat(16_000)}x y`, `Assertion${blanks}x${blanks}y`, `Assertion x${blanks}${blanks}\u00a0`, `Assertion${blanks}a~b${blanks}c`]) {
      assert.throws(() => parseAuthorization(h), (e) => e instanceof Unauthorized && /unparseable/.test(e.message), JSON.stringify(h.slice(-8)));
    }
    assert.throws(() => parseAuthorization(`Assertion${blanks}${blanks}`), /missing assertion/);
    assert.equal(parseAuthorization(`Assertion${blanks.slice(0, 4000)}a~b${blanks.slice(0, 4000)}`).assertion, 'b');
  });
  test('an old-style bundle (PyBrowserID new_style=False): base64url of {"certificates": [c], "assertion": a}', () => {
    const old = b64({ certificates: ['a.b.c'], assertion: 'd.e.f' });
    assert.deepEqual(parseAuthorization(`BrowserID ${old}`), { scheme: 'BrowserID', certificate: 'a.b.c', assertion: 'd.e.f' });
    assert.deepEqual(splitBundle(old), { certificate: 'a.b.c', assertion: 'd.e.f' });
  });
  test('old-style bundles that are not one certificate and one assertion → InvalidCredentials, as a bad new-style one', () => {
    const bad = [
      b64({ certificates: ['a.b.c', 'g.h.i'], assertion: 'd.e.f' }),
      b64({ certificates: [], assertion: 'd.e.f' }),
      b64({ certificates: 'a.b.c', assertion: 'd.e.f' }),
      b64({ certificates: [7], assertion: 'd.e.f' }),
      b64({ certificates: [''], assertion: 'd.e.f' }),
      b64({ certificates: ['a.b.c'], assertion: '' }),
      b64({ certificates: ['a.b.c'] }),
      b64({ certificates: ['a.b.c'], assertion: { alg: 'x' } }),
      b64(['a.b.c', 'd.e.f']),
      b64('{"certificates": ["a.b.c"], "assertion": "d.e.f"'),
      `${b64({ certificates: ['a.b.c'], assertion: 'd.e.f' })}=`,
      Buffer.from(JSON.stringify({ certificates: ['a.b.c'], assertion: 'd.e.f' })).toString('base64'),
    ];
    for (const c of bad) assert.throws(() => splitBundle(c), (e) => e instanceof InvalidCredentials && /<certificate>~<assertion>/.test(e.message), c);
    assert.throws(() => splitBundle(b64({ certificates: ['a~b'], assertion: 'd.e.f' })), InvalidCredentials, 'no "~" inside either part');
  });
  test('the scheme must be followed by a blank', () => {
    for (const h of ['Assertion:a~b', 'Assertion\u00a0a~b', 'Assertion\na~b', '1Assertion a~b']) {
      assert.throws(() => parseAuthorization(h), /unparseable/, JSON.stringify(h));
    }
  });
});

describe('base64UrlDecode', () => {
  test('accepts canonical base64url only', () => {
    assert.equal(base64UrlDecode('aGk')?.toString(), 'hi');
    assert.equal(base64UrlDecode('')?.length, 0);
    assert.equal(base64UrlDecode('aGk='), null, 'padding');
    assert.equal(base64UrlDecode('a+/b'), null, 'standard alphabet');
    assert.equal(base64UrlDecode('abcde'), null, 'impossible length');
    assert.equal(base64UrlDecode('aGl'), null, 'non-canonical trailing bits');
  });
});

describe('decodeJws', () => {
  test('decodes header and payload of an accepted algorithm', () => {
    const d = decodeJws(jws({ alg: 'ES256' }, { a: 1 }), 'certificate');
    assert.equal(d.alg, 'ES256');
    assert.deepEqual(d.payload, { a: 1 });
  });
  test('malformed structure → InvalidCredentials', () => {
    const cases = [
      'a.b',
      'a.b.c.d',
      `${b64({ alg: 'ES256' })}.${b64({})}.`,
      `!!!.${b64({})}.c2ln`,
      `${b64('{not json')}.${b64({})}.c2ln`,
      `${b64([1])}.${b64({})}.c2ln`,
      `${b64('null')}.${b64({})}.c2ln`,
      `${b64({ alg: 'ES256' })}.${b64('[]')}.c2ln`,
      `${b64({ alg: 'ES256' })}.${b64('"str"')}.c2ln`,
      `${b64({ alg: 'ES256' })}.${b64({})}.c2l=`,
    ];
    for (const c of cases) assert.throws(() => decodeJws(c, 'certificate'), InvalidCredentials, c);
  });
  test('keeps what the signature covers and the signature bytes', () => {
    const d = decodeJws(jws({ alg: 'ES256' }, { a: 1 }), 'certificate');
    assert.equal(d.signingInput, `${b64({ alg: 'ES256' })}.${b64({ a: 1 })}`);
    assert.equal(d.signature.toString(), 'sig');
  });
  test('a header that is not UTF-8, or with an unacceptable "crit" → InvalidCredentials', () => {
    const latin1 = Buffer.from('{"alg":"ES256","kid":"\xe9"}', 'latin1').toString('base64url');
    assert.throws(() => decodeJws(`${latin1}.${b64({})}.c2ln`, 'certificate'), InvalidCredentials);
    assert.throws(() => decodeJws(jws({ alg: 'ES256', crit: ['exp'], exp: 1 }, {}), 'assertion'), /not supported/);
  });
  test('refuses alg none, HMAC, other or missing algorithms', () => {
    for (const alg of ['none', 'HS256', 'RS512', 'PS256', 'ES384', 7, undefined]) {
      assert.throws(() => decodeJws(jws({ alg }, {}), 'assertion'), InvalidCredentials, String(alg));
    }
  });
});

describe('critProblem', () => {
  test('no crit, or crit b64 with a boolean b64, is fine', () => {
    assert.equal(critProblem({ alg: 'ES256' }), null);
    assert.equal(critProblem({ alg: 'ES256', b64: 'ignored without crit' }), null);
    assert.equal(critProblem({ crit: ['b64'], b64: true }), null);
  });
  test('b64: false (an unencoded payload) is refused, with or without crit', () => {
    assert.match(critProblem({ crit: ['b64'], b64: false }) ?? '', /unencoded payload/);
    assert.match(critProblem({ alg: 'ES256', b64: false }) ?? '', /unencoded payload/);
    assert.throws(() => decodeJws(jws({ alg: 'ES256', crit: ['b64'], b64: false }, {}), 'assertion'), InvalidCredentials);
  });
  test('malformed, unknown, missing or mistyped extensions', () => {
    for (const crit of ['b64', [], [''], [7], {}]) assert.match(critProblem({ crit, b64: true }) ?? '', /must be an array/, JSON.stringify(crit));
    assert.match(critProblem({ crit: ['exp'], exp: 1 }) ?? '', /not supported/);
    assert.match(critProblem({ crit: ['b64'] }) ?? '', /missing/);
    assert.match(critProblem({ crit: ['b64'], b64: 'no' }) ?? '', /boolean/);
  });
});

describe('importVerifyKey', () => {
  let es: KeyPair, rs: KeyPair, ed: KeyPair;
  before(async () => {
    [es, rs, ed] = await Promise.all([generateKey('ES256'), generateKey('RS256'), generateKey('EdDSA')]);
  });
  test('imports each supported key for its algorithm', () => {
    assert.equal(importVerifyKey(es.publicJwk, 'ES256').asymmetricKeyType, 'ec');
    assert.equal(importVerifyKey(rs.publicJwk, 'RS256').asymmetricKeyType, 'rsa');
    assert.equal(importVerifyKey(ed.publicJwk, 'EdDSA').asymmetricKeyType, 'ed25519');
    assert.equal(importVerifyKey({ ...es.publicJwk, key_ops: ['verify'], use: 'sig' }, 'ES256').type, 'public');
  });
  test('a key of another type, a weak RSA key or key_ops without "verify" is refused', () => {
    assert.throws(() => importVerifyKey(es.publicJwk, 'RS256'), /not a key for RS256/);
    assert.throws(() => importVerifyKey(rs.publicJwk, 'EdDSA'), /not a key for EdDSA/);
    const weak = { kty: 'RSA', n: Buffer.alloc(128, 0xc3).toString('base64url'), e: 'AQAB' };
    assert.throws(() => importVerifyKey(weak, 'RS256'), /at least 2048 bits/);
    for (const key_ops of [['sign'], ['verify', 'sign'], 'verify']) assert.throws(() => importVerifyKey({ ...es.publicJwk, key_ops }, 'ES256'), /key_ops/);
  });
  test('an RSA key whose exponent is 1 or even is refused', () => {
    for (const e of [1, 2, 65_536]) {
      const jwk = { ...rs.publicJwk, e: Buffer.from(e.toString(16).padStart(e > 255 ? 6 : 2, '0'), 'hex').toString('base64url') };
      assert.throws(() => importVerifyKey(jwk, 'RS256'), /odd and at least 3/, String(e));
    }
    assert.equal(importVerifyKey({ ...rs.publicJwk, e: 'Aw' }, 'RS256').asymmetricKeyDetails?.publicExponent, 3n);
  });
});

describe('isAcceptableRsaExponent', () => {
  test('odd and at least 3', () => {
    for (const e of [3n, 5n, 17n, 65_537n]) assert.equal(isAcceptableRsaExponent(e), true, String(e));
    for (const e of [0n, 1n, 2n, 4n, 65_536n, -3n]) assert.equal(isAcceptableRsaExponent(e), false, String(e));
  });
});

describe('algorithmsForKey', () => {
  test('maps supported key types and refuses the rest', () => {
    assert.deepEqual(algorithmsForKey({ kty: 'RSA' }), ['RS256']);
    assert.deepEqual(algorithmsForKey({ kty: 'EC', crv: 'P-256' }), ['ES256']);
    assert.deepEqual(algorithmsForKey({ kty: 'OKP', crv: 'Ed25519' }), ['EdDSA', 'Ed25519']);
    assert.deepEqual(algorithmsForKey({ kty: 'EC', crv: 'P-384' }), []);
    assert.deepEqual(algorithmsForKey({ kty: 'OKP', crv: 'X25519' }), []);
    assert.deepEqual(algorithmsForKey({ kty: 'oct' }), []);
  });
});

describe('userPublicKey', () => {
  const x = 'A'.repeat(43);
  test('keeps only the public members of a JWK', () => {
    assert.deepEqual(userPublicKey({ kty: 'RSA', n: 'AQAB', e: 'AQAB', d: 'secret', kid: 'k' }), { kty: 'RSA', n: 'AQAB', e: 'AQAB' });
    assert.deepEqual(userPublicKey({ kty: 'EC', crv: 'P-256', x, y: x, d: 'z' }), { kty: 'EC', crv: 'P-256', x, y: x });
    assert.deepEqual(userPublicKey({ kty: 'OKP', crv: 'Ed25519', x }), { kty: 'OKP', crv: 'Ed25519', x });
  });
  test('converts the legacy decimal RS form', () => {
    assert.deepEqual(userPublicKey({ algorithm: 'RS', n: '65537', e: '3' }), {
      kty: 'RSA',
      n: Buffer.from([1, 0, 1]).toString('base64url'),
      e: Buffer.from([3]).toString('base64url'),
    });
    assert.deepEqual((userPublicKey({ algorithm: 'RS', n: '256', e: '65537' }) as JsonWebKeyLike).n, Buffer.from([1, 0]).toString('base64url'));
  });
  test('malformed keys → InvalidCredentials', () => {
    const bad: unknown[] = [
      undefined,
      'key',
      [],
      {},
      { algorithm: 'DS', y: '1', p: '2', q: '3', g: '4' },
      { algorithm: 'RS', n: '0123', e: '3' },
      { algorithm: 'RS', n: 12345, e: '3' },
      { algorithm: 'RS', n: '12a', e: '3' },
      { algorithm: 'RS', n: '1'.repeat(1300), e: '3' },
      { algorithm: 'RS', n: '123', e: '-3' },
      { algorithm: 'RS', n: '123', e: '12345678901' },
      { kty: 'RSA', n: 'A'.repeat(700), e: 'AQAB' },
      { kty: 'RSA', n: 'AQAB', e: 1 },
      { kty: 'RSA', n: '', e: 'AQAB' },
      { kty: 'RSA', n: 'a+b/', e: 'AQAB' },
      { kty: 'EC', crv: 'P-384', x, y: x },
      { kty: 'EC', crv: 'P-256', x },
      { kty: 'OKP', crv: 'X25519', x },
      { kty: 'oct', k: 'AAAA' },
    ];
    for (const k of bad) assert.throws(() => userPublicKey(k), InvalidCredentials, JSON.stringify(k)?.slice(0, 60));
  });
});

describe('userPublicKey / algorithmsForKey / importVerifyKey: BrowserID DSA keys', () => {
  let ds128: DsaKeyPair, ds256: DsaKeyPair;
  before(async () => {
    [ds128, ds256] = await Promise.all([generateDsaKey('DS128'), generateDsaKey('DS256')]);
  });
  test('the DS form gives a checked key for DS128 or DS256, by its size', () => {
    for (const k of [ds128, ds256]) {
      const key = userPublicKey(k.publicKey);
      assert.ok(key instanceof DsaPublicKey);
      assert.deepEqual(algorithmsForKey(key), [k.alg]);
      assert.equal(importVerifyKey(key, k.alg).asymmetricKeyType, 'dsa');
    }
  });
  test('a DSA key for the other algorithm, or a DS form that does not check out → refused', () => {
    assert.throws(() => importVerifyKey(userPublicKey(ds128.publicKey), 'DS256'), /not a key for DS256/);
    assert.throws(() => importVerifyKey(userPublicKey(ds256.publicKey), 'ES256'), /not a key for ES256/);
    const p = BigInt(`0x${ds128.publicKey.p}`);
    for (const bad of [{ g: '1' }, { y: (p - 1n).toString(16) }, { p: 'zz' }, { q: ds256.publicKey.q }, { y: undefined }]) {
      assert.throws(() => userPublicKey({ ...ds128.publicKey, ...bad }), (e) => e instanceof InvalidCredentials && /^certificate public-key: /.test(e.message), JSON.stringify(bad));
    }
  });
});

describe('padRsaSignature', () => {
  test('left-pads a short signature with zero bytes to the modulus length; leaves others as they are', () => {
    assert.deepEqual(padRsaSignature(Buffer.from([1, 2]), 4), Buffer.from([0, 0, 1, 2]));
    assert.deepEqual(padRsaSignature(Buffer.from([1, 2, 3, 4]), 4), Buffer.from([1, 2, 3, 4]));
    assert.deepEqual(padRsaSignature(Buffer.from([1, 2, 3, 4, 5]), 4), Buffer.from([1, 2, 3, 4, 5]), 'too long stays too long (and fails)');
  });
});

describe('signedBy with RS256', () => {
  // Checked at once for small keys (cheapRsaKey), in the thread pool for the rest: both answer alike.
  const cases = [
    { bits: 2048, exponent: 65537, inline: true },
    { bits: 2048, exponent: 3, inline: true },
    { bits: 2048, exponent: 65539, inline: false },
    { bits: 3072, exponent: 65537, inline: false },
  ];
  for (const { bits, exponent, inline } of cases) {
    test(`${bits} bits, exponent ${exponent}: ${inline ? 'at once' : 'thread pool'}; true only for the key's own signature`, async () => {
      const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: bits, publicExponent: exponent });
      assert.equal(cheapRsaKey(publicKey), inline);
      const input = `${b64({ alg: 'RS256' })}.${b64({ aud: 'x' })}`;
      const signature = sign('sha256', Buffer.from(input), privateKey);
      const decoded = (sig: Buffer) => decodeJws(`${input}.${sig.toString('base64url')}`, 'test');
      assert.equal(await signedBy(decoded(signature), publicKey), true);
      const flipped = Buffer.from(signature);
      flipped[10] ^= 1;
      assert.equal(await signedBy(decoded(flipped), publicKey), false);
      assert.equal(await signedBy(decoded(Buffer.concat([signature, Buffer.from([0])])), publicKey), false, 'too long: refused, never thrown');
      const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
      assert.equal(await signedBy(decoded(signature), other), false);
    });
  }
});

describe('checkAtOnce', () => {
  const rsa = (bits: number) => generateKeyPairSync('rsa', { modulusLength: bits }).publicKey;
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
  const ed = generateKeyPairSync('ed25519').publicKey;
  test('a cheap RSA key at once everywhere, a costly one nowhere', () => {
    for (const inWorker of [false, true]) {
      assert.equal(checkAtOnce('RS256', rsa(2048), inWorker), true);
      assert.equal(checkAtOnce('RS256', rsa(3072), inWorker), false);
    }
  });
  test('ES256 at once only in a cluster worker', () => {
    assert.equal(checkAtOnce('ES256', ec, true), true);
    assert.equal(checkAtOnce('ES256', ec, false), false);
  });
  test('the other algorithms in the thread pool, in a worker too', () => {
    for (const inWorker of [false, true]) {
      assert.equal(checkAtOnce('EdDSA', ed, inWorker), false);
      assert.equal(checkAtOnce('Ed25519', ed, inWorker), false);
    }
  });
});

describe('signedBy with ES256', () => {
  // At once in a cluster worker, in the thread pool in a single process: both answer alike.
  for (const inWorker of [true, false]) {
    test(`${inWorker ? 'in a worker, at once' : 'one process, thread pool'}: true only for the key's own r || s signature`, async () => {
      const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const input = `${b64({ alg: 'ES256' })}.${b64({ aud: 'x' })}`;
      const signature = sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
      const decoded = (sig: Buffer) => decodeJws(`${input}.${sig.toString('base64url')}`, 'test');
      assert.equal(await signedBy(decoded(signature), publicKey, inWorker), true);
      const flipped = Buffer.from(signature);
      flipped[10] ^= 1;
      assert.equal(await signedBy(decoded(flipped), publicKey, inWorker), false);
      assert.equal(await signedBy(decoded(Buffer.concat([signature, Buffer.from([0])])), publicKey, inWorker), false, 'too long: refused, never thrown');
      const der = sign('sha256', Buffer.from(input), privateKey);
      assert.equal(await signedBy(decoded(der), publicKey, inWorker), false, 'DER is not the JWS encoding');
      const other = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
      assert.equal(await signedBy(decoded(signature), other, inWorker), false);
    });
  }
});

describe('certificateClaims', () => {
  const good = { iss: 'idp.example', iat: 1000, exp: 2000, principal: { email: 'a@b.example' }, 'public-key': { kty: 'OKP', crv: 'Ed25519', x: 'A'.repeat(43) } };
  test('accepts well-typed claims; iat optional; generation passed through as sent', () => {
    const c = certificateClaims({ ...good, 'fxa-generation': 'x' }, 'fxa-generation');
    assert.equal(c.issuer, 'idp.example');
    assert.equal(c.email, 'a@b.example');
    assert.equal(c.expMs, 2000);
    assert.equal(c.iatMs, 1000);
    assert.equal(c.generation, 'x');
    const { iat: _iat, ...noIat } = good;
    assert.equal(certificateClaims(noIat, 'g').iatMs, undefined);
  });
  test('the e-mail comes back normalised: lowercase domain, NFC', () => {
    const email = (e: string) => certificateClaims({ ...good, principal: { email: e } }, 'g').email;
    assert.equal(email('Alice@EXAMPLE.com'), 'Alice@example.com');
    assert.equal(email('Jose\u0301@Exa\u0301mple.COM'), 'Jos\u00e9@ex\u00e1mple.com');
    // The length bound holds before and after normalisation.
    assert.throws(() => certificateClaims({ ...good, principal: { email: `${'a'.repeat(64)}@${'\u0344'.repeat(126)}b` } }, 'g'), InvalidCredentials);
    assert.equal(certificateClaims({ ...good, g: 4 }, 'g').generation, 4);
  });
  test('wrong claim types → InvalidCredentials', () => {
    const bad: Array<Record<string, unknown>> = [
      { iss: undefined },
      { iss: 42 },
      { iss: '' },
      { principal: undefined },
      { principal: 'a@b.example' },
      { principal: null },
      { principal: { email: 7 } },
      { principal: { email: 'no-at-sign' } },
      { principal: { email: 'a@b@c' } },
      { principal: { email: 'a b@c.example' } },
      { principal: { email: `${'a'.repeat(65)}@b.example` } },
      { principal: { email: `a@${'b'.repeat(254)}` } },
      { iat: '1000' },
      { exp: undefined },
      { exp: '2000' },
      { exp: 2000.5 },
      { exp: 1e300 },
      { exp: -1 },
      { exp: null },
      { 'public-key': undefined },
    ];
    for (const patch of bad) assert.throws(() => certificateClaims({ ...good, ...patch }, 'g'), InvalidCredentials, JSON.stringify(patch));
  });
});

describe('assertionClaims', () => {
  test('accepts one of the audiences', () => {
    assert.deepEqual(assertionClaims({ aud: 'https://a', exp: 5 }, ['https://b', 'https://a']), { audience: 'https://a', expMs: 5 });
  });
  test('wrong or missing aud, bad exp → InvalidCredentials', () => {
    for (const p of [{ exp: 5 }, { aud: ['https://a'], exp: 5 }, { aud: 'https://c', exp: 5 }, { aud: 'https://a' }, { aud: 'https://a', exp: 'soon' }]) {
      assert.throws(() => assertionClaims(p, ['https://a']), InvalidCredentials, JSON.stringify(p));
    }
  });
});

describe('checkTimes', () => {
  test('within the skew passes; beyond it → InvalidTimestamp', () => {
    checkTimes({ expMs: 1000 }, 1500, 600, 10_000, 'x');
    checkTimes({ expMs: 5000, iatMs: 2000 }, 1500, 600, 10_000, 'x');
    assert.throws(() => checkTimes({ expMs: 1000 }, 1601, 600, 10_000, 'x'), /expired/);
    assert.throws(() => checkTimes({ expMs: 5000, iatMs: 2200 }, 1500, 600, 10_000, 'x'), /in the future/);
  });
  test('exp at most the lifetime plus the skew beyond now; further → InvalidTimestamp', () => {
    checkTimes({ expMs: 1500 + 10_000 + 600 }, 1500, 600, 10_000, 'x');
    assert.throws(() => checkTimes({ expMs: 1500 + 10_000 + 601 }, 1500, 600, 10_000, 'x'), (e) => e instanceof InvalidTimestamp && /too far/.test(e.message));
    assert.throws(() => checkTimes({ expMs: Date.UTC(2100, 0, 1) }, Date.UTC(2026, 0, 1), 60_000, 86_400_000, 'x'), /too far/);
  });
});

describe('parseGeneration', () => {
  test('absent → undefined, non-negative integers pass', () => {
    assert.equal(parseGeneration(undefined), undefined);
    assert.equal(parseGeneration(0), 0);
    assert.equal(parseGeneration(1_700_000_000_000), 1_700_000_000_000);
  });
  test('anything else present → InvalidGeneration', () => {
    for (const g of [-1, 1.5, '3', null, true, 2 ** 53, Number.NaN, {}]) assert.throws(() => parseGeneration(g), InvalidGeneration, String(g));
  });
});

describe('LruCache', () => {
  test('evicts the least recently used entry', () => {
    const c = new LruCache<number>(2);
    c.set('a', 1);
    c.set('b', 2);
    assert.equal(c.get('a'), 1);
    c.set('c', 3);
    assert.equal(c.get('b'), undefined);
    assert.equal(c.get('a'), 1);
    assert.equal(c.get('c'), 3);
    c.set('c', 4);
    assert.equal(c.size, 2);
    c.delete('a');
    assert.equal(c.size, 1);
  });

  test('with weights: evicts the least recently used until the new entry fits, and keeps the sum', () => {
    const c = new LruCache<number>(100, 10, (v) => v);
    c.set('a', 4);
    c.set('b', 3);
    c.set('c', 3);
    assert.equal(c.weight, 10);
    assert.equal(c.get('a'), 4);
    // 'b' is now the oldest: it goes, and only it (4 + 3 + 2 fits).
    c.set('d', 2);
    assert.deepEqual([c.get('b'), c.size, c.weight], [undefined, 3, 9]);
    // Replacing an entry counts its new weight, not both.
    c.set('d', 3);
    assert.deepEqual([c.get('d'), c.size, c.weight], [3, 3, 10]);
    // Heavier than the whole bound: not kept, and nothing else is lost for it.
    c.set('e', 11);
    assert.deepEqual([c.get('e'), c.size, c.weight], [undefined, 3, 10]);
    c.set('f', 10);
    assert.deepEqual([c.get('f'), c.size, c.weight], [10, 1, 10]);
    c.delete('f');
    c.delete('f');
    assert.deepEqual([c.size, c.weight], [0, 0]);
  });

  test('with weights, the count bound still holds', () => {
    const c = new LruCache<number>(2, 100, () => 1);
    for (const k of ['a', 'b', 'c']) c.set(k, 1);
    assert.deepEqual([c.get('a'), c.size, c.weight], [undefined, 2, 2]);
  });
});

describe('createAssertionVerifier', () => {
  const NOW = 1_800_000_000_000;
  const AUD = 'https://token.example';
  let rsIssuer: KeyPair, esIssuer: KeyPair, edIssuer: KeyPair, rogue: KeyPair, rsUser: KeyPair, esUser: KeyPair, edUser: KeyPair;
  let verifier: AssertionVerifier;

  before(async () => {
    [rsIssuer, esIssuer, edIssuer, rogue, rsUser, esUser, edUser] = await Promise.all([
      generateKey('RS256'),
      generateKey('ES256'),
      generateKey('EdDSA'),
      generateKey('ES256'),
      generateKey('RS256'),
      generateKey('ES256'),
      generateKey('EdDSA'),
    ]);
    verifier = await createAssertionVerifier({
      trustedIssuers: new Map([
        ['rs.example', { keys: [rsIssuer.publicJwk], domains: ['example.com'] }],
        ['multi.example', { keys: [edIssuer.publicJwk, esIssuer.publicJwk], domains: ['*'] }],
      ]),
      audiences: [AUD],
      skewSeconds: 60,
      generationClaim: 'fxa-generation',
    });
  });

  async function header(o: { issuerKey?: KeyPair; issuer?: string; user?: KeyPair; publicKey?: unknown; signer?: KeyPair; generation?: number; certExp?: number; aud?: string; exp?: number; scheme?: string }) {
    const user = o.user ?? esUser;
    const cert = await signCertificate(o.issuerKey ?? rsIssuer, {
      issuer: o.issuer ?? 'rs.example',
      email: 'alice@example.com',
      publicKey: (o.publicKey ?? user.publicJwk) as KeyPair['publicJwk'],
      generation: o.generation,
      iatMs: NOW - 1000,
      expMs: o.certExp ?? NOW + 3_600_000,
    });
    const assertion = await signAssertion(o.signer ?? user, { audience: o.aud ?? AUD, expMs: o.exp ?? NOW + 60_000 });
    return `${o.scheme ?? 'Assertion'} ${bundle(cert, assertion)}`;
  }

  test('RS256, ES256 and EdDSA certificates and assertions verify', async () => {
    const a = await verifier.verify(await header({ user: esUser }), NOW);
    assert.deepEqual(a, { email: 'alice@example.com', issuer: 'rs.example' });
    assert.equal((await verifier.verify(await header({ issuerKey: esIssuer, issuer: 'multi.example', user: rsUser }), NOW)).email, 'alice@example.com');
    assert.equal((await verifier.verify(await header({ issuerKey: edIssuer, issuer: 'multi.example', user: edUser, scheme: 'BrowserID' }), NOW)).issuer, 'multi.example');
  });

  test('verifyCredentials (the header split already) answers as verify does', async () => {
    const h = await header({ user: esUser, generation: 7 });
    const credentials = h.slice('Assertion '.length);
    assert.deepEqual(await verifier.verifyCredentials(credentials, NOW), await verifier.verify(h, NOW));
    const wrong = await header({ user: esUser, signer: rogue });
    await assert.rejects(verifier.verifyCredentials(wrong.slice('Assertion '.length), NOW), /assertion is not signed by the certified key/);
    await assert.rejects(verifier.verifyCredentials('no-tilde-here', NOW), InvalidCredentials);
    await assert.rejects(verifier.verifyCredentials(credentials, NOW + 4 * 3_600_000), InvalidTimestamp);
  });

  test('legacy BrowserID RS public-key form verifies', async () => {
    const h = await header({ user: rsUser, publicKey: legacyRsaPublicKey(rsUser.publicJwk) });
    assert.equal((await verifier.verify(h, NOW)).email, 'alice@example.com');
  });

  test('RS256 signatures one byte short (leading zero dropped, as PyBrowserID writes them) verify', async () => {
    // RSASSA-PKCS1-v1_5 is deterministic: vary a claim until the signature's first byte is 0x00
    // (about 1 in 256), then drop that byte as an integer-to-bytes encoder does.
    const shortJws = (key: KeyPair, payload: (i: number) => Record<string, unknown>) => {
      const privateKey = KeyObject.from(key.privateKey);
      for (let i = 0; i < 10_000; i++) {
        const input = `${b64({ alg: 'RS256' })}.${b64(payload(i))}`;
        const signature = sign('sha256', Buffer.from(input), privateKey);
        if (signature[0] === 0) return `${input}.${signature.subarray(1).toString('base64url')}`;
      }
      throw new Error('no signature with a leading zero byte in 10 000 tries');
    };
    const cert = shortJws(rsIssuer, (i) => ({ iss: 'rs.example', exp: NOW + 3_600_000 + i, principal: { email: 'short@example.com' }, 'public-key': rsUser.publicJwk }));
    const assertion = shortJws(rsUser, (i) => ({ aud: AUD, exp: NOW + 60_000 + i }));
    assert.equal(Buffer.from(cert.split('.')[2], 'base64url').length, 255);
    assert.equal((await verifier.verify(`Assertion ${bundle(cert, assertion)}`, NOW)).email, 'short@example.com');
  });

  test('generation claim: returned when valid, InvalidGeneration otherwise', async () => {
    assert.equal((await verifier.verify(await header({ generation: 12 }), NOW)).generation, 12);
    const cert = await signJws(rsIssuer, {
      iss: 'rs.example',
      exp: NOW + 1000,
      principal: { email: 'a@example.com' },
      'public-key': esUser.publicJwk,
      'fxa-generation': -3,
    });
    const h = `Assertion ${bundle(cert, await signAssertion(esUser, { audience: AUD, expMs: NOW + 1000 }))}`;
    await assert.rejects(verifier.verify(h, NOW), InvalidGeneration);
  });

  test('untrusted issuer, wrong issuer key, wrong signer, wrong audience → InvalidCredentials', async () => {
    await assert.rejects(verifier.verify(await header({ issuer: 'evil.example' }), NOW), InvalidCredentials);
    await assert.rejects(verifier.verify(await header({ issuerKey: rogue }), NOW), InvalidCredentials);
    await assert.rejects(verifier.verify(await header({ issuerKey: rogue, issuer: 'multi.example' }), NOW), InvalidCredentials);
    await assert.rejects(verifier.verify(await header({ signer: rogue }), NOW), InvalidCredentials);
    await assert.rejects(verifier.verify(await header({ user: esUser, signer: rsUser }), NOW), InvalidCredentials, 'algorithm of another key type');
    await assert.rejects(verifier.verify(await header({ aud: 'https://other.example' }), NOW), InvalidCredentials);
  });

  test('a certificate signed with alg none or a tampered payload → InvalidCredentials', async () => {
    const h = await header({});
    const [cert, assertion] = h.slice('Assertion '.length).split('~');
    const [head, , sig] = cert.split('.');
    const forged = `${head}.${b64({ iss: 'rs.example', exp: NOW + 1000, principal: { email: 'mallory@example.com' }, 'public-key': esUser.publicJwk })}.${sig}`;
    await assert.rejects(verifier.verify(`Assertion ${forged}~${assertion}`, NOW), InvalidCredentials);
    const none = `${b64({ alg: 'none' })}.${cert.split('.')[1]}.`;
    await assert.rejects(verifier.verify(`Assertion ${none}~${assertion}`, NOW), InvalidCredentials);
  });

  test('an issuer certifies only its domains: another domain → InvalidCredentials; "*" certifies any; compared normalised', async () => {
    const cert = (issuer: string, key: KeyPair, email: string) =>
      signCertificate(key, { issuer, email, publicKey: esUser.publicJwk, iatMs: NOW - 1000, expMs: NOW + 3_600_000 });
    const withCert = async (c: string) => `Assertion ${bundle(c, await signAssertion(esUser, { audience: AUD, expMs: NOW + 60_000 }))}`;
    await assert.rejects(verifier.verify(await withCert(await cert('rs.example', rsIssuer, 'alice@other.example')), NOW), /may not certify/);
    await assert.rejects(verifier.verify(await withCert(await cert('rs.example', rsIssuer, 'alice@sub.example.com')), NOW), /may not certify/, 'no subdomains');
    assert.equal((await verifier.verify(await withCert(await cert('rs.example', rsIssuer, 'Alice@EXAMPLE.COM')), NOW)).email, 'Alice@example.com');
    assert.equal((await verifier.verify(await withCert(await cert('multi.example', esIssuer, 'bob@anywhere.example')), NOW)).email, 'bob@anywhere.example');
  });

  test('an RSA user key with e = 1 (JWK or legacy form) → InvalidCredentials, though the forged signature checks out', async () => {
    const n = rsUser.publicJwk.n as string;
    const forged = forgeExponentOneJws({ aud: AUD, exp: NOW + 60_000 }, n);
    for (const publicKey of [{ kty: 'RSA', n, e: 'AQ' }, legacyRsaPublicKey({ kty: 'RSA', n, e: 'AQ' })]) {
      const cert = await signCertificate(rsIssuer, { issuer: 'rs.example', email: 'mallory@example.com', publicKey: publicKey as KeyPair['publicJwk'], iatMs: NOW - 1000, expMs: NOW + 60_000 });
      await assert.rejects(verifier.verify(`Assertion ${bundle(cert, forged)}`, NOW), /public-key is not usable/, JSON.stringify(publicKey).slice(0, 30));
    }
  });

  test('exp beyond the lifetime limits → InvalidTimestamp; defaults 10 min (assertion) and 24 h (certificate)', async () => {
    await assert.rejects(verifier.verify(await header({ exp: NOW + 600_000 + 61_000 }), NOW), /assertion expires too far/);
    await assert.rejects(verifier.verify(await header({ certExp: NOW + 86_400_000 + 61_000 }), NOW), /certificate expires too far/);
    await assert.rejects(verifier.verify(await header({ certExp: Date.UTC(2100, 0, 1) }), NOW), InvalidTimestamp);
    assert.equal((await verifier.verify(await header({ exp: NOW + 600_000, certExp: NOW + 86_400_000 }), NOW)).email, 'alice@example.com');
    const short = await createAssertionVerifier({ trustedIssuers: new Map([['rs.example', { keys: [rsIssuer.publicJwk], domains: ['example.com'] }]]), audiences: [AUD], skewSeconds: 0, generationClaim: 'g', maxAssertionLifetime: 30, maxCertificateLifetime: 3600 });
    await assert.rejects(short.verify(await header({ exp: NOW + 31_000 }), NOW), /assertion expires too far/);
    await assert.rejects(short.verify(await header({ certExp: NOW + 3_601_000 }), NOW), /certificate expires too far/);
  });

  test('an assertion with b64: false → InvalidCredentials', async () => {
    const cert = (await header({})).slice('Assertion '.length).split('~')[0];
    const unencoded = await signUnencodedJws(esUser, { aud: AUD, exp: NOW + 60_000 });
    await assert.rejects(verifier.verify(`Assertion ${bundle(cert, unencoded)}`, NOW), /unencoded payload/);
  });

  test('an unusable certified key → InvalidCredentials', async () => {
    // A valid-looking but 1024-bit RSA modulus: keys under 2048 bits are refused.
    const h = await header({ publicKey: { kty: 'RSA', n: Buffer.alloc(128, 0xc3).toString('base64url'), e: 'AQAB' } });
    await assert.rejects(verifier.verify(h, NOW), InvalidCredentials);
  });

  test('expired certificate or assertion beyond the skew → InvalidTimestamp; within it passes', async () => {
    await assert.rejects(verifier.verify(await header({ certExp: NOW - 61_000 }), NOW), InvalidTimestamp);
    await assert.rejects(verifier.verify(await header({ exp: NOW - 61_000 }), NOW), InvalidTimestamp);
    assert.equal((await verifier.verify(await header({ exp: NOW - 59_000 }), NOW)).email, 'alice@example.com');
  });

  test('a verified certificate is cached, and its expiry is still checked on every use', async () => {
    const v = await createAssertionVerifier({ trustedIssuers: new Map([['rs.example', { keys: [rsIssuer.publicJwk], domains: ['example.com'] }]]), audiences: [AUD], skewSeconds: 0, generationClaim: 'g' });
    const cert = await signCertificate(rsIssuer, { issuer: 'rs.example', email: 'bob@example.com', publicKey: esUser.publicJwk, iatMs: NOW, expMs: NOW + 10_000 });
    const withAssertion = async (expMs: number) => `Assertion ${bundle(cert, await signAssertion(esUser, { audience: AUD, expMs }))}`;
    await v.verify(await withAssertion(NOW + 60_000), NOW);
    await v.verify(await withAssertion(NOW + 60_001), NOW + 1);
    assert.equal(v.cachedCertificates, 1);
    await assert.rejects(v.verify(await withAssertion(NOW + 60_000), NOW + 10_001), InvalidTimestamp);
    assert.equal(v.cachedCertificates, 0, 'an expired certificate leaves the cache');
    // A cached certificate does not vouch for an assertion signed by another key.
    await v.verify(await withAssertion(NOW + 60_000), NOW);
    const forged = `Assertion ${bundle(cert, await signAssertion(rogue, { audience: AUD, expMs: NOW + 60_000 }))}`;
    await assert.rejects(v.verify(forged, NOW), InvalidCredentials);
  });

  test('unsupported or broken trusted issuer keys stop the service at start', async () => {
    const make = (jwk: Record<string, unknown>) =>
      createAssertionVerifier({ trustedIssuers: new Map([['x', { keys: [jwk as KeyPair['publicJwk']], domains: ['*'] }]]), audiences: [AUD], skewSeconds: 0, generationClaim: 'g' });
    await assert.rejects(make({ kty: 'oct', k: 'AAAA' }), ConfigError);
    await assert.rejects(make({ kty: 'EC', crv: 'P-256', x: 'AA', y: 'AA' }), ConfigError);
    await assert.rejects(make({ ...esIssuer.publicJwk, alg: 'RS256' }), ConfigError);
    await assert.rejects(make({ kty: 'RSA', n: Buffer.alloc(128, 0xc3).toString('base64url'), e: 'AQAB' }), ConfigError, 'a weak RSA key');
  });
});

describe('createAssertionVerifier: BrowserID DSA keys, support-document issuer keys, old-style bundles (DESIGN §9.5)', () => {
  const NOW = 1_800_000_000_000;
  const AUD = 'https://token.example';
  let rsIssuer: KeyPair, rsDocIssuer: KeyPair, dsIssuer: DsaKeyPair, ds128: DsaKeyPair, ds256: DsaKeyPair, otherDs128: DsaKeyPair;
  let verifier: AssertionVerifier;

  before(async () => {
    [rsIssuer, rsDocIssuer, dsIssuer, ds128, ds256, otherDs128] = await Promise.all([
      generateKey('RS256'),
      generateKey('RS256'),
      generateDsaKey('DS128'),
      generateDsaKey('DS128'),
      generateDsaKey('DS256'),
      generateDsaKey('DS128'),
    ]);
    verifier = await createAssertionVerifier({
      trustedIssuers: new Map([
        ['rs.example', { keys: [rsIssuer.publicJwk], domains: ['example.com'] }],
        // As an IdP publishes them in /.well-known/browserid: decimal RS and hex DS.
        ['rsdoc.example', { keys: [legacyRsaPublicKey(rsDocIssuer.publicJwk)], domains: ['example.com'] }],
        ['dsdoc.example', { keys: [dsIssuer.publicKey], domains: ['example.com'] }],
      ]),
      audiences: [AUD],
      skewSeconds: 60,
      generationClaim: 'fxa-generation',
    });
  });

  const certificate = (o: { issuerKey?: KeyPair | DsaKeyPair; issuer?: string; publicKey: unknown }) =>
    signCertificate(o.issuerKey ?? rsIssuer, { issuer: o.issuer ?? 'rs.example', email: 'dsa@example.com', publicKey: o.publicKey as DsaKeyPair['publicKey'], iatMs: NOW - 1000, expMs: NOW + 3_600_000 });
  const assertionBy = (user: KeyPair | DsaKeyPair, exp = NOW + 60_000) => signAssertion(user, { audience: AUD, expMs: exp });

  test('DS128 and DS256 user keys: assertions signed with them verify, under both schemes', async () => {
    for (const user of [ds128, ds256]) {
      for (const scheme of ['Assertion', 'BrowserID']) {
        const h = `${scheme} ${bundle(await certificate({ publicKey: user.publicKey }), await assertionBy(user))}`;
        assert.equal((await verifier.verify(h, NOW)).email, 'dsa@example.com', `${user.alg} ${scheme}`);
      }
    }
  });

  test('issuer keys given in support-document form (RS decimal, DS hex) certify', async () => {
    const viaRsDoc = await certificate({ issuerKey: rsDocIssuer, issuer: 'rsdoc.example', publicKey: ds256.publicKey });
    assert.equal((await verifier.verify(`Assertion ${bundle(viaRsDoc, await assertionBy(ds256))}`, NOW)).issuer, 'rsdoc.example');
    const viaDs = await certificate({ issuerKey: dsIssuer, issuer: 'dsdoc.example', publicKey: ds128.publicKey });
    assert.equal(viaDs.split('.')[0], Buffer.from('{"alg":"DS128"}').toString('base64url'));
    assert.equal((await verifier.verify(`Assertion ${bundle(viaDs, await assertionBy(ds128))}`, NOW)).issuer, 'dsdoc.example');
    // The DS issuer key does not vouch for what another DSA key signed.
    const rogue = await certificate({ issuerKey: otherDs128, issuer: 'dsdoc.example', publicKey: ds128.publicKey });
    await assert.rejects(verifier.verify(`Assertion ${bundle(rogue, await assertionBy(ds128))}`, NOW), /certificate signature is not valid/);
  });

  test('a DSA signature for another message, by another key, of the other size, or too long → InvalidCredentials', async () => {
    const cert = await certificate({ publicKey: ds128.publicKey });
    const [head, payload] = (await assertionBy(ds128)).split('.');
    const otherSig = (await assertionBy(ds128, NOW + 59_000)).split('.')[2];
    const sig = Buffer.from((await assertionBy(ds128)).split('.')[2], 'base64url');
    const cases: Record<string, string> = {
      'signature of another message': `${head}.${payload}.${otherSig}`,
      'signed by another DS128 key': await assertionBy(otherDs128),
      'signed by a DS256 key': await assertionBy(ds256),
      'one byte too long': `${head}.${payload}.${Buffer.concat([sig, Buffer.from([0])]).toString('base64url')}`,
      'a zero byte prepended': `${head}.${payload}.${Buffer.concat([Buffer.from([0]), sig]).toString('base64url')}`,
      'claims DS256 with a DS128 signature': `${Buffer.from('{"alg":"DS256"}').toString('base64url')}.${payload}.${sig.toString('base64url')}`,
    };
    for (const [what, assertion] of Object.entries(cases)) {
      await assert.rejects(verifier.verify(`Assertion ${bundle(cert, assertion)}`, NOW), /assertion is not signed by the certified key/, what);
    }
  });

  test('a DS128 signature whose r starts with a zero byte, written without it (as an integer), verifies', async () => {
    const cert = await certificate({ publicKey: ds128.publicKey });
    const short = await withShortSignature((i) => assertionBy(ds128, NOW + i));
    assert.equal(Buffer.from(short.split('.')[2], 'base64url').length, 39);
    assert.equal((await verifier.verify(`Assertion ${bundle(cert, short)}`, NOW)).email, 'dsa@example.com');
  });

  test('a DSA user key with g = y = p - 1 → InvalidCredentials, though OpenSSL verifies the forgery r = s = 1 with it', async () => {
    const k = parseDsaPublicKey({ ...ds128.publicKey });
    const weak = new DsaPublicKey('DS128', k.p, k.q, k.p - 1n, k.p - 1n);
    const forgedSig = Buffer.concat([Buffer.alloc(19), Buffer.from([1]), Buffer.alloc(19), Buffer.from([1])]);
    let forged: string | undefined;
    // v = ((p-1)^(H mod q) · (p-1)) mod p mod q is 1 = r whenever H mod q is odd: half the messages.
    for (let i = 0; i < 64 && !forged; i++) {
      const input = `${Buffer.from('{"alg":"DS128"}').toString('base64url')}.${Buffer.from(JSON.stringify({ aud: AUD, exp: NOW + 60_000 + i })).toString('base64url')}`;
      if (verify('sha1', Buffer.from(input), { key: dsaKeyObject(weak), dsaEncoding: 'ieee-p1363' }, forgedSig)) forged = `${input}.${forgedSig.toString('base64url')}`;
    }
    assert.ok(forged, 'OpenSSL accepted no forgery');
    const hex = (v: bigint) => v.toString(16);
    const cert = await certificate({ publicKey: { algorithm: 'DS', p: hex(k.p), q: hex(k.q), g: hex(weak.g), y: hex(weak.y) } });
    await assert.rejects(verifier.verify(`Assertion ${bundle(cert, forged)}`, NOW), /certificate public-key: "g" must generate/);
  });

  test('an old-style bundle (base64url JSON, no "~") verifies like the new style', async () => {
    const cert = await certificate({ publicKey: ds256.publicKey });
    const old = Buffer.from(JSON.stringify({ certificates: [cert], assertion: await assertionBy(ds256) })).toString('base64url');
    assert.equal((await verifier.verify(`BrowserID ${old}`, NOW)).email, 'dsa@example.com');
  });

  test('unusable support-document issuer keys stop the service at start', async () => {
    const make = (key: Record<string, unknown>) =>
      createAssertionVerifier({ trustedIssuers: new Map([['x', { keys: [key as DsaKeyPair['publicKey']], domains: ['*'] }]]), audiences: [AUD], skewSeconds: 0, generationClaim: 'g' });
    const p = BigInt(`0x${dsIssuer.publicKey.p}`);
    for (const key of [
      { ...dsIssuer.publicKey, y: (p - 1n).toString(16) },
      { ...dsIssuer.publicKey, g: '1' },
      { ...dsIssuer.publicKey, q: ds256.publicKey.q },
      { ...dsIssuer.publicKey, p: 'not hex' },
      { algorithm: 'XS', n: '3', e: '3' },
      { ...legacyRsaPublicKey(rsIssuer.publicJwk), e: '1' },
      { algorithm: 'RS', n: '1'.repeat(300), e: '65537' },
    ]) {
      await assert.rejects(make(key), (e) => e instanceof ConfigError && e.variable === 'TRUSTED_ISSUERS' && /unusable key/.test(e.message), JSON.stringify(key).slice(0, 60));
    }
  });
});

// ---- found missing by mutation testing ----

describe('refusal reasons (the access line logs them; the body has Mozilla\'s entry), exactly', () => {
  const x = 'A'.repeat(43);
  const latin1 = Buffer.from('{"alg":"ES256","kid":"\xe9"}', 'latin1').toString('base64url');
  const cases: Array<[string, () => unknown, new (...a: never[]) => Error, string]> = [
    ['unknown scheme', () => parseAuthorization('Bearer abc'), Unauthorized, 'unsupported authorization scheme; use Assertion or BrowserID'],
    ['no credentials', () => parseAuthorization('Assertion'), Unauthorized, 'missing assertion'],
    ['three parts', () => splitBundle('a~b~c'), InvalidCredentials, 'expected <certificate>~<assertion>'],
    ['two segments', () => decodeJws('a.b', 'certificate'), InvalidCredentials, 'certificate is not a compact JWS'],
    ['empty signature', () => decodeJws(`${b64({ alg: 'ES256' })}.${b64({})}.`, 'assertion'), InvalidCredentials, 'assertion is not a compact JWS'],
    ['header not base64url', () => decodeJws(`!!!.${b64({})}.c2ln`, 'certificate'), InvalidCredentials, 'certificate header is not base64url'],
    ['header not UTF-8', () => decodeJws(`${latin1}.${b64({})}.c2ln`, 'certificate'), InvalidCredentials, 'certificate header is not UTF-8'],
    ['header not JSON', () => decodeJws(`${b64('{not json')}.${b64({})}.c2ln`, 'certificate'), InvalidCredentials, 'certificate header is not JSON'],
    ['header an array', () => decodeJws(`${b64([1])}.${b64({})}.c2ln`, 'certificate'), InvalidCredentials, 'certificate header is not a JSON object'],
    ['header null', () => decodeJws(`${b64('null')}.${b64({})}.c2ln`, 'certificate'), InvalidCredentials, 'certificate header is not a JSON object'],
    ['payload a string', () => decodeJws(`${b64({ alg: 'ES256' })}.${b64('"s"')}.c2ln`, 'assertion'), InvalidCredentials, 'assertion payload is not a JSON object'],
    ['payload not base64url', () => decodeJws(`${b64({ alg: 'ES256' })}.a+b.c2ln`, 'assertion'), InvalidCredentials, 'assertion payload is not base64url'],
    ['signature not base64url', () => decodeJws(`${b64({ alg: 'ES256' })}.${b64({})}.c2l=`, 'certificate'), InvalidCredentials, 'certificate signature is not base64url'],
    ['algorithm', () => decodeJws(jws({ alg: 'HS256' }, {}), 'assertion'), InvalidCredentials, 'assertion algorithm must be one of RS256, ES256, EdDSA, Ed25519, DS128, DS256'],
    ['crit', () => decodeJws(jws({ alg: 'ES256', crit: ['exp'], exp: 1 }, {}), 'assertion'), InvalidCredentials, 'assertion header: extension "exp" is not supported'],
    ['public-key not an object', () => userPublicKey('k'), InvalidCredentials, 'certificate public-key must be an object'],
    ['public-key null', () => userPublicKey(null), InvalidCredentials, 'certificate public-key must be an object'],
    ['public-key an array', () => userPublicKey([]), InvalidCredentials, 'certificate public-key must be an object'],
    ['EC curve', () => userPublicKey({ kty: 'EC', crv: 'P-384', x, y: x }), InvalidCredentials, 'certificate public-key curve must be P-256'],
    ['OKP curve', () => userPublicKey({ kty: 'OKP', crv: 'X25519', x }), InvalidCredentials, 'certificate public-key curve must be Ed25519'],
    ['key type', () => userPublicKey({ kty: 'oct' }), InvalidCredentials, 'certificate public-key type must be RSA, EC or OKP'],
    ['JWK member', () => userPublicKey({ kty: 'RSA', n: 'AQAB', e: '' }), InvalidCredentials, 'certificate public-key "e" is not valid'],
    ['JWK member type', () => userPublicKey({ kty: 'EC', crv: 'P-256', x, y: 7 }), InvalidCredentials, 'certificate public-key "y" is not valid'],
    ['BrowserID algorithm', () => userPublicKey({ algorithm: 'XS' }), InvalidCredentials, 'certificate public-key algorithm must be RS or DS'],
    ['BrowserID n', () => userPublicKey({ algorithm: 'RS', n: '0', e: '3' }), InvalidCredentials, 'certificate public-key "n" must be a decimal string'],
    ['BrowserID n type', () => userPublicKey({ algorithm: 'RS', n: 5, e: '3' }), InvalidCredentials, 'certificate public-key "n" must be a decimal string'],
    ['BrowserID e', () => userPublicKey({ algorithm: 'RS', n: '5', e: '03' }), InvalidCredentials, 'certificate public-key "e" must be a decimal string'],
    ['BrowserID e type', () => userPublicKey({ algorithm: 'RS', n: '5', e: 3 }), InvalidCredentials, 'certificate public-key "e" must be a decimal string'],
    ['iss', () => certificateClaims({ iss: '' }, 'g'), InvalidCredentials, 'certificate "iss" must be a string'],
    ['iss type', () => certificateClaims({ iss: 7 }, 'g'), InvalidCredentials, 'certificate "iss" must be a string'],
    ['email', () => certificateClaims({ iss: 'i', principal: { email: 'x' } }, 'g'), InvalidCredentials, 'certificate "principal.email" must be an email address'],
    ['iat', () => certificateClaims({ iss: 'i', principal: { email: 'a@b' }, iat: -1, exp: 1 }, 'g'), InvalidCredentials, 'certificate "iat" must be a time in ms since epoch'],
    ['exp', () => certificateClaims({ iss: 'i', principal: { email: 'a@b' } }, 'g'), InvalidCredentials, 'certificate "exp" must be a time in ms since epoch'],
    ['aud type', () => assertionClaims({ exp: 1 }, ['a']), InvalidCredentials, 'assertion "aud" must be a string'],
    ['aud', () => assertionClaims({ aud: 'b', exp: 1 }, ['a']), InvalidCredentials, 'assertion audience is not accepted here'],
    ['assertion exp', () => assertionClaims({ aud: 'a', exp: 1.5 }, ['a']), InvalidCredentials, 'assertion "exp" must be a time in ms since epoch'],
    ['expired', () => checkTimes({ expMs: 1 }, 10, 0, 5000, 'certificate'), InvalidTimestamp, 'certificate has expired'],
    ['future', () => checkTimes({ expMs: 20, iatMs: 11 }, 10, 0, 5000, 'certificate'), InvalidTimestamp, 'certificate is issued in the future'],
    ['too far', () => checkTimes({ expMs: 6000 }, 10, 0, 5000, 'assertion'), InvalidTimestamp, 'assertion expires too far in the future (at most 5 s)'],
    ['generation', () => parseGeneration(-1), InvalidGeneration, 'generation must be a non-negative integer'],
  ];
  for (const [what, run, type, description] of cases) {
    test(what, () => assert.throws(run, (e) => e instanceof type && e.message === description, `${what}: ${description}`));
  }
  test('critProblem descriptions', () => {
    assert.equal(critProblem({ b64: false }), '"b64": false (unencoded payload) is not supported');
    assert.equal(critProblem({ crit: [] }), '"crit" must be an array of names');
    assert.equal(critProblem({ crit: ['b64'] }), 'extension "b64" is missing');
    assert.equal(critProblem({ crit: ['b64'], b64: 1 }), '"b64" must be a boolean');
  });
});

describe('boundaries', () => {
  test('checkTimes: exactly at the skew passes, for expiry and issue time', () => {
    checkTimes({ expMs: 1000 }, 1600, 600, 10_000, 'x');
    checkTimes({ expMs: 5000, iatMs: 2100 }, 1500, 600, 10_000, 'x');
    assert.throws(() => checkTimes({ expMs: 5000, iatMs: 2101 }, 1500, 600, 10_000, 'x'), InvalidTimestamp);
  });
  test('e-mail: 255 characters pass, 256 do not', () => {
    const claims = { iss: 'i', exp: 1, 'public-key': { kty: 'OKP', crv: 'Ed25519', x: 'A'.repeat(43) } };
    const email = (n: number) => `${'a'.repeat(64)}@${'b'.repeat(n - 65)}`;
    assert.equal(certificateClaims({ ...claims, principal: { email: email(255) } }, 'g').email.length, 255);
    assert.throws(() => certificateClaims({ ...claims, principal: { email: email(256) } }, 'g'), InvalidCredentials);
  });
  test('JWK member length caps: RSA n 683 characters, e 8, EC/OKP coordinates 43', () => {
    assert.equal((userPublicKey({ kty: 'RSA', n: 'A'.repeat(683), e: 'A'.repeat(8) }) as JsonWebKeyLike).n, 'A'.repeat(683));
    assert.throws(() => userPublicKey({ kty: 'RSA', n: 'A'.repeat(684), e: 'AQAB' }), InvalidCredentials);
    assert.throws(() => userPublicKey({ kty: 'RSA', n: 'AQAB', e: 'A'.repeat(10) }), InvalidCredentials);
    assert.throws(() => userPublicKey({ kty: 'EC', crv: 'P-256', x: 'A'.repeat(44), y: 'A'.repeat(43) }), InvalidCredentials);
    assert.throws(() => userPublicKey({ kty: 'OKP', crv: 'Ed25519', x: 'A'.repeat(44) }), InvalidCredentials);
  });
  test('BrowserID RS: n up to 1234 digits, e up to 10', () => {
    assert.equal((userPublicKey({ algorithm: 'RS', n: '9'.repeat(1234), e: '1234567891' }) as JsonWebKeyLike).kty, 'RSA');
    assert.throws(() => userPublicKey({ algorithm: 'RS', n: '9'.repeat(1235), e: '3' }), InvalidCredentials);
  });
});

describe('createAssertionVerifier: issuer key algorithms and the verifier\'s refusals', () => {
  const NOW = 1_800_000_000_000;
  const AUD = 'https://token.example';
  let ed: KeyPair, rs: KeyPair, user: KeyPair, rogue: KeyPair;
  before(async () => {
    [ed, rs, user, rogue] = await Promise.all([generateKey('EdDSA'), generateKey('RS256'), generateKey('ES256'), generateKey('ES256')]);
  });
  const make = (keys: Array<Record<string, unknown>>) =>
    createAssertionVerifier({ trustedIssuers: new Map([['i.example', { keys: keys as KeyPair['publicJwk'][], domains: ['*'] }]]), audiences: [AUD], skewSeconds: 0, generationClaim: 'g' });
  /** A certificate signed by the Ed25519 issuer key, under the JWS algorithm name given. */
  const edCertificate = (alg: 'EdDSA' | 'Ed25519') => {
    const input = `${b64({ alg })}.${b64({ iss: 'i.example', exp: NOW + 60_000, principal: { email: 'e@x.example' }, 'public-key': user.publicJwk })}`;
    return `${input}.${sign(null, Buffer.from(input), KeyObject.from(ed.privateKey)).toString('base64url')}`;
  };
  const verifyWith = async (v: AssertionVerifier, cert: string, signer = user) => v.verify(`Assertion ${bundle(cert, await signAssertion(signer, { audience: AUD, expMs: NOW + 1000 }))}`, NOW);

  test('an issuer key marked "EdDSA" also verifies the "Ed25519" name; one marked "Ed25519" only that; unmarked both', async () => {
    const marked = await make([ed.publicJwk]);
    assert.equal(ed.publicJwk.alg, 'EdDSA');
    for (const alg of ['EdDSA', 'Ed25519'] as const) assert.equal((await verifyWith(marked, edCertificate(alg))).email, 'e@x.example', alg);
    const only = await make([{ ...ed.publicJwk, alg: 'Ed25519' }]);
    assert.equal((await verifyWith(only, edCertificate('Ed25519'))).email, 'e@x.example');
    await assert.rejects(verifyWith(only, edCertificate('EdDSA')), (e) => e instanceof InvalidCredentials && e.message === 'certificate signature is not valid');
    const { alg: _alg, ...unmarkedJwk } = ed.publicJwk;
    const unmarked = await make([unmarkedJwk]);
    for (const alg of ['EdDSA', 'Ed25519'] as const) assert.equal((await verifyWith(unmarked, edCertificate(alg))).email, 'e@x.example', alg);
  });

  test('the verifier\'s own refusals, described exactly', async () => {
    const v = await make([rs.publicJwk]);
    const cert = (issuerKey: KeyPair, issuer = 'i.example', publicKey: unknown = user.publicJwk) =>
      signCertificate(issuerKey, { issuer, email: 'e@x.example', publicKey: publicKey as KeyPair['publicJwk'], iatMs: NOW - 1000, expMs: NOW + 60_000 });
    const refusal = (description: string) => (e: unknown) => e instanceof InvalidCredentials && e.message === description;
    await assert.rejects(verifyWith(v, await cert(rs, 'other.example')), refusal('certificate issuer is not trusted'));
    await assert.rejects(verifyWith(v, await cert(rogue)), refusal('certificate signature is not valid'));
    await assert.rejects(verifyWith(v, await cert(rs), rogue), refusal('assertion is not signed by the certified key'));
    const weak = { kty: 'RSA', n: Buffer.alloc(128, 0xc3).toString('base64url'), e: 'AQAB' };
    await assert.rejects(verifyWith(v, await cert(rs, 'i.example', weak)), refusal('certificate public-key is not usable'));
  });

  test('an unusable issuer key stops the service with a message naming the issuer and the reason', async () => {
    await assert.rejects(make([{ kty: 'oct', k: 'AAAA' }]), (e) =>
      e instanceof ConfigError && e.message === 'TRUSTED_ISSUERS: issuer i.example: unusable key: unsupported key (use RSA, EC P-256, Ed25519, or BrowserID\'s RS or DS form)');
    await assert.rejects(make([{ ...rs.publicJwk, alg: 'ES256' }]), (e) => e instanceof ConfigError && /unusable key: unsupported key/.test(e.message));
  });
});

// ---- found missing by mutation testing (second run, on the security rewrite) ----

describe('assertion.ts: rules the second mutation run found untested', () => {
  const NOW = 1_800_000_000_000;
  const AUD = 'https://token.example';
  let rs: KeyPair, user: KeyPair, ds256: DsaKeyPair;
  before(async () => {
    [rs, user, ds256] = await Promise.all([generateKey('RS256'), generateKey('ES256'), generateDsaKey('DS256')]);
  });
  const make = (keys: Array<Record<string, unknown>>, extra: { skewSeconds?: number } = {}) =>
    createAssertionVerifier({ trustedIssuers: new Map([['i.example', { keys: keys as KeyPair['publicJwk'][], domains: ['*'] }]]), audiences: [AUD], skewSeconds: extra.skewSeconds ?? 0, generationClaim: 'g' });
  const certFor = (publicKey: unknown, times: { iatMs?: number; expMs: number } = { iatMs: NOW - 1000, expMs: NOW + 60_000 }) =>
    signCertificate(rs, { issuer: 'i.example', email: 'e@x.example', publicKey: publicKey as KeyPair['publicJwk'], ...times });
  const refusal = (description: string) => (e: unknown) => e instanceof Error && e.message === description;

  test('a payload is read as signed: bytes that are not UTF-8 become U+FFFD (only the header must be UTF-8)', () => {
    const payload = Buffer.from('{"note":"\xe9"}', 'latin1').toString('base64url');
    assert.equal(decodeJws(`${b64({ alg: 'ES256' })}.${payload}.c2ln`, 'assertion').payload.note, '\ufffd');
  });

  test('"crit" with a name that is not a string is refused as such, whatever names come before it', () => {
    assert.equal(critProblem({ crit: ['b64', 5], b64: true }), '"crit" must be an array of names');
    assert.equal(critProblem({ crit: ['b64', ''], b64: true }), '"crit" must be an array of names');
  });

  test('algorithmsForKey: each supported key its algorithms, other curves none', () => {
    const cases: Array<[Record<string, unknown>, string[]]> = [
      [{ kty: 'RSA', n: 'AQAB', e: 'AQAB' }, ['RS256']],
      [{ kty: 'EC', crv: 'P-256', x: 'A', y: 'A' }, ['ES256']],
      [{ kty: 'EC', crv: 'P-384', x: 'A', y: 'A' }, []],
      [{ kty: 'OKP', crv: 'Ed25519', x: 'A' }, ['EdDSA', 'Ed25519']],
      [{ kty: 'OKP', crv: 'X25519', x: 'A' }, []],
      // Both members decide: a curve name under the other key type is no key of ours.
      [{ kty: 'OKP', crv: 'P-256', x: 'A' }, []],
      [{ kty: 'EC', crv: 'Ed25519', x: 'A', y: 'A' }, []],
    ];
    for (const [jwk, algs] of cases) assert.deepEqual(algorithmsForKey(jwk as JsonWebKeyLike), algs, JSON.stringify(jwk));
  });

  test('userPublicKey: a JWK that also has "algorithm" is read as a JWK; no type at all is refused as such', () => {
    const jwk = { kty: 'EC', crv: 'P-256', x: 'A'.repeat(43), y: 'A'.repeat(43), algorithm: 'ES256' };
    assert.deepEqual(userPublicKey(jwk), { kty: 'EC', crv: 'P-256', x: 'A'.repeat(43), y: 'A'.repeat(43) });
    assert.throws(() => userPublicKey({}), refusal('certificate public-key type must be RSA, EC or OKP'));
  });

  test('certificate times: "iat" may be absent, and 0 is a time', () => {
    const claims = { iss: 'i', exp: 5, principal: { email: 'e@x.example' }, 'public-key': { kty: 'OKP', crv: 'Ed25519', x: 'A'.repeat(43) } };
    assert.equal(certificateClaims(claims, 'g').iatMs, undefined);
    assert.equal(certificateClaims({ ...claims, iat: 0 }, 'g').iatMs, 0);
    assert.equal(certificateClaims({ ...claims, exp: 0 }, 'g').expMs, 0);
  });

  test('LruCache: a lookup that misses adds nothing', () => {
    const cache = new LruCache<number>(2);
    cache.set('a', 1);
    assert.equal(cache.get('b'), undefined);
    assert.equal(cache.size, 1);
  });

  test('importVerifyKey: an EC key on another curve is not an ES256 key', () => {
    const p384 = createPublicKey({ key: generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey.export({ format: 'jwk' }), format: 'jwk' }).export({ format: 'jwk' });
    assert.throws(() => importVerifyKey(p384 as JsonWebKeyLike, 'ES256'), refusal('not a P-256 key'));
  });

  test('a DS256 signature whose r starts with a zero byte, written without it (as an integer), verifies', async () => {
    const v = await make([rs.publicJwk]);
    const cert = await certFor(ds256.publicKey);
    const short = await withShortSignature((i) => signAssertion(ds256, { audience: AUD, expMs: NOW + 60_000 + i }));
    assert.equal(Buffer.from(short.split('.')[2], 'base64url').length, 63);
    assert.equal((await v.verify(`Assertion ${bundle(cert, short)}`, NOW)).email, 'e@x.example');
  });

  test('issuer keys: a BrowserID-form key of another algorithm, and a key whose "alg" names another type, stop the service', async () => {
    await assert.rejects(make([{ algorithm: 'XX' }]), refusal('TRUSTED_ISSUERS: issuer i.example: unusable key: key algorithm must be RS or DS'));
    for (const alg of ['EdDSA', 'Ed25519', 'ES256']) {
      await assert.rejects(make([{ ...rs.publicJwk, alg }]), (e) => e instanceof ConfigError && /unusable key: unsupported key/.test(e.message), alg);
    }
    const ed = await generateKey('EdDSA');
    await assert.rejects(make([{ ...ed.publicJwk, alg: 'ES256' }]), (e) => e instanceof ConfigError && /unusable key: unsupported key/.test(e.message), 'Ed25519 key marked ES256');
  });

  test('through verify(): a malformed certificate or assertion is named as such', async () => {
    const v = await make([rs.publicJwk]);
    const assertion = await signAssertion(user, { audience: AUD, expMs: NOW + 1000 });
    await assert.rejects(v.verify(`Assertion a.b~${assertion}`, NOW), refusal('certificate is not a compact JWS'));
    const cert = await certFor(user.publicJwk);
    await assert.rejects(v.verify(`Assertion ${cert}~a.b`, NOW), refusal('assertion is not a compact JWS'));
  });

  test('the certificate cache forgets a certificate once it has expired, and only then', async () => {
    const v = await make([rs.publicJwk], { skewSeconds: 60 });
    const assertion = (exp: number) => signAssertion(user, { audience: AUD, expMs: exp });
    // Issued in the future: refused now, kept for when it becomes valid.
    const early = await certFor(user.publicJwk, { iatMs: NOW + 3_600_000, expMs: NOW + 7_200_000 });
    await assert.rejects(v.verify(`Assertion ${bundle(early, await assertion(NOW + 1000))}`, NOW), InvalidTimestamp);
    assert.equal(v.cachedCertificates, 1);
    // Also when it ends before it begins (within the skew of now): not expired, so kept.
    const odd = await certFor(user.publicJwk, { iatMs: NOW + 3_600_000, expMs: NOW + 30_000 });
    await assert.rejects(v.verify(`Assertion ${bundle(odd, await assertion(NOW + 1000))}`, NOW), /issued in the future/);
    assert.equal(v.cachedCertificates, 2);
    // Expired within the skew: still accepted, still kept.
    const ending = await certFor(user.publicJwk, { iatMs: NOW - 7_200_000, expMs: NOW - 30_000 });
    assert.equal((await v.verify(`Assertion ${bundle(ending, await assertion(NOW + 1000))}`, NOW)).email, 'e@x.example');
    assert.equal(v.cachedCertificates, 3);
    // Exactly at the end of the skew: accepted; one ms later: refused and forgotten.
    assert.equal((await v.verify(`Assertion ${bundle(ending, await assertion(NOW + 1000))}`, NOW + 30_000)).email, 'e@x.example');
    assert.equal(v.cachedCertificates, 3);
    await assert.rejects(v.verify(`Assertion ${bundle(ending, await assertion(NOW + 1000))}`, NOW + 30_001), InvalidTimestamp);
    assert.equal(v.cachedCertificates, 2);
  });
});

describe('createAssertionVerifier: the certificate cache is bounded by memory', () => {
  const NOW = 1_800_000_000_000;
  const AUD = 'https://token.example';
  const ES256_BYTES = cachedCertificateBytes({ userAlgorithms: ['ES256'] });
  let issuer: KeyPair, es: KeyPair, ed: KeyPair, rs: KeyPair;
  before(async () => {
    [issuer, es, ed, rs] = await Promise.all([generateKey('ES256'), generateKey('ES256'), generateKey('EdDSA'), generateKey('RS256')]);
  });
  const make = (o: { cacheBytes?: number; cacheSize?: number }) =>
    createAssertionVerifier({ trustedIssuers: new Map([['i.example', { keys: [issuer.publicJwk], domains: ['*'] }]]), audiences: [AUD], skewSeconds: 0, generationClaim: 'g', ...o });
  /** One certificate per e-mail address: each a distinct cache entry. */
  const certFor = (user: KeyPair, email: string, expMs = NOW + 3_600_000) => signCertificate(issuer, { issuer: 'i.example', email, publicKey: user.publicJwk, iatMs: NOW - 1000, expMs });
  const login = async (v: AssertionVerifier, user: KeyPair, cert: string, nowMs = NOW) =>
    (await v.verify(`Assertion ${bundle(cert, await signAssertion(user, { audience: AUD, expMs: nowMs + 1000 }))}`, nowMs)).email;

  test('the default bound holds fewer ES256 certificates than the count bound, and a byte bound is reported', async () => {
    assert.ok(CERTIFICATE_CACHE_BYTES / ES256_BYTES < 10_000);
    const v = await make({});
    await login(v, es, await certFor(es, 'a@x.example'));
    assert.deepEqual([v.cachedCertificates, v.cachedCertificateBytes], [1, ES256_BYTES]);
  });

  test('more distinct certificates than the bound holds: it stays within its bytes, whatever the keys', async () => {
    const budget = 5 * ES256_BYTES;
    const v = await make({ cacheBytes: budget });
    const users = [es, ed, rs];
    for (let i = 0; i < 24; i++) {
      const user = users[i % users.length];
      assert.equal(await login(v, user, await certFor(user, `u${i}@x.example`)), `u${i}@x.example`);
      assert.ok(v.cachedCertificateBytes <= budget, `${v.cachedCertificateBytes} bytes after ${i + 1} certificates`);
    }
    assert.ok(v.cachedCertificates >= 4 && v.cachedCertificates < 24, String(v.cachedCertificates));
    // Ed25519 keys weigh less: more of them fit.
    const light = await make({ cacheBytes: budget });
    for (let i = 0; i < 24; i++) await login(light, ed, await certFor(ed, `e${i}@x.example`));
    assert.ok(light.cachedCertificates > 5 && light.cachedCertificateBytes <= budget, String(light.cachedCertificates));
  });

  test('an evicted certificate verifies again from scratch and comes back; the one it pushes out does too', async () => {
    const v = await make({ cacheBytes: 2 * ES256_BYTES });
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((n) => certFor(es, `${n}@x.example`)));
    await login(v, es, a);
    await login(v, es, b);
    await login(v, es, c);
    assert.deepEqual([v.cachedCertificates, v.cachedCertificateBytes], [2, 2 * ES256_BYTES]);
    // 'a' was evicted: verified again (issuer signature, claims, key) and cached, pushing out 'b'.
    assert.equal(await login(v, es, a), 'a@x.example');
    assert.equal(await login(v, es, b), 'b@x.example');
    assert.deepEqual([v.cachedCertificates, v.cachedCertificateBytes], [2, 2 * ES256_BYTES]);
    // A forged assertion is refused for an evicted certificate as for a cached one.
    await assert.rejects(v.verify(`Assertion ${bundle(c, await signAssertion(ed, { audience: AUD, expMs: NOW + 1000 }))}`, NOW), InvalidCredentials);
  });

  test('an expired certificate is never used, evicted or cached, and takes no other certificate\'s place', async () => {
    const v = await make({ cacheBytes: 2 * ES256_BYTES });
    const short = await certFor(es, 's@x.example', NOW + 60_000);
    assert.equal(await login(v, es, short), 's@x.example');
    const later = NOW + 120_000;
    // Cached and expired: refused and forgotten.
    await assert.rejects(login(v, es, short, later), InvalidTimestamp);
    assert.equal(v.cachedCertificates, 0);
    // Verified again after eviction, then expired: refused, and not kept.
    await login(v, es, short);
    await login(v, es, await certFor(es, 'x@x.example'));
    await login(v, es, await certFor(es, 'y@x.example'));
    await assert.rejects(login(v, es, short, later), InvalidTimestamp);
    assert.deepEqual([v.cachedCertificates, v.cachedCertificateBytes], [2, 2 * ES256_BYTES]);
  });
});
