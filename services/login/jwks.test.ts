// JWT verification against a JWKS (access tokens, security event tokens): the
// pure checks branch by branch (key selection, typ, iss, aud, the times), and
// the verifier with real keys: kid matching, the key's algorithm, the
// signature's exact length, and which error each refusal is.
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import type { JsonWebKeyLike } from '../../lib/config.js';
import { ConfigError, InvalidCredentials, InvalidTimestamp, KeysUnavailable } from '../../lib/errors.js';
import { audienceMatches, candidateKeys, checkJwtClaims, fixedKeySet, importJwks, jwtVerifier, localJwtVerifier, sameMediaType, selectableJwk, type JwksKey, type JwtRules } from './jwks.js';

const NOW_MS = 1_700_000_000_500;
const NOW = Math.floor(NOW_MS / 1000);
const SKEW = 60;
/** Exactly this class (a subclass would be another status) and, when given, a message matching `re`. */
const refused = (cls: typeof InvalidCredentials | typeof InvalidTimestamp | typeof ConfigError, re?: RegExp) => (e: unknown) =>
  e instanceof cls && e.constructor === cls && (!re || re.test((e as Error).message));

interface TestKey {
  privateKey: KeyObject;
  jwk: JsonWebKeyLike;
  alg: 'RS256' | 'ES256';
}

function rsaKey(kid?: string, extra: Record<string, unknown> = {}): TestKey {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { privateKey, alg: 'RS256', jwk: { ...(publicKey.export({ format: 'jwk' }) as JsonWebKeyLike), ...(kid ? { kid } : {}), ...extra } };
}

