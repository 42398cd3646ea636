// Local verification of BrowserID-style assertions (DESIGN §4):
// `Authorization: Assertion <certificate>~<assertion>`, both compact JWS.
// The certificate is signed by a trusted issuer key and names the user's
// public key; the assertion is signed by that key for one of our audiences.
// No network call is ever made. The checks are pure functions below; the
// verifier at the end only adds the signature checks (node:crypto's one-shot
// verify on KeyObjects imported once) and a cache.
import cluster from 'node:cluster';
import { createHash, createPublicKey, verify as verifySignature, type JsonWebKey, type KeyObject } from 'node:crypto';
import { ConfigError, InvalidCredentials, InvalidGeneration, InvalidTimestamp, MOZILLA_ERRORS, Unauthorized } from '../../lib/errors.js';
import { DEFAULTS, type JsonWebKeyLike, type TrustedIssuers, type TrustedKeyLike } from '../../lib/config.js';
import { DSA_SIZES, DsaPublicKey, dsaKeyObject, dsaSignature, parseDsaPublicKey } from '../../lib/dsa.js';
import { issuerMayCertify, normalizeEmail } from '../../lib/email.js';
import { splitAuthorization } from './authorization.js';
import { base64UrlDecode, jsonSegment, parseCompactJws, type CompactJws } from './jws.js';

export const SCHEMES = ['Assertion', 'BrowserID'] as const;
export const ALGORITHMS = ['RS256', 'ES256', 'EdDSA', 'Ed25519', 'DS128', 'DS256'] as const;
export type Algorithm = (typeof ALGORITHMS)[number];
/** A public key ready to import: a JWK, or a checked BrowserID DSA key (no JWK exists for DSA). */
export type PublicKey = JsonWebKeyLike | DsaPublicKey;

export { MAX_AUTHORIZATION_LENGTH, MAX_CREDENTIALS_LENGTH } from './authorization.js';
/** RSA moduli above 4096 bits are refused (cost), below 2048 as too weak (RFC 7518 §3.3). */
const MAX_RSA_MODULUS_B64 = 683;
const MAX_RSA_MODULUS_DECIMAL = 1234;
const MIN_RSA_MODULUS_BITS = 2048;

// ---- pure core ----

/**
 * Splits the Authorization header into the certificate and the assertion
 * (the outer grammar is splitAuthorization's, shared by every scheme).
 */
export function parseAuthorization(header: string | undefined): { scheme: string; certificate: string; assertion: string } {
  const { name, credentials } = splitAuthorization(header);
  const scheme = SCHEMES.find((s) => s.toLowerCase() === name.toLowerCase());
  if (!scheme) throw new Unauthorized(`unsupported authorization scheme; use ${SCHEMES.join(' or ')}`, { answer: MOZILLA_ERRORS.unsupportedScheme.entry });
  if (credentials === '') throw new Unauthorized('missing assertion');
  return { scheme, ...splitBundle(credentials) };
}

/**
 * A bundle's certificate and assertion: `<certificate>~<assertion>`, or the
 * old style (PyBrowserID `new_style=False`) that has no "~": base64url of
 * `{"certificates": [<certificate>], "assertion": <assertion>}`. One
 * certificate only, as in the new style. Each step is one linear pass.
 */
export function splitBundle(credentials: string): { certificate: string; assertion: string } {
  // indexOf rather than split: 16 KB of "~" would make 16 K strings.
  const tilde = credentials.indexOf('~');
  if (tilde === -1) {
    const old = oldStyleBundle(credentials);
    if (old) return old;
  } else if (tilde > 0 && tilde < credentials.length - 1 && !credentials.includes('~', tilde + 1)) {
    return { certificate: credentials.slice(0, tilde), assertion: credentials.slice(tilde + 1) };
  }
  throw new InvalidCredentials('expected <certificate>~<assertion>');
}

