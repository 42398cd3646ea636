// The SDK's rules as pure functions of their inputs and the time: when a cached
// token is still good, when the server's X-Backoff / Retry-After forbid a new
// login, how the clock offset follows the server, how a Hawk challenge reads.
// All times are milliseconds unless a name says seconds.
import { DEFAULTS } from '../lib/config.js';
import { safeEqual, timestampMac } from '../lib/hawk.js';

/** The login service's 200 body (DESIGN §3). */
export interface Token {
  id: string;
  key: string;
  uid: number;
  api_endpoint: string;
  /** Lifetime in seconds. */
  duration: number;
  hashalg?: string;
  /** DESIGN §9.3: HMAC of the account id, for metrics. */
  hashed_fxa_uid?: string;
}

export interface CachedToken {
  token: Token;
  /** Local clock when the token arrived. */
  receivedAt: number;
}

/** Refresh once this share of the token's lifetime has passed, so a request never races its expiry. */
export const REFRESH_FRACTION = 0.8;
/** A 503 without a usable Retry-After waits the server's default. */
export const DEFAULT_RETRY_AFTER = DEFAULTS.RETRY_AFTER;

export function refreshAt(c: CachedToken): number {
  return c.receivedAt + c.token.duration * 1000 * REFRESH_FRACTION;
}

export function expiresAt(c: CachedToken): number {
  return c.receivedAt + c.token.duration * 1000;
}

/** Until when the server asked for no new login request (local clock). */
export interface Gate {
  /** From X-Backoff. */
  backoffUntil: number;
  /** From a 503's Retry-After. */
  unavailableUntil: number;
}

export const OPEN_GATE: Gate = { backoffUntil: 0, unavailableUntil: 0 };

export type Step =
  | { kind: 'cached'; token: Token }
  | { kind: 'login' }
  /** No request allowed and no unexpired token: the caller throws; `retryAfter` in whole seconds. */
  | { kind: 'backoff'; retryAfter: number }
  | { kind: 'unavailable'; retryAfter: number };

/**
 * What getToken does now. A token before its refresh point is used as is;
 * while the server asked for quiet, an unexpired token is used even past its
 * refresh point; otherwise log in, or (still quiet, nothing usable) refuse.
 */
export function nextStep(cached: CachedToken | undefined, gate: Gate, now: number): Step {
  if (cached && now < refreshAt(cached)) return { kind: 'cached', token: cached.token };
  const quietUntil = Math.max(gate.backoffUntil, gate.unavailableUntil);
  if (now >= quietUntil) return { kind: 'login' };
  if (cached && now < expiresAt(cached)) return { kind: 'cached', token: cached.token };
  const retryAfter = Math.ceil((quietUntil - now) / 1000);
  return gate.unavailableUntil >= gate.backoffUntil ? { kind: 'unavailable', retryAfter } : { kind: 'backoff', retryAfter };
}

/** The gate after a login answer: X-Backoff on any answer, Retry-After on a 503 (seconds). */
export function gateAfter(gate: Gate, answer: { status: number; backoff?: number; retryAfter?: number }, now: number): Gate {
  const next = { ...gate };
  if (answer.backoff !== undefined) next.backoffUntil = Math.max(gate.backoffUntil, now + answer.backoff * 1000);
  if (answer.status === 503) next.unavailableUntil = now + (answer.retryAfter ?? DEFAULT_RETRY_AFTER) * 1000;
  return next;
}

/** A header of whole (or decimal) non-negative seconds, e.g. X-Backoff, X-Timestamp. */
export function parseSeconds(value: string | null | undefined): number | undefined {
  if (value == null || !/^\s*\d{1,12}(\.\d+)?\s*$/.test(value)) return undefined;
  return Number(value.trim());
}