function ecKey(kid?: string, extra: Record<string, unknown> = {}): TestKey {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { privateKey, alg: 'ES256', jwk: { ...(publicKey.export({ format: 'jwk' }) as JsonWebKeyLike), ...(kid ? { kid } : {}), ...extra } };
}

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** A compact JWS with exactly `header` and `claims`, signed by `key` (the signature's bytes through `alter`). */
function token(key: TestKey, header: Record<string, unknown>, claims: Record<string, unknown>, alter: (sig: Buffer) => Buffer = (s) => s): string {
  const input = `${b64(header)}.${b64(claims)}`;
  const sig = sign('sha256', Buffer.from(input), key.alg === 'ES256' ? { key: key.privateKey, dsaEncoding: 'ieee-p1363' } : key.privateKey);
  return `${input}.${alter(sig).toString('base64url')}`;
}

describe('pure checks', () => {
  test('selectableJwk: use, key_ops, alg and ext as jose reads them', () => {
    assert.equal(selectableJwk({ kty: 'RSA' }, 'RS256'), true);
    assert.equal(selectableJwk({ kty: 'RSA', use: 'sig', key_ops: ['verify'], alg: 'RS256', ext: true }, 'RS256'), true);
    assert.equal(selectableJwk({ kty: 'RSA', ext: false }, 'RS256'), true);
    assert.equal(selectableJwk({ kty: 'RSA', use: 'enc' }, 'RS256'), false);
    assert.equal(selectableJwk({ kty: 'RSA', use: 7 }, 'RS256'), false);
    assert.equal(selectableJwk({ kty: 'RSA', key_ops: ['verify', 'verify'] }, 'RS256'), false, 'repeated key_ops');
    assert.equal(selectableJwk({ kty: 'RSA', key_ops: 'verify' }, 'RS256'), false);
    assert.equal(selectableJwk({ kty: 'RSA', alg: 'RS512' }, 'RS256'), false);
    assert.equal(selectableJwk({ kty: 'EC', alg: 'RS256' }, 'ES256'), false);
    assert.equal(selectableJwk({ kty: 'RSA', ext: 'yes' }, 'RS256'), false);
  });

  test('candidateKeys: keys of the token’s algorithm, named by its kid when it has one; a kid that is no string names none', () => {
    const k = (alg: 'RS256' | 'ES256', kid: unknown, selectable = true) => ({ alg, kid, selectable }) as JwksKey;
    const keys = [k('RS256', 'a'), k('RS256', 'b'), k('ES256', 'a'), k('RS256', undefined), k('RS256', 'a', false)];
    assert.deepEqual(candidateKeys(keys, 'RS256', 'a'), [keys[0]]);
    assert.deepEqual(candidateKeys(keys, 'ES256', 'a'), [keys[2]]);
    assert.deepEqual(candidateKeys(keys, 'RS256', undefined), [keys[0], keys[1], keys[3]], 'no kid: every selectable key of the algorithm');
    assert.deepEqual(candidateKeys(keys, 'RS256', 'c'), []);
    assert.deepEqual(candidateKeys(keys, 'ES256', 'b'), [], 'the kid of a key of the other algorithm');
    for (const kid of [7, null, ['a'], { a: 1 }]) assert.deepEqual(candidateKeys([k('RS256', 7), ...keys], 'RS256', kid), [], JSON.stringify(kid));
    assert.deepEqual(candidateKeys(keys, 'HS256', undefined), []);
  });

  test('sameMediaType: case-insensitive, "application/" optional on either side', () => {
    for (const typ of ['at+jwt', 'AT+JWT', 'At+Jwt', 'application/at+jwt', 'APPLICATION/AT+JWT', 'Application/at+jwt']) assert.equal(sameMediaType(typ, 'at+jwt'), true, typ);
    assert.equal(sameMediaType('at+jwt', 'application/at+jwt'), true);
    for (const typ of ['JWT', 'jwt', 'at+jwt ', ' at+jwt', 'text/at+jwt', '/at+jwt', 'xapplication/at+jwt', 'application/jwt', 'application/', '', 7, null, undefined, ['at+jwt']]) {
      assert.equal(sameMediaType(typ, 'at+jwt'), false, JSON.stringify(typ));
    }
  });

  test('audienceMatches: the audience, or an array holding it', () => {
    assert.equal(audienceMatches('https://a', 'https://a'), true);
    assert.equal(audienceMatches(['x', 'https://a'], 'https://a'), true);
    assert.equal(audienceMatches(['x', 7, null, 'https://a'], 'https://a'), true, 'other members of any type');
    for (const aud of ['https://b', 'https://a/', 'HTTPS://A', [], ['https://b'], [['https://a']], { 'https://a': true }, null, 7, undefined]) {
      assert.equal(audienceMatches(aud, 'https://a'), false, JSON.stringify(aud));
    }
  });
});

describe('checkJwtClaims', () => {
  const ACCESS: JwtRules = { typ: 'at+jwt', issuer: 'https://iss', requiredClaims: ['exp'], skewSeconds: SKEW };
  const EVENT: JwtRules = { audience: 'https://aud', issuer: 'https://iss', skewSeconds: SKEW };
  const check = (claims: Record<string, unknown>, rules = ACCESS, header: Record<string, unknown> = { typ: 'at+jwt' }) => checkJwtClaims(header, claims, rules, NOW_MS, 'token');
  const ok = { iss: 'https://iss', exp: NOW + 60 };

  test('a token meeting the rules passes; rules left out check nothing', () => {
    check(ok);
    check({ ...ok, iat: NOW, nbf: NOW });
    check({ iss: 'https://iss', aud: ['x', 'https://aud'] }, EVENT, {});
    check({}, { skewSeconds: 0 }, {});
    check({ iss: 7, aud: 7, typ: 7 }, { skewSeconds: 0 }, { typ: 7 });
  });

  test('typ first: refused before any claim is looked at', () => {
    assert.throws(() => check(ok, ACCESS, {}), refused(InvalidCredentials, /^token "typ" must be at\+jwt$/));
    assert.throws(() => check(ok, ACCESS, { typ: 'JWT' }), refused(InvalidCredentials, /"typ"/));
    assert.throws(() => check({ exp: NOW - 3600 }, ACCESS, { typ: 'JWT' }), refused(InvalidCredentials, /"typ"/), 'typ before expiry');
    check(ok, ACCESS, { typ: 'application/AT+JWT' });
    check({ iss: 'https://iss', aud: 'https://aud' }, EVENT, { typ: 'anything: the webhook checks typ itself' });
  });

  test('required claims: exp when asked, aud with an audience, iss with an issuer; present means present, even null', () => {
    assert.throws(() => check({ iss: 'https://iss' }), refused(InvalidCredentials, /^token needs "exp"$/));
    assert.throws(() => check({ exp: NOW + 60 }), refused(InvalidCredentials, /^token needs "iss"$/));
    assert.throws(() => check({ iss: 'https://iss' }, EVENT, {}), refused(InvalidCredentials, /^token needs "aud"$/));
    assert.throws(() => check({ aud: 'https://aud' }, EVENT, {}), refused(InvalidCredentials, /^token needs "iss"$/));
    assert.throws(() => check({ ...ok, exp: null }), refused(InvalidCredentials, /"exp" must be a number/));
    check({ iss: 'https://iss', aud: 'https://aud' }, EVENT, {});
    assert.throws(() => check(Object.create({ exp: NOW + 60, iss: 'https://iss' }) as Record<string, unknown>), refused(InvalidCredentials, /needs "exp"/), 'inherited is not present');
  });

  test('iss must be the issuer, aud must name the audience', () => {
    for (const iss of ['https://evil', 'https://iss/', 'HTTPS://ISS', null, 7, ['https://iss']]) {
      assert.throws(() => check({ ...ok, iss }), refused(InvalidCredentials, /"iss" is not the trusted issuer/), JSON.stringify(iss));
    }
    for (const aud of ['https://other', ['https://other'], null, 7]) {
      assert.throws(() => check({ iss: 'https://iss', aud }, EVENT, {}), refused(InvalidCredentials, /"aud" does not name this service/), JSON.stringify(aud));
    }
    assert.throws(() => check({ iss: 'https://evil', aud: 'https://other' }, EVENT, {}), refused(InvalidCredentials, /"iss"/), 'iss before aud');
    assert.throws(() => check({ iss: 'https://evil', exp: NOW - 3600 }), refused(InvalidCredentials, /"iss"/), 'iss before expiry');
  });

  test('iat, nbf and exp must be numbers when present', () => {
    for (const name of ['iat', 'nbf', 'exp']) {
      for (const v of ['1', null, true, [1], { n: 1 }]) {
        assert.throws(() => check({ ...ok, [name]: v }), refused(InvalidCredentials, new RegExp(`^token "${name}" must be a number$`)), `${name} ${JSON.stringify(v)}`);
      }
    }
    assert.throws(() => check({ ...ok, iat: 'x', exp: NOW - 3600 }), refused(InvalidCredentials, /"iat"/), 'iat before expiry');
    check({ ...ok, iat: NOW + 10_000 }, ACCESS, { typ: 'at+jwt' });
  });

  test('nbf: not after now + skew (whole seconds); checked before exp', () => {
    check({ ...ok, nbf: NOW + SKEW });
    check({ ...ok, nbf: NOW + SKEW + 0.5 - 0.5 });
    assert.throws(() => check({ ...ok, nbf: NOW + SKEW + 1 }), refused(InvalidCredentials, /^token is not valid yet \("nbf"\)$/));
    assert.throws(() => check({ ...ok, nbf: NOW + SKEW + 0.001 }), refused(InvalidCredentials, /nbf/));
    assert.throws(() => check({ iss: 'https://iss', nbf: NOW + 3600, exp: NOW - 3600 }), refused(InvalidCredentials, /nbf/), 'nbf before expiry');
    check({ ...ok, nbf: -1 });
  });

  test('exp: expired (InvalidTimestamp) once exp ≤ now − skew, in whole seconds of now', () => {
    check({ ...ok, exp: NOW - SKEW + 1 });
    check({ ...ok, exp: NOW - SKEW + 0.001 });
    assert.throws(() => check({ ...ok, exp: NOW - SKEW }), refused(InvalidTimestamp, /^token has expired$/));
    assert.throws(() => check({ ...ok, exp: NOW - 3600 }), refused(InvalidTimestamp));
    assert.throws(() => check({ ...ok, exp: -Infinity }), refused(InvalidTimestamp));
    check({ ...ok, exp: Infinity });
    // now is whole seconds: 500 ms into NOW still counts as NOW.
    assert.throws(() => checkJwtClaims({ typ: 'at+jwt' }, { ...ok, exp: NOW }, { ...ACCESS, skewSeconds: 0 }, NOW * 1000 + 999, 'token'), refused(InvalidTimestamp));
    checkJwtClaims({ typ: 'at+jwt' }, { ...ok, exp: NOW + 1 }, { ...ACCESS, skewSeconds: 0 }, NOW * 1000 + 999, 'token');
    check({ aud: 'https://aud', iss: 'https://iss', exp: NOW - SKEW + 1 }, EVENT, {});
    assert.throws(() => check({ aud: 'https://aud', iss: 'https://iss', exp: NOW - SKEW }, EVENT, {}), refused(InvalidTimestamp));
  });
});

describe('importJwks', () => {
  test('a key of a type the verifier does not take, or an unusable key, stops the service (ConfigError)', () => {
    const rs = rsaKey('r');
    const es = ecKey('e');
    assert.throws(() => importJwks([es.jwk], 'WEBHOOK_JWKS', ['RS256']), refused(ConfigError, /key 0: kty EC is not one of RS256/));
    assert.throws(() => importJwks([rs.jwk, { kty: 'oct', k: 'c2VjcmV0' }], 'OAUTH_JWKS', ['RS256', 'ES256']), refused(ConfigError, /key 1: kty oct/));
    assert.throws(() => importJwks([{ ...rs.jwk, n: 'AQAB' }], 'OAUTH_JWKS', ['RS256']), refused(ConfigError, /key 0: unusable/));
    const weak = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'jwk' }) as JsonWebKeyLike;
    assert.throws(() => importJwks([weak], 'OAUTH_JWKS', ['RS256']), refused(ConfigError, /at least 2048 bits/));
  });

  test('each key: its algorithm, kid, signature length and whether a token may select it; private members dropped', () => {
    const rs = rsaKey('r', { use: 'enc' });
    const es = ecKey(undefined, { alg: 'ES256' });
    const full = generateKeyPairSync('rsa', { modulusLength: 3072 }).privateKey.export({ format: 'jwk' }) as JsonWebKeyLike;
    const [r, e, p] = importJwks([rs.jwk, es.jwk, { ...full, kid: 'pasted pair' }], 'OAUTH_JWKS', ['RS256', 'ES256']);
    assert.deepEqual([r.alg, r.kid, r.signatureBytes, r.selectable], ['RS256', 'r', 256, false]);
    assert.deepEqual([e.alg, e.kid, e.signatureBytes, e.selectable], ['ES256', undefined, 64, true]);
    assert.deepEqual([p.alg, p.key.type, p.signatureBytes], ['RS256', 'public', 384]);
  });
});