function oldStyleBundle(credentials: string): { certificate: string; assertion: string } | null {
  let o: Record<string, unknown>;
  try {
    o = jsonSegment(credentials, 'bundle');
  } catch {
    return null;
  }
  const { certificates, assertion } = o;
  if (!Array.isArray(certificates) || certificates.length !== 1) return null;
  const [certificate] = certificates as unknown[];
  const usable = (v: unknown): v is string => typeof v === 'string' && v !== '' && !v.includes('~');
  return usable(certificate) && usable(assertion) ? { certificate, assertion } : null;
}

export type DecodedJws = CompactJws<Algorithm>;

/** Decodes (without verifying) a compact JWS whose algorithm we accept. */
export function decodeJws(compact: string, what: string): DecodedJws {
  return parseCompactJws(compact, what, ALGORITHMS);
}

/** The algorithms a public key can verify; empty when we support none. */
export function algorithmsForKey(jwk: PublicKey): Algorithm[] {
  if (jwk instanceof DsaPublicKey) return [jwk.alg];
  if (jwk.kty === 'RSA') return ['RS256'];
  if (jwk.kty === 'EC' && jwk.crv === 'P-256') return ['ES256'];
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519') return ['EdDSA', 'Ed25519'];
  return [];
}

function b64Member(o: Record<string, unknown>, name: string, maxLength: number): string {
  const v = o[name];
  if (typeof v !== 'string' || v.length === 0 || v.length > maxLength || !base64UrlDecode(v)) {
    throw new InvalidCredentials(`certificate public-key "${name}" is not valid`);
  }
  return v;
}

function decimalToBase64Url(decimal: string): string {
  let hex = BigInt(decimal).toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  return Buffer.from(hex, 'hex').toString('base64url');
}

/**
 * A key in BrowserID's forms (certificates and support documents): RS with
 * decimal `n` and `e` (as a public JWK), or DS with hex `p`, `q`, `g`, `y`.
 */
export function browserIdPublicKey(o: Record<string, unknown>, what = 'certificate public-key'): PublicKey {
  if (o.algorithm === 'DS') {
    try {
      return parseDsaPublicKey(o);
    } catch (e) {
      throw new InvalidCredentials(`${what}: ${(e as Error).message}`);
    }
  }
  if (o.algorithm !== 'RS') throw new InvalidCredentials(`${what} algorithm must be RS or DS`);
  const { n, e } = o;
  if (typeof n !== 'string' || !new RegExp(`^[1-9][0-9]{0,${MAX_RSA_MODULUS_DECIMAL - 1}}$`).test(n)) {
    throw new InvalidCredentials(`${what} "n" must be a decimal string`);
  }
  if (typeof e !== 'string' || !/^[1-9][0-9]{0,9}$/.test(e)) throw new InvalidCredentials(`${what} "e" must be a decimal string`);
  return { kty: 'RSA', n: decimalToBase64Url(n), e: decimalToBase64Url(e) };
}

/**
 * The user's public key from a certificate: a public-only JWK (private
 * members dropped), or one of BrowserID's forms (browserIdPublicKey).
 */
export function userPublicKey(value: unknown): PublicKey {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidCredentials('certificate public-key must be an object');
  const o = value as Record<string, unknown>;
  if (o.kty === undefined && o.algorithm !== undefined) return browserIdPublicKey(o);
  switch (o.kty) {
    case 'RSA':
      return { kty: 'RSA', n: b64Member(o, 'n', MAX_RSA_MODULUS_B64), e: b64Member(o, 'e', 8) };
    case 'EC':
      if (o.crv !== 'P-256') throw new InvalidCredentials('certificate public-key curve must be P-256');
      return { kty: 'EC', crv: 'P-256', x: b64Member(o, 'x', 43), y: b64Member(o, 'y', 43) };
    case 'OKP':
      if (o.crv !== 'Ed25519') throw new InvalidCredentials('certificate public-key curve must be Ed25519');
      return { kty: 'OKP', crv: 'Ed25519', x: b64Member(o, 'x', 43) };
    default:
      throw new InvalidCredentials('certificate public-key type must be RSA, EC or OKP');
  }
}

