// JWTs checked locally against a key set (DESIGN §9.1 access tokens, §9.4
// security event tokens): a JWKS file, or one fetched from the provider in the
// background (jwks-source.ts, §13.1). Never a key named by the token (jwk, jku,
// x5u, x5c are ignored), and no network call but the shared refresh a `kid`
// naming no known key asks for. Every key is imported once, when its set is
// read, into a KeyObject with the assertion verifier's own rules (RSA ≥ 2048
// bits, a sane exponent, P-256): a bad file stops the service; a bad key of a
// fetched set is skipped (importUsableJwks). A token is decoded
// by jws.ts, its keys picked by `kid` and by the algorithm of the key, its
// signature checked with node:crypto, and its claims by the pure checks below,
// which are the checks of jose's jwtVerify.
import type { KeyObject } from 'node:crypto';
import type { JsonWebKeyLike } from '../../lib/config.js';
import { ConfigError, InvalidCredentials, InvalidTimestamp, KeysUnavailable } from '../../lib/errors.js';
import { importVerifyKey, signedBy } from './assertion.js';
import { parseCompactJws } from './jws.js';

export type JwtAlgorithm = 'RS256' | 'ES256';

/** The algorithm a key verifies, by its type. */
const ALGORITHM_OF: Record<string, JwtAlgorithm> = { RSA: 'RS256', EC: 'ES256' };

/** ES256 signatures are r || s, 32 bytes each (RFC 7518 §3.4). */
const ES256_SIGNATURE_BYTES = 64;

export interface JwksKey {
  key: KeyObject;
  alg: JwtAlgorithm;
  /** As the JWK has it (any JSON value, or undefined). */
  kid: unknown;
  /** The only signature length this key can have made: the RSA modulus's (no short form), or 64. */
  signatureBytes: number;
  /** False for a key no token can select (selectableJwk). */
  selectable: boolean;
}

/**
 * Whether a token may select `jwk` at all, by the members that limit its use
 * (RFC 7517 §4): `use` absent or "sig", `key_ops` without repeats, `alg`
 * absent or the key's own, `ext` absent or a boolean. jose's rules; such a
 * key stays in the file but verifies nothing.
 */
export function selectableJwk(jwk: Record<string, unknown>, alg: JwtAlgorithm): boolean {
  const { use, key_ops: ops, alg: jwkAlg, ext } = jwk;
  return (
    (use === undefined || use === 'sig') &&
    (ops === undefined || (Array.isArray(ops) && new Set(ops).size === ops.length)) &&
    (jwkAlg === undefined || jwkAlg === alg) &&
    (ext === undefined || typeof ext === 'boolean')
  );
}

/**
 * The keys a token with `alg` and `kid` may be signed by: a key of that
 * algorithm, named by the token's `kid` when it has one. A `kid` that is not
 * a string names no key.
 */
export function candidateKeys(keys: readonly JwksKey[], alg: string, kid: unknown): JwksKey[] {
  return keys.filter((k) => k.selectable && k.alg === alg && (kid === undefined || (typeof kid === 'string' && kid === k.kid)));
}

/** Imports every key of a JWKS file once; a key of another type or an unusable one is a ConfigError of `variable`. */
export function importJwks(jwks: readonly JsonWebKeyLike[], variable: string, algorithms: readonly JwtAlgorithm[]): JwksKey[] {
  return jwks.map((jwk, i) => {
    const alg = ALGORITHM_OF[jwk.kty];
    if (!alg || !algorithms.includes(alg)) throw new ConfigError(variable, `key ${i}: kty ${jwk.kty} is not one of ${algorithms.join(', ')}`);
    let key: KeyObject;
    try {
      // A pasted key pair imports as its public key: createPublicKey reads only a JWK's public members.
      key = importVerifyKey(jwk, alg);
    } catch (e) {
      throw new ConfigError(variable, `key ${i}: unusable: ${(e as Error).message}`);
    }
    const signatureBytes = alg === 'RS256' ? Math.ceil((key.asymmetricKeyDetails?.modulusLength ?? 0) / 8) : ES256_SIGNATURE_BYTES;
    return { key, alg, kid: jwk.kid, signatureBytes, selectable: selectableJwk(jwk, alg) };
  });
}

