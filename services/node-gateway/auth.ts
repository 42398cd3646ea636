// The gateway's rules (DESIGN §6), as plain functions: who is calling, and may
// they reach this path. Order matters: each step trusts only what the steps
// before it have checked.
import type { GatewaySecrets } from '../../lib/config.js';
import { BadRequest, InvalidCredentials, InvalidTimestamp, ServiceUnavailable } from '../../lib/errors.js';
import { hawkMac, normalizedString, parseHawkHeader, payloadHash, safeEqual, staleTimestampChallenge, type HawkAttributes } from '../../lib/hawk.js';
import { derivedSecret, parseToken, tokenSecrets, type TokenPayload, type TokenSecretsMode } from '../../lib/token.js';
import { GenerationalMap } from './generations.js';
import type { NonceStore, NonceVerdict } from './nonce-store.js';

/** Verified tokens remembered: a client sends many requests with one token. */
const TOKEN_CACHE_SIZE = 10_000;

/** The node this gateway guards, as tokens and MACs name it. */
export interface GuardedNode {
  /** NODE_URL: tokens must carry exactly this `node`. */
  url: string;
  /** Host and port the MAC covers: the public URL's, never the Host header's. */
  host: string;
  port: number;
  /** What this node's tokens are signed with (TOKEN_SECRETS), newest first. */
  secrets: readonly string[];
}

/**
 * The node at `nodeUrl`, checking tokens with `secrets`: the master secrets
 * (its node's are derived from them as TOKEN_SECRETS says), or NODE_SECRETS,
 * its node's secrets as given, which only this exact URL's tokens verify with.
 */
export function guardedNode(nodeUrl: string, secrets: GatewaySecrets | readonly string[], mode: TokenSecretsMode): GuardedNode {
  const u = new URL(nodeUrl);
  const given: GatewaySecrets = isSecretList(secrets) ? { masterSecrets: [...secrets] } : secrets;
  return {
    url: nodeUrl,
    host: u.hostname,
    port: Number(u.port || (u.protocol === 'https:' ? 443 : 80)),
    secrets: given.nodeSecrets ?? tokenSecrets(mode, given.masterSecrets, nodeUrl),
  };
}

function isSecretList(secrets: GatewaySecrets | readonly string[]): secrets is readonly string[] {
  return Array.isArray(secrets);
}

export interface Caller {
  uid: number;
  node: string;
  /** The Hawk key (derived secret); needed again only for the payload hash check. */
  key: string;
  hawk: HawkAttributes;
}

export interface AuthRequest {
  method: string;
  /** The request target exactly as received. */
  target: string;
  authorization: string | undefined;
}

export interface VerifiedToken {
  payload: TokenPayload;
  /** The Hawk key derived for this token. */
  key: string;
}

/**
 * Tokens whose signature and node were checked, by exact id, so a stream of
 * requests pays for the HMAC check and the key derivation once. Expiry is
 * still checked on every request.
 */
export type TokenCache = GenerationalMap<VerifiedToken>;

export function tokenCache(capacity = TOKEN_CACHE_SIZE): TokenCache {
  return new GenerationalMap<VerifiedToken>(capacity);
}

export interface AuthOptions {
  skewSeconds: number;
  tokens?: TokenCache;
  nowMs?: number;
}

/** The token's signature (any of the node's secrets), expiry and node; then its Hawk key. */
export function verifyToken(id: string, node: GuardedNode, nowMs: number, tokens?: TokenCache): VerifiedToken {
  const known = tokens?.get(id);
  // An expired cached token goes through parseToken again, which says so.
  if (known && known.payload.expires > nowMs / 1000) return known;
  const { payload, secret } = parseToken(id, node.secrets, nowMs / 1000);
  if (payload.node !== node.url) throw new InvalidCredentials('token was issued for another node');
  const verified = { payload, key: derivedSecret(id, payload.salt, secret) };
  tokens?.set(id, verified, nowMs);
  return verified;
}

function urlError(description: string): BadRequest {
  return new BadRequest(description, { location: 'url', field: 'path' });
}

/** What a decoded segment must not contain, and how to say so. */
const FORBIDDEN_IN_SEGMENT: ReadonlyArray<[string, string]> = [
  ['/', 'an encoded "/"'],
  ['\\', 'a backslash'],
  [';', 'a ";"'],
  ['\0', 'NUL'],
];