function timeClaim(payload: Record<string, unknown>, name: string, what: string, required: boolean): number | undefined {
  const v = payload[name];
  if (v === undefined && !required) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new InvalidCredentials(`${what} "${name}" must be a time in ms since epoch`);
  }
  return v;
}

/** The directory keys users by email (normalised, lib/email.ts) and refuses longer ones. */
const MAX_EMAIL_LENGTH = 255;
const EMAIL = /^[^\s@\x00-\x1f\x7f]{1,64}@[^\s@\x00-\x1f\x7f]{1,255}$/;

export interface CertificateClaims {
  issuer: string;
  email: string;
  iatMs?: number;
  expMs: number;
  publicKey: PublicKey;
  /** The generation claim as sent (undefined when absent); checked by parseGeneration. */
  generation: unknown;
}

/** Checks the certificate claims' shapes (not their times). */
export function certificateClaims(payload: Record<string, unknown>, generationClaim: string): CertificateClaims {
  const issuer = payload.iss;
  if (typeof issuer !== 'string' || issuer === '') throw new InvalidCredentials('certificate "iss" must be a string');
  const principal = payload.principal;
  const raw = typeof principal === 'object' && principal !== null ? (principal as Record<string, unknown>).email : undefined;
  // Length first: the regex and NFC run on at most a few hundred characters.
  const email = typeof raw === 'string' && raw.length <= MAX_EMAIL_LENGTH ? normalizeEmail(raw) : undefined;
  if (email === undefined || email.length > MAX_EMAIL_LENGTH || !EMAIL.test(email)) throw new InvalidCredentials('certificate "principal.email" must be an email address');
  return {
    issuer,
    email,
    iatMs: timeClaim(payload, 'iat', 'certificate', false),
    expMs: timeClaim(payload, 'exp', 'certificate', true)!,
    publicKey: userPublicKey(payload['public-key']),
    generation: payload[generationClaim],
  };
}

/** Checks the assertion claims: `aud` one of ours, `exp` a time. */
export function assertionClaims(payload: Record<string, unknown>, audiences: readonly string[]): { audience: string; expMs: number } {
  const audience = payload.aud;
  if (typeof audience !== 'string') throw new InvalidCredentials('assertion "aud" must be a string');
  if (!audiences.includes(audience)) throw new InvalidCredentials('assertion audience is not accepted here');
  return { audience, expMs: timeClaim(payload, 'exp', 'assertion', true)! };
}

/**
 * Expired beyond the skew, issued beyond the skew in the future, or expiring
 * more than `maxLifetimeMs` (plus the skew) after now → InvalidTimestamp.
 * The last bounds what a stolen assertion or certificate is worth.
 */
export function checkTimes(t: { expMs: number; iatMs?: number }, nowMs: number, skewMs: number, maxLifetimeMs: number, what: string): void {
  if (t.expMs + skewMs < nowMs) throw new InvalidTimestamp(`${what} has expired`);
  if (t.iatMs !== undefined && t.iatMs - skewMs > nowMs) throw new InvalidTimestamp(`${what} is issued in the future`);
  if (t.expMs - skewMs > nowMs + maxLifetimeMs) throw new InvalidTimestamp(`${what} expires too far in the future (at most ${maxLifetimeMs / 1000} s)`);
}

/** Absent → undefined; present but not a non-negative safe integer → InvalidGeneration. */
export function parseGeneration(raw: unknown): number | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'number' || !Number.isSafeInteger(raw) || raw < 0) {
    throw new InvalidGeneration('generation must be a non-negative integer');
  }
  return raw;
}

/**
 * A bounded map that forgets the least recently used entries first: beyond
 * `limit` entries, and beyond `maxWeight` in all when `weigh` gives each
 * value a weight (a value heavier than `maxWeight` alone is not kept).
 * `weigh` must give a value the same weight every time.
 */
