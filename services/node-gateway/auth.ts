// The gateway's rules (DESIGN §6), as plain functions: who is calling, and may
// they reach this path. Order matters: each step trusts only what the steps
// before it have checked.
import { BadRequest, InvalidCredentials, InvalidTimestamp } from '../../lib/errors.js';
import { hawkMac, normalizedString, parseHawkHeader, payloadHash, safeEqual, staleTimestampChallenge, type HawkAttributes } from '../../lib/hawk.js';
import { derivedSecret, nodeSecrets, parseToken } from '../../lib/token.js';
import type { NonceCache } from './nonces.js';

/** The node this gateway guards, as tokens and MACs name it. */
export interface GuardedNode {
  /** NODE_URL: tokens must carry exactly this `node`. */
  url: string;
  /** Host and port the MAC covers: the public URL's, never the Host header's. */
  host: string;
  port: number;
  /** This node's secrets, newest first. */
  secrets: string[];
}

export function guardedNode(nodeUrl: string, masterSecrets: readonly string[]): GuardedNode {
  const u = new URL(nodeUrl);
  return {
    url: nodeUrl,
    host: u.hostname,
    port: Number(u.port || (u.protocol === 'https:' ? 443 : 80)),
    secrets: nodeSecrets(masterSecrets, nodeUrl),
  };
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

export interface AuthOptions {
  skewSeconds: number;
  nonces: NonceCache;
  nowMs?: number;
}

function urlError(description: string): BadRequest {
  return new BadRequest(description, { location: 'url', field: 'path' });
}

/**
 * The request target must be a plain path: the uid check below compares path
 * segments, so anything an upstream might resolve differently (dot segments,
 * backslashes, an absolute URL) is refused before it matters.
 */
export function checkTarget(target: string): void {
  if (!target.startsWith('/')) throw urlError('request target must be an absolute path');
  const path = target.split('?', 1)[0];
  if (path.includes('\\')) throw urlError('path must not contain a backslash');
  for (const segment of path.split('/')) {
    if (/^(\.|%2e){1,2}$/i.test(segment)) throw urlError('path must not contain "." or ".." segments');
  }
}

/** `/<app_version>/<uid>[/…][?…]` must name the token's uid. */
export function checkPathUid(target: string, uid: number): void {
  const segments = target.split('?', 1)[0].split('/');
  if (segments[1] === '' || segments[2] !== String(uid)) {
    throw new InvalidCredentials("the path is not under this token's /<app_version>/<uid>");
  }
}

/** Token → key → MAC → timestamp → nonce → path. Throws the protocol error of the first failure. */
export function authenticate(req: AuthRequest, node: GuardedNode, opts: AuthOptions): Caller {
  const now = opts.nowMs ?? Date.now();
  checkTarget(req.target);
  const hawk = parseHawkHeader(req.authorization);
  const { payload, secret } = parseToken(hawk.id, node.secrets, now / 1000);
  if (payload.node !== node.url) throw new InvalidCredentials('token was issued for another node');
  const key = derivedSecret(hawk.id, payload.salt, secret);
  const normalized = normalizedString('header', { ...hawk, method: req.method, resource: req.target, host: node.host, port: node.port });
  if (!safeEqual(hawkMac(key, normalized), hawk.mac)) throw new InvalidCredentials('Hawk MAC does not match the request');
  // Checked after the MAC so that only a key holder learns our clock (tsm is keyed).
  if (Math.abs(Number(hawk.ts) * 1000 - now) > opts.skewSeconds * 1000) {
    throw new InvalidTimestamp('stale Hawk timestamp', {
      headers: { 'WWW-Authenticate': staleTimestampChallenge(key, Math.floor(now / 1000)) },
    });
  }
  if (!opts.nonces.add(hawk.id, hawk.nonce, hawk.ts, now)) throw new InvalidCredentials('Hawk nonce already used');
  checkPathUid(req.target, payload.uid);
  return { uid: payload.uid, node: payload.node, key, hawk };
}

/** The body's hash against the signed one (only called when the header has `hash`). */
export function checkPayloadHash(body: Buffer, contentType: string | undefined, signed: string): void {
  if (!safeEqual(payloadHash(body, contentType ?? ''), signed)) {
    throw new InvalidCredentials('payload hash does not match the body');
  }
}