describe('localJwtVerifier', () => {
  let rs1: TestKey, rs2: TestKey, es1: TestKey, other: TestKey;
  const RULES: JwtRules = { typ: 'at+jwt', issuer: 'https://iss', requiredClaims: ['exp'], skewSeconds: SKEW };
  const claims = { iss: 'https://iss', sub: 'u1', exp: NOW + 60 };
  let verify: ReturnType<typeof localJwtVerifier>;

  before(() => {
    [rs1, rs2, es1, other] = [rsaKey('rs-1'), rsaKey('rs-2'), ecKey('es-1'), rsaKey('rs-1')];
    verify = localJwtVerifier([rs1.jwk, rs2.jwk, es1.jwk], 'OAUTH_JWKS', ['RS256', 'ES256'], RULES, 'access token');
  });

  const header = (key: TestKey, extra: Record<string, unknown> = {}) => ({ alg: key.alg, typ: 'at+jwt', kid: key.jwk.kid, ...extra });

  test('a token of each key passes, by its kid or without one; header and claims come back', async () => {
    for (const key of [rs1, rs2, es1]) {
      const r = await verify(token(key, header(key), claims), NOW_MS);
      assert.deepEqual(r.claims, claims);
      assert.equal(r.header.kid, key.jwk.kid);
      assert.deepEqual((await verify(token(key, header(key, { kid: undefined }), claims), NOW_MS)).claims, claims, 'no kid: each key of the algorithm is tried');
    }
  });

  test('a kid names one key: another key of the set under that kid is refused', async () => {
    await assert.rejects(verify(token(rs2, header(rs1), claims), NOW_MS), refused(InvalidCredentials, /^access token is not signed by a key of OAUTH_JWKS$/));
    await assert.rejects(verify(token(rs1, header(rs1, { kid: 'rs-3' }), claims), NOW_MS), refused(InvalidCredentials, /not signed/));
    await assert.rejects(verify(token(other, header(other), claims), NOW_MS), refused(InvalidCredentials, /not signed/), 'a key outside the set under a known kid');
    await assert.rejects(verify(token(other, header(other, { kid: undefined }), claims), NOW_MS), refused(InvalidCredentials, /not signed/));
  });

  test('the key’s algorithm: an ES256 kid with an RS256 header (or the reverse) is refused', async () => {
    await assert.rejects(verify(token(rs1, { ...header(rs1), kid: 'es-1' }, claims), NOW_MS), refused(InvalidCredentials, /not signed/));
    await assert.rejects(verify(token(es1, { ...header(es1), alg: 'RS256' }, claims), NOW_MS), refused(InvalidCredentials, /not signed/));
    await assert.rejects(verify(token(rs1, { ...header(rs1), alg: 'ES256' }, claims), NOW_MS), refused(InvalidCredentials, /not signed/));
  });

  test('a signature of another length than the key makes is refused, even when it is the same integer', async () => {
    // RS256 has one spelling (RFC 8017 §8.2.2: the modulus's length): a leading zero byte added, or one left out.
    await assert.rejects(verify(token(rs1, header(rs1), claims, (s) => Buffer.concat([Buffer.alloc(1), s])), NOW_MS), refused(InvalidCredentials, /not signed/));
    let short: string | undefined;
    for (let i = 0; i < 5000 && !short; i++) {
      const t = token(rs1, header(rs1), { ...claims, jti: i });
      const sig = Buffer.from(t.slice(t.lastIndexOf('.') + 1), 'base64url');
      if (sig[0] === 0) short = `${t.slice(0, t.lastIndexOf('.'))}.${sig.subarray(1).toString('base64url')}`;
    }
    assert.ok(short, 'no RS256 signature with a leading zero byte in 5000 tries');
    await assert.rejects(verify(short, NOW_MS), refused(InvalidCredentials, /not signed/));
    await assert.rejects(verify(token(es1, header(es1), claims, (s) => s.subarray(0, 63)), NOW_MS), refused(InvalidCredentials, /not signed/));
    await assert.rejects(verify(token(es1, header(es1), claims, (s) => Buffer.concat([s, Buffer.alloc(1)])), NOW_MS), refused(InvalidCredentials, /not signed/));
  });

  test('a key no token may select verifies nothing, though it is in the file', async () => {
    const enc = rsaKey('enc', { use: 'enc' });
    const v = localJwtVerifier([enc.jwk, rs1.jwk], 'OAUTH_JWKS', ['RS256'], RULES, 'access token');
    await assert.rejects(v(token(enc, header(enc), claims), NOW_MS), refused(InvalidCredentials, /not signed/));
    await assert.rejects(v(token(enc, header(enc, { kid: undefined }), claims), NOW_MS), refused(InvalidCredentials, /not signed/));
    assert.equal((await v(token(rs1, header(rs1, { kid: undefined }), claims), NOW_MS)).claims.sub, 'u1');
  });

  test('the signature is checked before the claims: a forged expired token is InvalidCredentials, a signed one InvalidTimestamp', async () => {
    const expired = { ...claims, exp: NOW - 3600 };
    await assert.rejects(verify(token(other, header(other), expired), NOW_MS), refused(InvalidCredentials));
    await assert.rejects(verify(token(rs1, header(rs1), expired), NOW_MS), refused(InvalidTimestamp, /^access token has expired$/));
    await assert.rejects(verify(token(rs1, header(rs1, { typ: 'JWT' }), claims), NOW_MS), refused(InvalidCredentials, /"typ"/));
  });

  test('the claims of a JWT are UTF-8: a payload that is not is refused', async () => {
    const input = `${b64(header(rs1))}.${Buffer.from('{"iss":"https://iss","exp":9999999999,"n":"\xff"}', 'latin1').toString('base64url')}`;
    const t = `${input}.${sign('sha256', Buffer.from(input), rs1.privateKey).toString('base64url')}`;
    await assert.rejects(verify(t, NOW_MS), refused(InvalidCredentials, /payload is not UTF-8/));
  });

  test('only the algorithms given: a webhook verifier refuses ES256 before looking for a key', async () => {
    const hook = localJwtVerifier([rs1.jwk], 'WEBHOOK_JWKS', ['RS256'], { audience: 'https://aud', skewSeconds: SKEW }, 'event token');
    assert.equal((await hook(token(rs1, { alg: 'RS256' }, { aud: 'https://aud' }), NOW_MS)).claims.aud, 'https://aud');
    await assert.rejects(hook(token(es1, { alg: 'ES256' }, { aud: 'https://aud' }), NOW_MS), refused(InvalidCredentials, /^event token algorithm must be one of RS256$/));
  });
});