export class LruCache<V> {
  private readonly map = new Map<string, V>();
  private total = 0;
  constructor(
    readonly limit: number,
    readonly maxWeight = Infinity,
    private readonly weigh: (value: V) => number = () => 0,
  ) {}

  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  set(key: string, value: V): void {
    this.delete(key);
    const w = this.weigh(value);
    if (w > this.maxWeight) return;
    while (this.map.size > 0 && (this.map.size >= this.limit || this.total + w > this.maxWeight)) {
      this.delete(this.map.keys().next().value as string);
    }
    this.map.set(key, value);
    this.total += w;
  }

  delete(key: string): void {
    const v = this.map.get(key);
    if (v === undefined) return;
    this.map.delete(key);
    this.total -= this.weigh(v);
  }

  get size(): number {
    return this.map.size;
  }

  /** The weights of the entries held, summed. */
  get weight(): number {
    return this.total;
  }
}

// ---- verifier: signatures and the certificate cache ----

export interface VerifierOptions {
  trustedIssuers: TrustedIssuers;
  audiences: readonly string[];
  skewSeconds: number;
  generationClaim: string;
  /** Longest lifetime beyond now, seconds; defaults MAX_ASSERTION_LIFETIME / MAX_CERTIFICATE_LIFETIME. */
  maxAssertionLifetime?: number;
  maxCertificateLifetime?: number;
  /** Verified certificates kept; default 10 000. */
  cacheSize?: number;
  /** Memory the kept certificates may take in all, bytes (cachedCertificateBytes); default CERTIFICATE_CACHE_BYTES. */
  cacheBytes?: number;
}

export interface VerifiedAssertion {
  email: string;
  issuer: string;
  /** Absent when the issuer supplies none. */
  generation?: number;
}

interface VerifiedCertificate {
  claims: CertificateClaims;
  userKey: KeyObject;
  userAlgorithms: Algorithm[];
}

interface IssuerKey {
  key: KeyObject;
  algorithms: Algorithm[];
}

interface Issuer {
  keys: IssuerKey[];
  domains: readonly string[];
}

export interface AssertionVerifier {
  verify(authorization: string | undefined, nowMs?: number): Promise<VerifiedAssertion>;
  /** The same for the credentials of a header already split (splitAuthorization) and found to name an assertion scheme. */
  verifyCredentials(credentials: string, nowMs?: number): Promise<VerifiedAssertion>;
  /** Certificates currently cached (for tests and metrics). */
  readonly cachedCertificates: number;
  /** Their memory by cachedCertificateBytes, bytes. */
  readonly cachedCertificateBytes: number;
}

/** The node:crypto key type each algorithm needs. */
const KEY_TYPE: Record<Algorithm, string> = { RS256: 'rsa', ES256: 'ec', EdDSA: 'ed25519', Ed25519: 'ed25519', DS128: 'dsa', DS256: 'dsa' };

/**
 * RSA public exponents must be odd and at least 3 (NIST SP 800-56B §6.4.1.4.3;
 * the one-way property needs it): with e = 1 anyone "signs" by writing the
 * padded digest itself as the signature.
 */
export function isAcceptableRsaExponent(e: bigint): boolean {
  return e >= 3n && e % 2n === 1n;
}

/**
 * A public key as a KeyObject that can verify `alg`; throws when it cannot
 * (bad members, a point off the curve, an RSA modulus under 2048 bits or an
 * unacceptable exponent, a DSA key of another size, or `key_ops` that forbid
 * verifying, as WebCrypto would).
 */