/**
 * The request target must be a plain path: the uid check below compares path
 * segments, so anything an upstream might resolve or split differently is
 * refused before it matters. Each segment is percent-decoded once (as the
 * application will) and must not then be "." or "..", or hold "/", a
 * backslash, ";" (Tomcat's "..;") or NUL. Returns the decoded segments.
 */
export function checkTarget(target: string): string[] {
  if (!target.startsWith('/')) throw urlError('request target must be an absolute path');
  const query = target.indexOf('?');
  const path = query === -1 ? target : target.slice(0, query);
  if (path.includes('#')) throw urlError('request target must not carry a fragment');
  return path.split('/').map((segment) => {
    // Most segments have nothing encoded: decoding them would give them back.
    let decoded = segment;
    if (segment.includes('%')) {
      try {
        decoded = decodeURIComponent(segment);
      } catch {
        throw urlError('path must be valid percent-encoded UTF-8');
      }
    }
    if (decoded === '.' || decoded === '..') throw urlError('path must not contain "." or ".." segments, encoded or not');
    for (const [char, name] of FORBIDDEN_IN_SEGMENT) {
      if (decoded.includes(char)) throw urlError(`a path segment must not contain ${name}`);
    }
    return decoded;
  });
}

/** `/<app_version>/<uid>[/…]`, as decoded segments, must name the token's uid. */
export function checkPathUid(segments: readonly string[], uid: number): void {
  if (segments[1] === '' || segments[2] !== String(uid)) {
    throw new InvalidCredentials("the path is not under this token's /<app_version>/<uid>");
  }
}

/**
 * Target → token → key → MAC → timestamp → path. Throws the protocol error of
 * the first failure. The nonce is not recorded here: rememberNonce comes after
 * every other check, so a refused request cannot fill the replay cache.
 */
export function authenticate(req: AuthRequest, node: GuardedNode, opts: AuthOptions): Caller {
  const now = opts.nowMs ?? Date.now();
  const segments = checkTarget(req.target);
  const hawk = parseHawkHeader(req.authorization);
  const { payload, key } = verifyToken(hawk.id, node, now, opts.tokens);
  const normalized = normalizedString('header', {
    ts: hawk.ts,
    nonce: hawk.nonce,
    method: req.method,
    resource: req.target,
    host: node.host,
    port: node.port,
    hash: hawk.hash,
    ext: hawk.ext,
    app: hawk.app,
    dlg: hawk.dlg,
  });
  if (!safeEqual(hawkMac(key, normalized), hawk.mac)) throw new InvalidCredentials('Hawk MAC does not match the request');
  // Checked after the MAC so that only a key holder learns our clock (tsm is keyed).
  if (Math.abs(Number(hawk.ts) * 1000 - now) > opts.skewSeconds * 1000) {
    throw new InvalidTimestamp('stale Hawk timestamp', {
      headers: { 'WWW-Authenticate': staleTimestampChallenge(key, Math.floor(now / 1000)) },
    });
  }
  checkPathUid(segments, payload.uid);
  return { uid: payload.uid, node: payload.node, key, hawk };
}

/**
 * The last check before forwarding: the nonce is new, and is now remembered
 * for its whole window. Synchronous with the memory store, a promise with a
 * shared one (which rejects with 503 when it cannot answer).
 */
export function rememberNonce(hawk: HawkAttributes, nonces: NonceStore, nowMs = Date.now()): void | Promise<void> {
  const verdict = nonces.remember(hawk.id, hawk.nonce, hawk.ts, nowMs);
  return verdict instanceof Promise ? verdict.then(acceptNonce) : acceptNonce(verdict);
}

const NONCE_REFUSALS = {
  'token-full': 'this token has used its share of the replay cache',
  'cache-full': 'the replay cache is full',
  unknown: 'the replay cache lost nonces; requests whose window opened before that are refused',
} as const;

/**
 * A replay is 401. A full share or store is 503 + Retry-After: refusing is
 * safe, forgetting a nonce early would let a captured request replay.
 */
export function acceptNonce(verdict: NonceVerdict): void {
  if (verdict.outcome === 'new') return;
  if (verdict.outcome === 'replayed') throw new InvalidCredentials('Hawk nonce already used');
  throw new ServiceUnavailable(NONCE_REFUSALS[verdict.outcome], verdict.retryAfter);
}

/** The body's hash against the signed one (only called when the header has `hash`). */
export function checkPayloadHash(body: Buffer, contentType: string | undefined, signed: string): void {
  if (!safeEqual(payloadHash(body, contentType ?? ''), signed)) {
    throw new InvalidCredentials('payload hash does not match the body');
  }
}
