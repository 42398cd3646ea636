// Fuzzing of the compact-JWS parser (services/login/jws.ts) and of the JWT
// verifier built on it (services/login/jwks.ts): any string is a decoded JWS
// or InvalidCredentials, and what is accepted is canonical; a mutated signed
// token never verifies; and on generated headers, claims and signers the
// verifier agrees with jose's jwtVerify over the same JWKS, the verifier
// Bearer and the webhook used before, outcome for outcome (accepted, expired,
// refused). FUZZ_RUNS sets the cases per property.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import fc from 'fast-check';
import { createLocalJWKSet, errors, jwtVerify, type JWK, type JWTVerifyOptions } from 'jose';
import type { JsonWebKeyLike } from '../lib/config.js';
import { InvalidCredentials, InvalidTimestamp } from '../lib/errors.js';
import { localJwtVerifier, type JwtAlgorithm, type JwtRules, type JwtVerify } from '../services/login/jwks.js';
import { base64UrlDecode, parseCompactJws } from '../services/login/jws.js';
import { fuzzParams, mutate, mutationsArb, outcome, outcomeAsync } from './support/fuzz.js';

const NOW_MS = Date.now();
const NOW = Math.floor(NOW_MS / 1000);
const SKEW = 60;
const ISSUER = 'https://accounts.fuzz.example';
const AUDIENCE = 'https://token.fuzz.example/webhook';
const ALGS: readonly JwtAlgorithm[] = ['RS256', 'ES256'];
const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

/** Any string: full Unicode, ASCII, or the grammar's own characters. */
const anyString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.string({ unit: 'binary-ascii', maxLength: 200 }),
  fc.string({ unit: fc.constantFrom('a', 'Z', '0', '.', '-', '_', '=', '+', '/', ' ', 'e', 'y', 'J'), maxLength: 80 }),
);

/** A plausible compact JWS: JSON parts (objects mostly), base64url or not, and a signature-like tail. */
const jwsLike = fc
  .tuple(
    fc.oneof(fc.record({ alg: fc.constantFrom('RS256', 'ES256', 'none', 'HS256', 'EdDSA'), crit: fc.option(fc.jsonValue(), { nil: undefined }), b64: fc.option(fc.jsonValue(), { nil: undefined }) }), fc.jsonValue()),
    fc.jsonValue(),
    fc.oneof(fc.uint8Array({ maxLength: 80 }).map((u) => Buffer.from(u).toString('base64url')), fc.string({ maxLength: 20 })),
    fc.boolean(),
  )
  .map(([h, p, s, raw]) => (raw ? `${JSON.stringify(h)}.${JSON.stringify(p)}.${s}` : `${b64(h ?? null)}.${b64(p ?? null)}.${s}`));

test('parseCompactJws: any string → a decoded JWS or InvalidCredentials; what it accepts is canonical and reads back exactly', () => {
  fc.assert(
    fc.property(fc.oneof(anyString, jwsLike), fc.boolean(), (compact, strict) => {
      const d = outcome(() => parseCompactJws(compact, 'token', ALGS, strict), [InvalidCredentials], compact);
      if (!d) return;
      const [h, p, s] = compact.split('.');
      assert.equal(compact.split('.').length, 3);
      assert.equal(d.signingInput, `${h}.${p}`);
      for (const seg of [h, p, s]) assert.equal(base64UrlDecode(seg)?.toString('base64url'), seg, 'every segment canonical base64url');
      assert.equal(d.signature.toString('base64url'), s);
      assert.deepEqual(d.header, JSON.parse(Buffer.from(h, 'base64url').toString('utf8')));
      assert.deepEqual(d.payload, JSON.parse(Buffer.from(p, 'base64url').toString('utf8')));
      assert.ok(ALGS.includes(d.alg as JwtAlgorithm) && d.header.alg === d.alg);
      assert.notEqual(d.header.b64, false);
      assert.ok(d.header.crit === undefined || (Array.isArray(d.header.crit) && d.header.crit.every((c) => c === 'b64')));
    }),
    fuzzParams(3000),
  );
});

interface Signer {
  name: string;
  /** What a token from it names by default: its algorithm and kid. */
  alg: string;
  kid?: string;
  sign(input: Buffer): Buffer;
}

function keyPair(type: 'rsa' | 'ec', kid?: string): { privateKey: KeyObject; jwk: JsonWebKeyLike; signer: Signer } {
  const { privateKey, publicKey } = type === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: 2048 }) : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = { ...(publicKey.export({ format: 'jwk' }) as JsonWebKeyLike), ...(kid === undefined ? {} : { kid }) };
  const signer = {
    name: `${type} ${kid}`,
    alg: type === 'ec' ? 'ES256' : 'RS256',
    kid,
    sign: (input: Buffer) => sign('sha256', input, type === 'ec' ? { key: privateKey, dsaEncoding: 'ieee-p1363' } : privateKey),
  };
  return { privateKey, jwk, signer };
}