describe('jwtVerifier over a key set that changes (DESIGN §13.1)', () => {
  const RULES: JwtRules = { typ: 'at+jwt', issuer: 'https://iss', requiredClaims: ['exp'], skewSeconds: SKEW };
  const claims = { iss: 'https://iss', sub: 'u1', exp: NOW + 60 };
  const header = (key: TestKey, extra: Record<string, unknown> = {}) => ({ alg: key.alg, typ: 'at+jwt', kid: key.jwk.kid, ...extra });

  /** A set holding `keys`, whose refresh for an unknown kid swaps in `next` and counts the calls. */
  function changingSet(keys: JwksKey[] | undefined, next?: JwksKey[]) {
    const set = {
      keys: keys as readonly JwksKey[] | undefined,
      refreshes: 0,
      retryAfterSeconds: 7,
      async refreshForUnknownKid() {
        set.refreshes++;
        if (next) set.keys = next;
        return set.keys;
      },
    };
    return set;
  }

  test('a kid no key has asks for one refresh, then verifies with the new keys', async () => {
    const [old, fresh] = [rsaKey('old'), rsaKey('new')];
    const set = changingSet(importJwks([old.jwk], 'OAUTH_JWKS', ['RS256']), importJwks([fresh.jwk], 'OAUTH_JWKS', ['RS256']));
    const verify = jwtVerifier(set, 'OAUTH_ISSUER', ['RS256'], RULES, 'access token');
    assert.equal((await verify(token(old, header(old), claims), NOW_MS)).claims.sub, 'u1');
    assert.equal(set.refreshes, 0, 'a known kid never refreshes');
    assert.equal((await verify(token(fresh, header(fresh), claims), NOW_MS)).claims.sub, 'u1');
    assert.equal(set.refreshes, 1);
    // The old key is withdrawn by that refresh: its kid is unknown now, and it asks again but verifies nothing.
    await assert.rejects(verify(token(old, header(old), claims), NOW_MS), refused(InvalidCredentials, /not signed by a key of OAUTH_ISSUER/));
    assert.equal(set.refreshes, 2);
  });

  test('no refresh for a token without a kid, with a kid that is not a string, or a known kid of another algorithm', async () => {
    const rs = rsaKey('rs');
    const set = changingSet(importJwks([rs.jwk], 'OAUTH_JWKS', ['RS256', 'ES256']));
    const verify = jwtVerifier(set, 'OAUTH_JWKS', ['RS256', 'ES256'], RULES, 'access token');
    const stranger = rsaKey();
    await assert.rejects(verify(token(stranger, header(stranger, { kid: undefined }), claims), NOW_MS), refused(InvalidCredentials));
    await assert.rejects(verify(token(stranger, header(stranger, { kid: 42 }), claims), NOW_MS), refused(InvalidCredentials));
    const es = ecKey('rs');
    await assert.rejects(verify(token(es, header(es), claims), NOW_MS), refused(InvalidCredentials));
    assert.equal(set.refreshes, 0);
  });

  test('no set yet: KeysUnavailable (503) with the set’s Retry-After, before any key is looked for', async () => {
    const set = changingSet(undefined);
    const verify = jwtVerifier(set, 'OAUTH_ISSUER', ['RS256'], RULES, 'access token');
    const rs = rsaKey('rs');
    await assert.rejects(verify(token(rs, header(rs), claims), NOW_MS), (e: unknown) => {
      assert.ok(e instanceof KeysUnavailable);
      assert.equal(e.status, 503);
      assert.equal(e.headers['Retry-After'], '7');
      assert.match(e.message, /no key set from OAUTH_ISSUER yet/);
      return true;
    });
    assert.equal(set.refreshes, 0);
    // A malformed token is still a 401: the set is not needed to say so.
    await assert.rejects(verify('not.a.token', NOW_MS), refused(InvalidCredentials));
  });

  // Found missing by mutation testing (npm run mutation -- services/login/jwks.ts).
  test('no refresh for a kid one key of several has, even when that key is of another algorithm', async () => {
    const [a, b] = [rsaKey('a'), ecKey('b')];
    const set = changingSet(importJwks([a.jwk, b.jwk], 'OAUTH_JWKS', ['RS256', 'ES256']));
    const verify = jwtVerifier(set, 'OAUTH_JWKS', ['RS256', 'ES256'], RULES, 'access token');
    await assert.rejects(verify(token(a, header(a, { kid: 'b' }), claims), NOW_MS), refused(InvalidCredentials, /not signed/));
    assert.equal(set.refreshes, 0);
  });

  test('a file’s set (fixedKeySet) never changes', async () => {
    const rs = rsaKey('rs');
    const keys = importJwks([rs.jwk], 'OAUTH_JWKS', ['RS256']);
    const set = fixedKeySet(keys);
    assert.equal(await set.refreshForUnknownKid(), keys);
    assert.equal(set.keys, keys);
  });
});