/** Why one JWK of a set cannot verify anything, or the key: importJwks's rules, for one key. */
function importOne(jwk: unknown, algorithms: readonly JwtAlgorithm[]): JwksKey | string {
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) return 'not a JSON object';
  const kty = (jwk as { kty?: unknown }).kty;
  if (typeof kty !== 'string') return 'no "kty"';
  try {
    return importJwks([jwk as JsonWebKeyLike], 'key', algorithms)[0];
  } catch (e) {
    // ConfigError's message starts "key: key 0: "; keep the reason.
    return (e as Error).message.replace(/^key: key 0: /, '');
  }
}

/**
 * A fetched set (DESIGN §13.1): the keys that pass importJwks's rules, and for
 * each one that does not, its position, `kid` and why, to be logged. A set
 * whose keys all fail is the caller's to refuse.
 */
export function importUsableJwks(jwks: readonly unknown[], algorithms: readonly JwtAlgorithm[]): { keys: JwksKey[]; usable: unknown[]; skipped: Array<{ index: number; kid?: string; reason: string }> } {
  const keys: JwksKey[] = [];
  const usable: unknown[] = [];
  const skipped: Array<{ index: number; kid?: string; reason: string }> = [];
  jwks.forEach((jwk, index) => {
    const got = importOne(jwk, algorithms);
    if (typeof got !== 'string') {
      keys.push(got);
      usable.push(jwk);
      return;
    }
    const kid = (jwk as { kid?: unknown } | null)?.kid;
    skipped.push({ index, ...(typeof kid === 'string' ? { kid: kid.slice(0, 100) } : {}), reason: got });
  });
  return { keys, usable, skipped };
}

/**
 * Where a verifier's keys come from: a fixed set (a file), or one fetched from
 * the provider (jwks-source.ts). `keys` is read on every token, so it is a
 * plain field; undefined while no set has arrived.
 */
export interface KeySet {
  readonly keys: readonly JwksKey[] | undefined;
  /** For a token whose `kid` names no known key: the shared, rate-limited refresh, bounded in time; the keys after it. */
  refreshForUnknownKid(): Promise<readonly JwksKey[] | undefined>;
  /** Retry-After while there are no keys, seconds. */
  readonly retryAfterSeconds: number;
}

/** A set that never changes: a file's. */
export function fixedKeySet(keys: readonly JwksKey[]): KeySet {
  return { keys, refreshForUnknownKid: async () => keys, retryAfterSeconds: 0 };
}

/** What a verifier requires of a token beyond its signature. */
export interface JwtRules {
  /** The header's `typ`, as a media type (sameMediaType); unchecked when absent. */
  typ?: string;
  /** The `iss` required, when set. */
  issuer?: string;
  /** An `aud` (a string, or one of an array) required, when set. */
  audience?: string;
  /** Claims that must be present. */
  requiredClaims?: readonly string[];
  /** Clock skew allowed on `nbf` and `exp`, seconds. */
  skewSeconds: number;
}

/**
 * `typ` names `expected` (RFC 7515 §4.1.9): media types compare
 * case-insensitively and "application/" may be left out.
 */
export function sameMediaType(typ: unknown, expected: string): boolean {
  const normalized = (t: string) => (t.includes('/') ? t.toLowerCase() : `application/${t.toLowerCase()}`);
  return typeof typ === 'string' && normalized(typ) === normalized(expected);
}

/** `aud` is `audience`, or an array holding it (RFC 7519 §4.1.3). */
export function audienceMatches(aud: unknown, audience: string): boolean {
  return typeof aud === 'string' ? aud === audience : Array.isArray(aud) && aud.includes(audience);
}

/** A NumericDate claim (RFC 7519 §2): a number when present, required or not. */
function numericDate(claims: Record<string, unknown>, name: string, what: string): number | undefined {
  const v = claims[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'number') throw new InvalidCredentials(`${what} "${name}" must be a number`);
  return v;
}