/** The verifier Bearer and the webhook used before: jose's jwtVerify over a local JWKS, its errors mapped as they were. */
function joseVerifier(jwks: JsonWebKeyLike[], algorithms: readonly JwtAlgorithm[], options: Omit<JWTVerifyOptions, 'algorithms'>): JwtVerify {
  const keySet = createLocalJWKSet({ keys: jwks as JWK[] });
  const opts = { ...options, algorithms: [...algorithms] };
  return async (token) => {
    try {
      try {
        const r = await jwtVerify(token, keySet, opts);
        return { header: r.protectedHeader as Record<string, unknown>, claims: r.payload as Record<string, unknown> };
      } catch (e) {
        if (!(e instanceof errors.JWKSMultipleMatchingKeys)) throw e;
        for await (const key of e as unknown as AsyncIterable<CryptoKey>) {
          try {
            const r = await jwtVerify(token, key, opts);
            return { header: r.protectedHeader as Record<string, unknown>, claims: r.payload as Record<string, unknown> };
          } catch (inner) {
            if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner;
          }
        }
        throw new errors.JWSSignatureVerificationFailed();
      }
    } catch (e) {
      if (e instanceof errors.JWTExpired) throw new InvalidTimestamp('token has expired');
      throw new InvalidCredentials('token refused');
    }
  };
}

type Outcome = 'accepted' | 'expired' | 'refused';
async function outcomeOf(verify: JwtVerify, token: string): Promise<Outcome> {
  const r = await outcomeAsync(() => verify(token, NOW_MS), [InvalidCredentials, InvalidTimestamp], token);
  if (r) return 'accepted';
  try {
    await verify(token, NOW_MS);
  } catch (e) {
    if (e instanceof InvalidTimestamp) return 'expired';
  }
  return 'refused';
}

let signers: Signer[];
let jwks: JsonWebKeyLike[];
let ours: { access: JwtVerify; event: JwtVerify };
let theirs: { access: JwtVerify; event: JwtVerify };
let validToken: string;

before(() => {
  const rs1 = keyPair('rsa', 'rs-1');
  const rs2 = keyPair('rsa', 'rs-2');
  const rsNoKid = keyPair('rsa');
  const es1 = keyPair('ec', 'es-1');
  const outsiderRs = keyPair('rsa', 'rs-1');
  const outsiderEs = keyPair('ec', 'es-1');
  jwks = [rs1.jwk, rs2.jwk, rsNoKid.jwk, es1.jwk, { ...keyPair('rsa', 'enc-1').jwk, use: 'enc' }];
  const hmacWithPublicKey = (input: Buffer) => createHmac('sha256', JSON.stringify(rs1.jwk)).update(input).digest();
  signers = [
    rs1.signer,
    rs2.signer,
    rsNoKid.signer,
    es1.signer,
    outsiderRs.signer,
    outsiderEs.signer,
    { name: 'hmac keyed with the public JWK', alg: 'HS256', kid: 'rs-1', sign: hmacWithPublicKey },
    { name: 'no signature', alg: 'none', sign: () => Buffer.alloc(0) },
  ];
  const access: JwtRules = { typ: 'at+jwt', issuer: ISSUER, requiredClaims: ['exp'], skewSeconds: SKEW };
  const event: JwtRules = { audience: AUDIENCE, issuer: ISSUER, skewSeconds: SKEW };
  ours = {
    access: localJwtVerifier(jwks, 'OAUTH_JWKS', ALGS, access, 'access token'),
    event: localJwtVerifier(jwks.filter((k) => k.kty === 'RSA'), 'WEBHOOK_JWKS', ['RS256'], event, 'event token'),
  };
  theirs = {
    access: joseVerifier(jwks, ALGS, { typ: 'at+jwt', issuer: ISSUER, requiredClaims: ['exp'], clockTolerance: SKEW, currentDate: new Date(NOW_MS) }),
    event: joseVerifier(jwks.filter((k) => k.kty === 'RSA'), ['RS256'], { audience: AUDIENCE, issuer: ISSUER, clockTolerance: SKEW, currentDate: new Date(NOW_MS) }),
  };
  validToken = compact({ alg: 'RS256', typ: 'at+jwt', kid: 'rs-1' }, { iss: ISSUER, aud: AUDIENCE, sub: 'u', exp: NOW + 60 }, rs1.signer);
});

function compact(header: Record<string, unknown>, claims: Record<string, unknown>, signer: Signer): string {
  const input = `${b64(header)}.${b64(claims)}`;
  return `${input}.${signer.sign(Buffer.from(input)).toString('base64url')}`;
}