export function importVerifyKey(jwk: PublicKey, alg: Algorithm): KeyObject {
  if (jwk instanceof DsaPublicKey) {
    if (jwk.alg !== alg) throw new TypeError(`not a key for ${alg}`);
    return dsaKeyObject(jwk);
  }
  const ops = jwk.key_ops;
  if (ops !== undefined && (!Array.isArray(ops) || !ops.includes('verify') || ops.some((o) => o !== 'verify'))) {
    throw new TypeError('key_ops does not allow "verify"');
  }
  const key = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' });
  if (key.asymmetricKeyType !== KEY_TYPE[alg]) throw new TypeError(`not a key for ${alg}`);
  if (alg === 'ES256' && key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') throw new TypeError('not a P-256 key');
  if (alg === 'RS256' && (key.asymmetricKeyDetails?.modulusLength ?? 0) < MIN_RSA_MODULUS_BITS) {
    throw new TypeError(`RSA keys must have at least ${MIN_RSA_MODULUS_BITS} bits`);
  }
  if (alg === 'RS256' && !isAcceptableRsaExponent(key.asymmetricKeyDetails?.publicExponent ?? 0n)) {
    throw new TypeError('RSA public exponents must be odd and at least 3');
  }
  return key;
}

/** JWS ES256 signatures are r || s (RFC 7518 §3.4), not DER; so are BrowserID's DSA ones. */
const VERIFY_OPTIONS: Record<Algorithm, { digest: string | null; dsaEncoding?: 'ieee-p1363' }> = {
  RS256: { digest: 'sha256' },
  ES256: { digest: 'sha256', dsaEncoding: 'ieee-p1363' },
  EdDSA: { digest: null },
  Ed25519: { digest: null },
  DS128: { digest: DSA_SIZES.DS128.digest, dsaEncoding: 'ieee-p1363' },
  DS256: { digest: DSA_SIZES.DS256.digest, dsaEncoding: 'ieee-p1363' },
};

/**
 * An RSA signature left-padded with zero bytes to the modulus length, as
 * OpenSSL requires (RFC 8017 §8.2.2). PyBrowserID writes signatures as plain
 * integers, so about 1 in 256 arrives a byte short; the integer is the same.
 */
export function padRsaSignature(signature: Buffer, modulusBytes: number): Buffer {
  return signature.length < modulusBytes ? Buffer.concat([Buffer.alloc(modulusBytes - signature.length), signature]) : signature;
}

/** RSA keys whose check is cheaper done at once than in the thread pool: at most 2048 bits, exponent at most 65537. */
export function cheapRsaKey(key: KeyObject): boolean {
  const details = key.asymmetricKeyDetails;
  return (details?.modulusLength ?? Infinity) <= 2048 && (details?.publicExponent ?? Infinity) <= 65537n;
}

/** Whether this process is one of login's cluster workers (LOGIN_WORKERS > 1). */
const IN_WORKER = cluster.isWorker;

/**
 * Whether a signature is checked at once on the event loop rather than in libuv's thread pool. An
 * RSA-2048 check with a small exponent costs ~24 µs: handing it over costs the event loop about as
 * much and the pool the check again, so always. An ES256 check, only in a cluster worker: there the
 * other workers keep the other cores busy, so the pool adds its hand-off and nothing else (measured:
 * docs/benchmarks.md). A single login process keeps it in the pool, which lends it a second core.
 */
export function checkAtOnce(alg: Algorithm, key: KeyObject, inWorker: boolean): boolean {
  if (alg === 'RS256') return cheapRsaKey(key);
  return inWorker && alg === 'ES256';
}

/** True when `jws` is signed by `key` with `jws.alg` (the caller checked the key suits it); never rejects. */
export function signedBy(jws: DecodedJws, key: KeyObject, inWorker = IN_WORKER): Promise<boolean> {
  const { digest, dsaEncoding } = VERIFY_OPTIONS[jws.alg];
  const signature =
    jws.alg === 'RS256'
      ? padRsaSignature(jws.signature, Math.ceil((key.asymmetricKeyDetails?.modulusLength ?? 0) / 8))
      : jws.alg === 'DS128' || jws.alg === 'DS256'
        ? dsaSignature(jws.signature, jws.alg)
        : jws.signature;
  if (!signature) return Promise.resolve(false);
  const input = Buffer.from(jws.signingInput, 'latin1');
  const verifyKey = dsaEncoding ? { key, dsaEncoding } : key;
  if (checkAtOnce(jws.alg, key, inWorker)) {
    try {
      return Promise.resolve(verifySignature(digest, input, verifyKey, signature));
    } catch {
      return Promise.resolve(false);
    }
  }
  // The callback form runs in libuv's thread pool, as WebCrypto did: the event loop
  // serves other requests meanwhile.
  return new Promise((resolve) => {
    try {
      verifySignature(digest, input, verifyKey, signature, (err, ok) => resolve(!err && ok));
    } catch {
      resolve(false);
    }
  });
}

/**
 * A TRUSTED_ISSUERS key: a JWK (its `alg`, if any, limits what it verifies) or,
 * pasted as an IdP publishes it in its support document, `{"algorithm": "RS" | "DS", …}`.
 */
function importIssuerKey(k: TrustedKeyLike): IssuerKey {
  let publicKey: PublicKey;
  if (k.kty === undefined) {
    publicKey = browserIdPublicKey(k, 'key');
  } else {
    const { d: _private, ...publicJwk } = k;
    publicKey = publicJwk as JsonWebKeyLike;
  }
  const algorithms = algorithmsForKey(publicKey).filter((a) => k.alg === undefined || k.alg === a || (k.alg === 'EdDSA' && a === 'Ed25519'));
  if (algorithms.length === 0) throw new TypeError('unsupported key (use RSA, EC P-256, Ed25519, or BrowserID\'s RS or DS form)');
  return { key: importVerifyKey(publicKey, algorithms[0]), algorithms };
}

/** Imports every trusted issuer key once; an unusable key stops the service at start. */
function importIssuers(trusted: TrustedIssuers): Map<string, Issuer> {
  const out = new Map<string, Issuer>();
  for (const [issuer, { keys: issuerKeys, domains }] of trusted) {
    const keys: IssuerKey[] = [];
    for (const k of issuerKeys) {
      try {
        keys.push(importIssuerKey(k));
      } catch (e) {
        throw new ConfigError('TRUSTED_ISSUERS', `issuer ${issuer}: unusable key: ${(e as Error).message}`);
      }
    }
    out.set(issuer, { keys, domains });
  }
  return out;
}

/**
 * What one cached certificate costs, bytes, by its key's algorithm: the
 * imported key (OpenSSL's memory, grown on first use, outside the V8 heap and
 * its --max-old-space-size) and the claims on the heap. RSS and retained heap
 * per entry with 10 000 certificates through the verifier (ES256 5.9 KB, Ed25519
 * 2.4, RSA-2048 and 4096 6.5, DS128 5.0, DS256 7.3), rounded up.
 */
const CACHED_CERTIFICATE_BYTES: Record<Algorithm, number> = {
  ES256: 7 * 1024,
  EdDSA: 3 * 1024,
  Ed25519: 3 * 1024,
  RS256: 8 * 1024,
  DS128: 6 * 1024,
  DS256: 8 * 1024,
};

export function cachedCertificateBytes(certificate: { userAlgorithms: readonly Algorithm[] }): number {
  return CACHED_CERTIFICATE_BYTES[certificate.userAlgorithms[0]];
}

/**
 * The certificate cache's memory bound, bytes: about 4 700 ES256 certificates
 * (the count bound, 10 000, holds only smaller keys). At 10 000 ES256 keys the
 * cache took ~70 MB and login's peak RSS reached 154 MB; with this bound,
 * 126 MB (`npm run bench -- --only start`, 20 000 users beyond the cache). The keys are kept
 * imported rather than imported on each use: importing a P-256 key checks the
 * point (a scalar multiplication): +140 µs of login CPU per login in two
 * bench/ab.ts runs (492 against 347, 711 against 571 µs), where a bounded
 * cache costs a miss only to certificates beyond it.
 */
export const CERTIFICATE_CACHE_BYTES = 32 * 1024 * 1024;

export async function createAssertionVerifier(opts: VerifierOptions): Promise<AssertionVerifier> {
  const issuers = importIssuers(opts.trustedIssuers);
  const cache = new LruCache<VerifiedCertificate>(opts.cacheSize ?? 10_000, opts.cacheBytes ?? CERTIFICATE_CACHE_BYTES, cachedCertificateBytes);
  const skewMs = opts.skewSeconds * 1000;
  const maxAssertionMs = (opts.maxAssertionLifetime ?? DEFAULTS.MAX_ASSERTION_LIFETIME) * 1000;
  const maxCertificateMs = (opts.maxCertificateLifetime ?? DEFAULTS.MAX_CERTIFICATE_LIFETIME) * 1000;

  async function verifyCertificate(certificate: string): Promise<VerifiedCertificate> {
    const decoded = decodeJws(certificate, 'certificate');
    const iss = decoded.payload.iss;
    const issuer = typeof iss === 'string' ? issuers.get(iss) : undefined;
    if (!issuer) throw new InvalidCredentials('certificate issuer is not trusted');
    let signed = false;
    for (const k of issuer.keys) {
      if (k.algorithms.includes(decoded.alg) && (await signedBy(decoded, k.key))) {
        signed = true;
        break;
      }
    }
    if (!signed) throw new InvalidCredentials('certificate signature is not valid');
    const claims = certificateClaims(decoded.payload, opts.generationClaim);
    // Users are keyed by e-mail alone: another issuer must not speak for this domain's users.
    if (!issuerMayCertify(issuer.domains, claims.email)) throw new InvalidCredentials('certificate issuer may not certify this e-mail domain');
    const userAlgorithms = algorithmsForKey(claims.publicKey);
    let userKey: KeyObject;
    try {
      userKey = importVerifyKey(claims.publicKey, userAlgorithms[0]);
    } catch {
      throw new InvalidCredentials('certificate public-key is not usable');
    }
    return { claims, userKey, userAlgorithms };
  }

  return {
    get cachedCertificates() {
      return cache.size;
    },
    get cachedCertificateBytes() {
      return cache.weight;
    },
    async verify(authorization, nowMs = Date.now()) {
      const { certificate, assertion } = parseAuthorization(authorization);
      return verifyBundle(certificate, assertion, nowMs);
    },
    async verifyCredentials(credentials, nowMs = Date.now()) {
      const { certificate, assertion } = splitBundle(credentials);
      return verifyBundle(certificate, assertion, nowMs);
    },
  };

  /** Both halves of a bundle (a cache hit skips the certificate's own checks but never its times). */
  async function verifyBundle(certificate: string, assertion: string, nowMs: number): Promise<VerifiedAssertion> {
    const cacheKey = createHash('sha256').update(certificate).digest('base64url');
    const expired = (c: VerifiedCertificate) => c.claims.expMs + skewMs < nowMs;
    let cert = cache.get(cacheKey);
    if (!cert) {
      cert = await verifyCertificate(certificate);
      // Not an expired one: it would only push out a certificate still in use.
      if (!expired(cert)) cache.set(cacheKey, cert);
    }
    // Times are checked on every use, cached or not.
    try {
      checkTimes(cert.claims, nowMs, skewMs, maxCertificateMs, 'certificate');
    } catch (e) {
      if (expired(cert)) cache.delete(cacheKey);
      throw e;
    }
    const decoded = decodeJws(assertion, 'assertion');
    if (!cert.userAlgorithms.includes(decoded.alg) || !(await signedBy(decoded, cert.userKey))) {
      throw new InvalidCredentials('assertion is not signed by the certified key');
    }
    const { expMs } = assertionClaims(decoded.payload, opts.audiences);
    checkTimes({ expMs }, nowMs, skewMs, maxAssertionMs, 'assertion');
    const generation = parseGeneration(cert.claims.generation);
    return { email: cert.claims.email, issuer: cert.claims.issuer, ...(generation !== undefined ? { generation } : {}) };
  }
}
