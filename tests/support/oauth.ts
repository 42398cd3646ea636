// OAuth access tokens and security event tokens for tests (DESIGN §9.1, §9.4),
// signed with jose by keys made here, and the JWKS files login reads.
import { KeyObject, sign } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from 'jose';

export const OLDSYNC_SCOPE = 'https://identity.mozilla.com/apps/oldsync';

export interface SigningKey {
  alg: 'RS256' | 'ES256';
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export async function signingKey(alg: SigningKey['alg'], kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { alg, kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, use: 'sig' } };
}

/** Writes `{"keys": [...]}` to `dir/name` and returns the path. */
export function writeJwks(dir: string, name: string, keys: SigningKey[]): string {
  const file = path.join(dir, name);
  writeFileSync(file, JSON.stringify({ keys: keys.map((k) => k.publicJwk) }));
  return file;
}

/** A compact JWT with `claims`; `header` overrides the protected header (`kid: undefined` leaves it out). */
export async function signJwt(key: SigningKey, claims: JWTPayload, header: Record<string, unknown> = {}): Promise<string> {
  const protectedHeader = Object.fromEntries(Object.entries({ alg: key.alg, kid: key.kid, ...header }).filter(([, v]) => v !== undefined));
  return new SignJWT(claims).setProtectedHeader(protectedHeader as { alg: string }).sign(key.privateKey);
}

/** An access token for `sub`, valid for a minute unless `claims` say otherwise. */
export function accessToken(key: SigningKey, sub: string, claims: JWTPayload = {}, header: Record<string, unknown> = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return signJwt(key, { sub, scope: `profile ${OLDSYNC_SCOPE}`, iat: now, exp: now + 60, ...claims }, { typ: 'at+jwt', ...header });
}

/** `X-KeyID: <kca>-<base64url of the hex client state's bytes>`. */
export function keyIdHeader(keysChangedAt: number, clientStateHex: string): string {
  return `${keysChangedAt}-${Buffer.from(clientStateHex, 'hex').toString('base64url')}`;
}

/** A token request with an access token (DESIGN §9.1): what to change from a valid one. */
export interface BearerOptions {
  /** X-KeyID's keys_changed_at (default 1000) and client state (hex, default aaaa). */
  kca?: number;
  state?: string;
  /** The fxa-generation claim. */
  generation?: number;
  /** Signs instead of the default key. */
  key?: SigningKey;
  claims?: Record<string, unknown>;
  header?: Record<string, unknown>;
  /** Extra or replacing request headers; undefined leaves one out. */
  headers?: Record<string, string | undefined>;
}

/** The request headers of a token request for `sub` with an access token from `issuer`. */
export async function bearerHeaders(key: SigningKey, issuer: string, sub: string, o: BearerOptions = {}): Promise<Record<string, string>> {
  const claims = { iss: issuer, ...(o.generation !== undefined ? { 'fxa-generation': o.generation } : {}), ...o.claims };
  const token = await accessToken(o.key ?? key, sub, claims, o.header);
  const headers = { Authorization: `Bearer ${token}`, 'X-KeyID': keyIdHeader(o.kca ?? 1000, o.state ?? 'aaaa'), ...o.headers };
  return Object.fromEntries(Object.entries(headers).filter((e): e is [string, string] => e[1] !== undefined));
}

/**
 * A compact JWS with exactly `header` and `claims`, signed by `sign` over its
 * signing input: for tokens jose will not make (alg none, HS256 keyed with a
 * public key, a key of another kind than `alg` names).
 */
export function compactJws(header: Record<string, unknown>, claims: Record<string, unknown>, sign: (input: Buffer) => Buffer): string {
  const input = `${Buffer.from(JSON.stringify(header)).toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  return `${input}.${sign(Buffer.from(input)).toString('base64url')}`;
}

/** Signs as `key` does (RS256, or ES256 as r || s), with node:crypto. */
export function signerOf(key: SigningKey): (input: Buffer) => Buffer {
  const privateKey = KeyObject.from(key.privateKey);
  return (input) => sign('sha256', input, key.alg === 'ES256' ? { key: privateKey, dsaEncoding: 'ieee-p1363' } : privateKey);
}