/** Left as the good token has it (most often), or one of `values` (undefined: left out). */
const KEEP = Symbol('keep');
const maybe = (...values: unknown[]) => fc.oneof({ arbitrary: fc.constant<unknown>(KEEP), weight: 4 }, { arbitrary: fc.constantFrom(...values), weight: 1 });
const time = (...offsets: number[]) => maybe(...offsets.map((o) => NOW + o), undefined, '1', null, true, [NOW], NOW + 0.5 - SKEW, 1e400, -1);

/** Changes to the header of a good token: its alg, typ and kid, and members that must change nothing or refuse it. */
const headerChanges = fc.record({
  alg: maybe('RS256', 'ES256', 'none', 'HS256', 'PS256', 'rs256', '', 7, undefined),
  typ: maybe('AT+JWT', 'application/at+jwt', 'Application/AT+JWT', 'JWT', 'secevent+jwt', 'x/at+jwt', '/at+jwt', 'at+jwt ', 7, null, undefined),
  kid: maybe('rs-1', 'rs-2', 'es-1', 'enc-1', 'nope', '', 7, null, undefined),
  crit: maybe(['b64'], ['exp'], [], 'b64', ['b64', 'b64'], [7]),
  b64: maybe(true, false, 'x'),
  jwk: maybe({ kty: 'oct', k: 'c2VjcmV0' }),
  jku: maybe('https://attacker.example/jwks.json'),
});

/** Changes to the claims of a good token. */
const claimsChanges = fc.record({
  iss: maybe('https://evil.example', `${ISSUER}/`, 7, null, [ISSUER], undefined),
  aud: maybe([AUDIENCE], ['x', AUDIENCE], ['x'], 'x', 7, null, [7, AUDIENCE], undefined),
  exp: time(3600, -SKEW, -SKEW + 1, -3600, 0),
  nbf: time(0, SKEW, SKEW + 1, -3600),
  iat: time(600, -600),
});

/** A change record that leaves every member as the good token has it. */
function keepAll<T extends Record<string, unknown>>(arb: fc.Arbitrary<T>): T {
  const [sample] = fc.sample(arb, { numRuns: 1, seed: 0 });
  return Object.fromEntries(Object.keys(sample).map((k) => [k, KEEP])) as T;
}

function changed(base: Record<string, unknown>, changes: Record<string, unknown>): Record<string, unknown> {
  const out = { ...base };
  for (const [k, v] of Object.entries(changes)) if (v !== KEEP) out[k] = v;
  return out;
}

/** jose treats `b64: false` as an ordinary header member unless `crit` names it; we refuse it always. */
const oursStricter = (header: Record<string, unknown>) => header.b64 === false && !(Array.isArray(header.crit) && header.crit.includes('b64'));

test('the verifier agrees with jose’s jwtVerify on generated tokens (access and event rules): accepted, expired or refused alike', async () => {
  const seen: Record<string, number> = {};
  await fc.assert(
    fc.asyncProperty(fc.nat(), headerChanges, claimsChanges, async (signerIndex, headerChange, claimsChange) => {
      const signer = signers[signerIndex % signers.length];
      const header = changed({ alg: signer.alg, typ: 'at+jwt', kid: signer.kid }, headerChange);
      const claims = changed({ iss: ISSUER, aud: AUDIENCE, sub: 'u1', exp: NOW + 60, iat: NOW }, claimsChange);
      const token = compact(header, claims, signer);
      for (const rules of ['access', 'event'] as const) {
        const [a, b] = [await outcomeOf(ours[rules], token), await outcomeOf(theirs[rules], token)];
        seen[`${rules} ${a}`] = (seen[`${rules} ${a}`] ?? 0) + 1;
        if (a === 'refused' && b !== 'refused' && oursStricter(header)) continue;
        assert.equal(a, b, `${rules}: ours ${a}, jose ${b} for header ${JSON.stringify(header)}, claims ${JSON.stringify(claims)}, signer ${signer.name}`);
      }
    }),
    // Each outcome is reached by one of these examples whatever the seed; the random runs add the rest.
    { ...fuzzParams(400), examples: [[0, keepAll(headerChanges), keepAll(claimsChanges)], [0, keepAll(headerChanges), { ...keepAll(claimsChanges), exp: NOW - 3600 }], [7, keepAll(headerChanges), keepAll(claimsChanges)]] },
  );
  // The generators reach every outcome, or the agreement would prove little.
  for (const k of ['access accepted', 'access expired', 'access refused', 'event accepted', 'event expired', 'event refused']) assert.ok((seen[k] ?? 0) > 0, `no case ended "${k}": ${JSON.stringify(seen)}`);
});

test('a mutated valid token never verifies, unless the mutation gave back the same string', async () => {
  assert.equal(await outcomeOf(ours.access, validToken), 'accepted');
  await fc.assert(
    fc.asyncProperty(mutationsArb, async (ms) => {
      const token = mutate(validToken, ms);
      const o = await outcomeOf(ours.access, token);
      if (token !== validToken) assert.equal(o, 'refused', token);
    }),
    fuzzParams(1000),
  );
});