/**
 * The claim checks of a verified JWT, in jose's order: `typ`, the required
 * claims, `iss`, `aud`, the types of `iat`, `nbf` and `exp`, `nbf` not after
 * now + skew, and last `exp` after now − skew (InvalidTimestamp; every other
 * failure is InvalidCredentials). Times compare in whole seconds.
 */
export function checkJwtClaims(header: Record<string, unknown>, claims: Record<string, unknown>, rules: JwtRules, nowMs: number, what: string): void {
  if (rules.typ !== undefined && !sameMediaType(header.typ, rules.typ)) throw new InvalidCredentials(`${what} "typ" must be ${rules.typ}`);
  const required = [...(rules.requiredClaims ?? []), ...(rules.audience !== undefined ? ['aud'] : []), ...(rules.issuer !== undefined ? ['iss'] : [])];
  for (const name of required) if (!Object.hasOwn(claims, name)) throw new InvalidCredentials(`${what} needs "${name}"`);
  if (rules.issuer !== undefined && claims.iss !== rules.issuer) throw new InvalidCredentials(`${what} "iss" is not the trusted issuer`);
  if (rules.audience !== undefined && !audienceMatches(claims.aud, rules.audience)) throw new InvalidCredentials(`${what} "aud" does not name this service`);
  const now = Math.floor(nowMs / 1000);
  numericDate(claims, 'iat', what);
  const nbf = numericDate(claims, 'nbf', what);
  if (nbf !== undefined && nbf > now + rules.skewSeconds) throw new InvalidCredentials(`${what} is not valid yet ("nbf")`);
  const exp = numericDate(claims, 'exp', what);
  if (exp !== undefined && exp <= now - rules.skewSeconds) throw new InvalidTimestamp(`${what} has expired`);
}

export interface VerifiedJwt {
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
}

export type JwtVerify = (token: string, nowMs: number) => Promise<VerifiedJwt>;

/**
 * A verifier of JWTs signed by a key of `jwks` (a file's keys, imported now)
 * with one of `algorithms`, meeting `rules` (jwtVerifier).
 */
export function localJwtVerifier(jwks: readonly JsonWebKeyLike[], variable: string, algorithms: readonly JwtAlgorithm[], rules: JwtRules, what: string): JwtVerify {
  return jwtVerifier(fixedKeySet(importJwks(jwks, variable, algorithms)), variable, algorithms, rules, what);
}

/**
 * A verifier of JWTs signed by a key of `set` with one of `algorithms`, meeting
 * `rules`: the header and claims, or InvalidTimestamp (expired) /
 * InvalidCredentials (anything else) / KeysUnavailable (no set yet). `what`
 * names the token in errors, `variable` the keys' origin.
 */
export function jwtVerifier(set: KeySet, variable: string, algorithms: readonly JwtAlgorithm[], rules: JwtRules, what: string): JwtVerify {
  return async (token, nowMs) => {
    const jws = parseCompactJws(token, what, algorithms, true);
    let keys = set.keys;
    if (keys === undefined) throw new KeysUnavailable(`no key set from ${variable} yet`, set.retryAfterSeconds);
    let candidates = candidateKeys(keys, jws.alg, jws.header.kid);
    const kid = jws.header.kid;
    // A kid no key has may be the provider's new key: one shared refresh (rate-limited by the set) and one more look.
    if (candidates.length === 0 && typeof kid === 'string' && !keys.some((k) => k.kid === kid)) {
      keys = (await set.refreshForUnknownKid()) ?? keys;
      candidates = candidateKeys(keys, jws.alg, kid);
    }
    let signed = false;
    for (const k of candidates) {
      // The key's algorithm, never the token's: candidateKeys only offers keys of jws.alg.
      if (jws.signature.length === k.signatureBytes && (await signedBy(jws, k.key))) {
        signed = true;
        break;
      }
    }
    if (!signed) throw new InvalidCredentials(`${what} is not signed by a key of ${variable}`);
    checkJwtClaims(jws.header, jws.payload, rules, nowMs, what);
    return { header: jws.header, claims: jws.payload };
  };
}
