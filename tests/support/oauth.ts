// OAuth access tokens and security event tokens for tests (DESIGN §9.1, §9.4),
// signed with jose by keys made here, and the JWKS files login reads. Access
// tokens and keys have the shape Mozilla accounts gives them (DESIGN §13.2:
// fxa-auth-server's jwt_access_token and jwks): header {alg, kid, typ at+JWT};
// claims aud (Mozilla's own token server, never checked by us), client_id,
// exp, iat, iss, jti, scope, sub, fxa-generation, fxa-profileChangedAt; keys
// with alg, use and fxa-createdAt. tests/support/oauth-provider.ts serves them.
import { KeyObject, randomBytes, sign } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from 'jose';

export const OLDSYNC_SCOPE = 'https://identity.mozilla.com/apps/oldsync';
/** The `aud` Mozilla accounts puts in oldsync access tokens: its own token server. */
export const MOZILLA_TOKEN_SERVER = 'https://token.services.mozilla.com';
/** Firefox desktop's OAuth client id, as Mozilla accounts writes `client_id` (hex). */
export const FIREFOX_CLIENT_ID = '5882386c6d801776';

export interface SigningKey {
  alg: 'RS256' | 'ES256';
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

/** A key pair; its public JWK as Mozilla accounts publishes one (alg, kid, fxa-createdAt, use). */
export async function signingKey(alg: SigningKey['alg'], kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  // fxa-createdAt: seconds, to the hour, as Mozilla's key generator rounds it.
  const createdAt = Math.round(Date.now() / 3_600_000) * 3600;
  return { alg, kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), alg, kid, 'fxa-createdAt': createdAt, use: 'sig' } as JWK };
}

/** A key id as Mozilla accounts makes them: the day and a hash-like suffix. */
export function mozillaKid(): string {
  return `${new Date().toISOString().slice(0, 10)}-${randomBytes(16).toString('hex')}`;
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

/**
 * An access token for `sub` as Mozilla accounts makes one for Firefox Sync,
 * valid for a minute unless `claims` say otherwise (`iss` comes in `claims`).
 */
export function accessToken(key: SigningKey, sub: string, claims: JWTPayload = {}, header: Record<string, unknown> = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return signJwt(
    key,
    {
      aud: MOZILLA_TOKEN_SERVER,
      client_id: FIREFOX_CLIENT_ID,
      exp: now + 60,
      iat: now,
      jti: randomBytes(32).toString('hex'),
      scope: `profile ${OLDSYNC_SCOPE}`,
      sub,
      'fxa-profileChangedAt': (now - 86_400) * 1000,
      ...claims,
    },
    { typ: 'at+JWT', ...header },
  );
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