// Found missing by mutation testing (npm run mutation -- services/login/jwks.ts).

describe('importJwks, found missing by mutation testing', () => {
  test('a key of another type names the algorithms the set may hold', () => {
    assert.throws(() => importJwks([{ kty: 'oct', k: 'c2VjcmV0' }], 'OAUTH_JWKS', ['RS256', 'ES256']), refused(ConfigError, /^OAUTH_JWKS: key 0: kty oct is not one of RS256, ES256$/));
  });

  test('a key pair imports as its public key whatever its private members hold', () => {
    const rs = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const rsPub = rs.publicKey.export({ format: 'jwk' }) as JsonWebKeyLike;
    const ecPub = ec.publicKey.export({ format: 'jwk' }) as JsonWebKeyLike;
    // Some private members only, and private members that are no key material at all.
    const [r1, r2, e1] = importJwks(
      [
        { ...rsPub, d: (rs.privateKey.export({ format: 'jwk' }) as JsonWebKeyLike).d },
        { ...rsPub, d: 'AA', p: 'AA', oth: [1] },
        { ...ecPub, d: 'AA' },
      ],
      'OAUTH_JWKS',
      ['RS256', 'ES256'],
    );
    for (const k of [r1, r2, e1]) assert.equal(k.key.type, 'public');
    assert.ok(r1.key.equals(rs.publicKey) && r2.key.equals(rs.publicKey) && e1.key.equals(ec.publicKey));
  });
});
