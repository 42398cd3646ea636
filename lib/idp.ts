// Identity-provider helpers for tests, the embedded dev stack and the CLI:
// issuer and user keys, BrowserID-style certificates and assertions (compact
// JWS, times in ms since epoch), and a development issuer kept on disk.
// Verification lives in services/login/assertion.ts; this file only signs.
import { CompactSign, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import { generateKeyPair as generateNodeKeyPair, sign as signWithNode, type KeyObject } from 'node:crypto';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { DEFAULTS, type JsonWebKeyLike, type TrustedIssuers } from './config.js';
import { browserIdDsaFromKeyObject, DSA_SIZES, type BrowserIdDsaPublicKey, type DsaAlgorithm } from './dsa.js';
import { ANY_DOMAIN } from './email.js';

export type SigningAlg = 'RS256' | 'ES256' | 'EdDSA';

export interface KeyPair {
  alg: SigningAlg;
  privateKey: CryptoKey;
  /** The public half as a JWK (with `alg`), ready for TRUSTED_ISSUERS or a certificate. */
  publicJwk: JsonWebKeyLike;
}

/** BrowserID's legacy public-key form: RSA modulus and exponent as decimal strings. */
// A type, not an interface, so it fits TRUSTED_ISSUERS' open key shape.
export type LegacyRsaPublicKey = {
  algorithm: 'RS';
  n: string;
  e: string;
};

export async function generateKey(alg: SigningAlg = 'ES256'): Promise<KeyPair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { alg, privateKey, publicJwk: { ...(await exportJWK(publicKey)), alg } as JsonWebKeyLike };
}

/** A BrowserID DSA key (jose has no DS128/DS256): node:crypto signs, and the public half is in the DS form. */
export interface DsaKeyPair {
  alg: DsaAlgorithm;
  privateKey: KeyObject;
  publicKey: BrowserIdDsaPublicKey;
}

/** New DSA parameters and key of the algorithm's size (DS256's parameters take about a second). */
export async function generateDsaKey(alg: DsaAlgorithm): Promise<DsaKeyPair> {
  const { pBits, qBits } = DSA_SIZES[alg];
  const { publicKey, privateKey } = await promisify(generateNodeKeyPair)('dsa', { modulusLength: pBits, divisorLength: qBits });
  return { alg, privateKey, publicKey: browserIdDsaFromKeyObject(publicKey) };
}

export type Signer = Pick<KeyPair, 'alg' | 'privateKey'> | Pick<DsaKeyPair, 'alg' | 'privateKey'>;