/** Retry-After: delay in seconds or an HTTP date (read against `now`, the corrected clock). */
export function parseRetryAfter(value: string | null | undefined, now: number): number | undefined {
  const seconds = parseSeconds(value);
  if (seconds !== undefined) return seconds;
  if (value == null || /^\s*[-+\d.]/.test(value)) return undefined;
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - now) / 1000));
}

// X-Timestamp has one-second resolution and arrives after some latency; an
// offset that already agrees within this margin is kept, so it does not jitter.
const CLOCK_TOLERANCE = 2000;

/**
 * The clock offset (server − local) after the server said its time is
 * `serverSeconds` when the local clock read `local`.
 */
export function correctedOffset(serverSeconds: number, local: number, offset: number): number {
  const serverMid = serverSeconds * 1000 + 500; // the server truncated to the second
  if (Math.abs(local + offset - serverMid) <= CLOCK_TOLERANCE) return offset;
  return Math.round(serverMid - local);
}

/** Checks a 200 body's shape; null when it is not a token. */
export function parseTokenBody(body: unknown): Token | null {
  if (typeof body !== 'object' || body === null) return null;
  const b = body as Record<string, unknown>;
  if (typeof b.id !== 'string' || b.id === '' || typeof b.key !== 'string' || b.key === '') return null;
  if (!Number.isSafeInteger(b.uid) || typeof b.api_endpoint !== 'string' || !/^https?:\/\//.test(b.api_endpoint)) return null;
  if (typeof b.duration !== 'number' || !(b.duration > 0)) return null;
  const token: Token = { id: b.id, key: b.key, uid: b.uid as number, api_endpoint: b.api_endpoint, duration: b.duration };
  if (typeof b.hashalg === 'string') token.hashalg = b.hashalg;
  if (typeof b.hashed_fxa_uid === 'string') token.hashed_fxa_uid = b.hashed_fxa_uid;
  return token;
}

/**
 * The URL for a request: an absolute URL as is; anything else is a path
 * under the token's api_endpoint (`<node>/<version>/<uid>`), leading slashes
 * or not, so `storage/x`, `/storage/x` and `?q=1` all stay inside it.
 */
export function resolveUrl(apiEndpoint: string, pathOrUrl: string | URL): string {
  if (pathOrUrl instanceof URL) return pathOrUrl.href;
  if (/^[a-z][a-z0-9+.-]*:/i.test(pathOrUrl)) return new URL(pathOrUrl).href;
  const base = apiEndpoint.replace(/\/+$/, '');
  const rest = pathOrUrl.replace(/^\/+/, '');
  if (rest === '') return base;
  return rest.startsWith('?') || rest.startsWith('#') ? base + rest : `${base}/${rest}`;
}

export interface HawkChallenge {
  ts: number;
  tsm: string;
  error?: string;
}

/** The Hawk scheme's `ts`/`tsm` challenge in a WWW-Authenticate header; null when absent. */
export function parseHawkChallenge(header: string | null | undefined): HawkChallenge | null {
  if (!header) return null;
  const m = /(?:^|,)\s*Hawk\s+(.*)$/is.exec(header);
  if (!m) return null;
  const attrs = new Map<string, string>();
  for (const a of m[1].matchAll(/([a-z]+)="([^"\\]*)"/gi)) if (!attrs.has(a[1])) attrs.set(a[1], a[2]);
  const ts = attrs.get('ts');
  const tsm = attrs.get('tsm');
  if (!ts || !/^\d{1,15}$/.test(ts) || !tsm) return null;
  const challenge: HawkChallenge = { ts: Number(ts), tsm };
  const error = attrs.get('error');
  if (error !== undefined) challenge.error = error;
  return challenge;
}

/**
 * Whether `tsm` is the server's MAC of `ts` with our key (Hawk: HMAC of
 * "hawk.1.ts\n<ts>\n"); only then may the server's time move our clock.
 */
export function verifyTimestampMac(key: string, challenge: HawkChallenge): boolean {
  return safeEqual(challenge.tsm, timestampMac(key, challenge.ts));
}
