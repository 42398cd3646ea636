// The token endpoint's rules as pure functions (DESIGN §3, §5); the
// middleware in actions/token.ts applies them in order.
import { createHmac } from 'node:crypto';
import { MOZILLA_ERRORS, NotFound, unsupportedVersion } from '../../lib/errors.js';
import type { TokenPayload } from '../../lib/token.js';

export function isKnownApplication(apps: Map<string, Set<string>>, app: string, version: string): boolean {
  return apps.get(app)?.has(version) ?? false;
}

/** The 404 for an application that is not served: the application itself, or only this version of it (Mozilla's two answers). */
export function unsupportedApplication(apps: Map<string, Set<string>>, app: string, version: string): NotFound {
  return apps.has(app)
    ? new NotFound(`unknown version ${version} of ${app}`, { answer: unsupportedVersion(version) })
    : new NotFound(`unknown application ${app}`, { answer: MOZILLA_ERRORS.unsupportedApplication.entry });
}

/**
 * True when the client takes JSON: no Accept header, or a media range of
 * application/json, application/(any) or (any)/(any) with a non-zero quality.
 */
export function acceptsJson(accept: string | undefined): boolean {
  if (accept === undefined || accept.trim() === '') return true;
  return accept.split(',').some((range) => {
    const [type, ...params] = range.split(';').map((s) => s.trim().toLowerCase());
    if (!['application/json', 'application/*', '*/*'].includes(type)) return false;
    const q = params.find((p) => p.startsWith('q='));
    return q === undefined || !(Number(q.slice(2)) <= 0);
  });
}

const CLIENT_STATE = /^[a-zA-Z0-9._-]{1,32}$/;

/** An absent or empty X-Client-State means none; anything else must match the pattern. */
export function isValidClientState(value: string | undefined): boolean {
  return value === undefined || value === '' || CLIENT_STATE.test(value);
}

/** `?duration=N` shortens the token when 0 < N < configured; anything else is ignored. */
export function tokenDuration(query: unknown, configured: number): number {
  if (typeof query !== 'string' || !/^\d{1,10}$/.test(query)) return configured;
  const n = Number(query);
  return n > 0 && n < configured ? n : configured;
}

export function apiEndpoint(node: string, version: string, uid: number): string {
  return `${node.replace(/\/+$/, '')}/${version}/${uid}`;
}

/**
 * tokenlib's `fxa_kid` (DESIGN §9.3): zero-padded keys_changed_at (or the
 * generation when the user has none), a dash, the client state's
 * bytes in urlsafe base64 — the key id storage nodes of Mozilla's token
 * servers expect. An empty client state is no bytes (`0000000001000-`), as
 * both Mozilla servers write it; undefined for a state that is not hex.
 */
export function keyId(keysChangedAtOrGeneration: number, clientState: string): string | undefined {
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(clientState)) return undefined;
  return `${String(keysChangedAtOrGeneration).padStart(13, '0')}-${Buffer.from(clientState, 'hex').toString('base64url')}`;
}

/** Hex characters of an opaque account id: as long as an FxA uid. */
const ACCOUNT_ID_LENGTH = 32;

/**
 * The account id a token carries as `fxa_uid` (DESIGN §9.3). For an address
 * at the FxA e-mail domain the local part is the account id; any other
 * address gets an opaque HMAC of the whole address, so a token never leaks
 * it and equal local parts at different domains stay different users.
 */
export function accountId(email: string, fxaDomain: string, key: Buffer): string {
  const at = email.lastIndexOf('@');
  if (at > 0 && email.slice(at + 1).toLowerCase() === fxaDomain) return email.slice(0, at);
  return hmacId(key, email);
}

/** The first ACCOUNT_ID_LENGTH hex characters of HMAC-SHA256(key, message). */
function hmacId(key: string | Buffer, message: string): string {
  return createHmac('sha256', key).update(message).digest('hex').slice(0, ACCOUNT_ID_LENGTH);
}

/**
 * `hashed_fxa_uid` (DESIGN §9.3): the first 32 hex characters of
 * HMAC-SHA256(METRICS_HASH_SECRET, account id), as Mozilla's servers compute it.
 */
export function hashedAccountId(key: string | Buffer, accountId: string): string {
  return hmacId(key, accountId);
}

/**
 * `hashed_device_id`, as Mozilla's Rust tokenserver computes it: the same HMAC
 * of `hashed_fxa_uid` followed by "none" (the device id BrowserID once
 * supplied), truncated the same way. Storage nodes report it in their metrics.
 */
export function hashedDeviceId(key: string | Buffer, hashedFxaUid: string): string {
  return hmacId(key, `${hashedFxaUid}none`);
}

export interface TokenInputs {
  uid: number;
  node: string;
  /** accountId() of the user's e-mail. */
  fxaUid: string;
  /** hashedAccountId() of fxaUid. */
  hashedFxaUid: string;
  /** hashedDeviceId() of hashedFxaUid. */
  hashedDeviceId: string;
  generation: number;
  /** The user's recorded keys_changed_at; undefined when none. */
  keysChangedAt?: number;
  clientState: string;
  nowSeconds: number;
  duration: number;
  salt: string;
}

/**
 * The token payload: tokenlib's uid/node/expires/salt plus the FxA fields
 * storage nodes read. Never `tokenserver_origin`: Mozilla's storage node reads
 * it into a two-value enum naming Mozilla's own tokenservers, and absent is its default.
 */
export function tokenPayload(t: TokenInputs): TokenPayload {
  const payload: TokenPayload = {
    uid: t.uid,
    node: t.node,
    expires: Math.floor(t.nowSeconds) + t.duration,
    salt: t.salt,
    fxa_uid: t.fxaUid,
  };
  const kid = keyId(t.keysChangedAt ?? t.generation, t.clientState);
  if (kid !== undefined) payload.fxa_kid = kid;
  payload.hashed_fxa_uid = t.hashedFxaUid;
  payload.hashed_device_id = t.hashedDeviceId;
  return payload;
}