/** Signs any JSON payload as a compact JWS; tests use it to sign deliberately odd claims. */
export async function signJws(key: Signer, payload: unknown, header: Record<string, unknown> = {}): Promise<string> {
  if (key.alg === 'DS128' || key.alg === 'DS256') {
    const input = `${Buffer.from(JSON.stringify({ ...header, alg: key.alg })).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
    // r || s, each as wide as q: what PyBrowserID writes and ieee-p1363 means.
    const signature = signWithNode(DSA_SIZES[key.alg].digest, Buffer.from(input), { key: key.privateKey, dsaEncoding: 'ieee-p1363' });
    return `${input}.${signature.toString('base64url')}`;
  }
  const bytes = new TextEncoder().encode(JSON.stringify(payload));
  return new CompactSign(bytes).setProtectedHeader({ ...header, alg: key.alg }).sign(key.privateKey);
}

export interface CertificateOptions {
  issuer: string;
  email: string;
  /** The user's public key: a JWK or the legacy BrowserID RS or DS form. */
  publicKey: JsonWebKeyLike | LegacyRsaPublicKey | BrowserIdDsaPublicKey;
  /** Omitted: no generation claim. */
  generation?: number;
  generationClaim?: string;
  /** Defaults to now. */
  iatMs?: number;
  /** Defaults to iat + ttlSeconds. */
  expMs?: number;
  ttlSeconds?: number;
}

export function certificateClaims(o: CertificateOptions): Record<string, unknown> {
  const iat = o.iatMs ?? Date.now();
  const claims: Record<string, unknown> = {
    iss: o.issuer,
    iat,
    exp: o.expMs ?? iat + (o.ttlSeconds ?? 3600) * 1000,
    principal: { email: o.email },
    'public-key': o.publicKey,
  };
  if (o.generation !== undefined) claims[o.generationClaim ?? DEFAULTS.GENERATION_CLAIM] = o.generation;
  return claims;
}

/** A certificate: the issuer vouches that `publicKey` belongs to `email`. */
export function signCertificate(issuerKey: Signer, o: CertificateOptions): Promise<string> {
  return signJws(issuerKey, certificateClaims(o));
}

export interface AssertionOptions {
  audience: string;
  /** Defaults to now + ttlSeconds. */
  expMs?: number;
  ttlSeconds?: number;
}

/** An assertion: signed with the user's (certified) key for one audience. */
export function signAssertion(userKey: Signer, o: AssertionOptions): Promise<string> {
  return signJws(userKey, { aud: o.audience, exp: o.expMs ?? Date.now() + (o.ttlSeconds ?? 300) * 1000 });
}

/** The BrowserID bundle `cert~assertion` that follows `Assertion ` in the Authorization header. */
export function bundle(certificate: string, assertion: string): string {
  return `${certificate}~${assertion}`;
}

function base64UrlToDecimal(b64: string): string {
  return BigInt(`0x${Buffer.from(b64, 'base64url').toString('hex') || '0'}`).toString(10);
}

/** An RSA JWK in BrowserID's legacy `{"algorithm":"RS","n":"<decimal>","e":"<decimal>"}` form. */
export function legacyRsaPublicKey(jwk: JsonWebKeyLike): LegacyRsaPublicKey {
  if (jwk.kty !== 'RSA' || typeof jwk.n !== 'string' || typeof jwk.e !== 'string') throw new TypeError('not an RSA public JWK');
  return { algorithm: 'RS', n: base64UrlToDecimal(jwk.n), e: base64UrlToDecimal(jwk.e) };
}

// ---- development issuer ----

export const DEV_IDP_FILE = 'dev-idp.json';
export const DEV_ISSUER = 'dev-idp.localhost';

/** Said at start wherever the development issuer is trusted (npm start, or a TRUSTED_ISSUERS file that lists it). */
export const DEV_IDP_WARNING =
  `the development IdP (${DEV_ISSUER}) is TRUSTED: whoever can read its key (${DEV_IDP_FILE}) can log in as any user. ` +
  'Never expose this to the internet; in production TRUSTED_ISSUERS lists the issuers.';

export function trustsDevIdp(trusted: TrustedIssuers): boolean {
  return trusted.has(DEV_ISSUER);
}

interface DevIdpFile {
  issuer: string;
  alg: SigningAlg;
  privateJwk: JWK;
  publicJwk: JsonWebKeyLike;
}

export interface DevAssertionOptions {
  audience: string;
  generation?: number;
  /** Lifetime of certificate and assertion; default 600. */
  ttlSeconds?: number;
}

export interface DevIdp {
  issuer: string;
  /**
   * `{issuer → its public JWK, any e-mail domain}`, to trust this issuer (embedded
   * stack only). Any domain, because the demo and the CLI make assertions for
   * whatever address they are given; that is why only `npm start` trusts it.
   */
  trustedIssuers: TrustedIssuers;
  /** A fresh `cert~assertion` bundle for `email`. */
  makeAssertion(email: string, o: DevAssertionOptions): Promise<string>;
}

async function readDevIdpFile(file: string): Promise<DevIdpFile | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as DevIdpFile;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new Error(`${file}: cannot read the development IdP key: ${(e as Error).message}`);
  }
}

/**
 * The development issuer whose key lives in `<dataDir>/dev-idp.json`: created
 * once (mode 0600, never overwritten) and reused after, so assertions made by
 * the CLI stay valid across restarts of the embedded stack.
 */
export async function loadOrCreateDevIdp(dataDir: string, opts: { generationClaim?: string } = {}): Promise<DevIdp> {
  const file = path.join(dataDir, DEV_IDP_FILE);
  let stored = await readDevIdpFile(file);
  if (!stored) {
    const key = await generateKey('ES256');
    const created: DevIdpFile = { issuer: DEV_ISSUER, alg: key.alg, privateJwk: await exportJWK(key.privateKey), publicJwk: key.publicJwk };
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    try {
      // 'wx': if another process created it first, use theirs.
      await writeFile(file, JSON.stringify(created, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
      stored = created;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      stored = await readDevIdpFile(file);
      if (!stored) throw new Error(`${file}: vanished while being created`);
    }
  }
  const { issuer, alg, publicJwk } = stored;
  const issuerKey: KeyPair = { alg, publicJwk, privateKey: (await importJWK(stored.privateJwk, alg)) as CryptoKey };
  let userKey: Promise<KeyPair> | undefined;
  return {
    issuer,
    trustedIssuers: new Map([[issuer, { keys: [publicJwk], domains: [ANY_DOMAIN] }]]),
    async makeAssertion(email, o) {
      userKey ??= generateKey('ES256');
      const user = await userKey;
      const ttlSeconds = o.ttlSeconds ?? 600;
      const cert = await signCertificate(issuerKey, {
        issuer,
        email,
        publicKey: user.publicJwk,
        generation: o.generation,
        generationClaim: opts.generationClaim,
        ttlSeconds,
      });
      return bundle(cert, await signAssertion(user, { audience: o.audience, ttlSeconds }));
    },
  };
}
