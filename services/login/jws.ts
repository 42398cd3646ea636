// Compact JWS (RFC 7515 §7.1), decoded strictly and without verifying: the one
// parser of certificates and assertions (assertion.ts), access tokens and
// security event tokens (jwks.ts). Canonical base64url only, so one signature
// has one spelling; the header a UTF-8 JSON object; `alg` one of the caller's;
// no JWS extension we do not implement. Signatures are checked by the callers,
// with the algorithm of their key.
import { isUtf8 } from 'node:buffer';
import { InvalidCredentials } from '../../lib/errors.js';

/**
 * Strict base64url without padding; null when it is not. Canonical means the
 * bytes encode back to exactly `s`, which also refuses what the decoder skips
 * (padding, "+", "/", blanks, other characters) and a length of 4n + 1.
 */
export function base64UrlDecode(s: string): Buffer | null {
  const buf = Buffer.from(s, 'base64url');
  // Non-canonical trailing bits would give one signature several spellings.
  return buf.toString('base64url') === s ? buf : null;
}

/** A base64url segment holding a JSON object (UTF-8 checked when `strictUtf8`), or InvalidCredentials naming `what`. */
export function jsonSegment(segment: string, what: string, strictUtf8 = false): Record<string, unknown> {
  const bytes = base64UrlDecode(segment);
  if (!bytes) throw new InvalidCredentials(`${what} is not base64url`);
  if (strictUtf8 && !isUtf8(bytes)) throw new InvalidCredentials(`${what} is not UTF-8`);
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new InvalidCredentials(`${what} is not JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidCredentials(`${what} is not a JSON object`);
  return value as Record<string, unknown>;
}

/** JWS extensions we understand (RFC 7515 §4.1.11): only `b64` (RFC 7797), as jose does. */
const RECOGNIZED_CRIT = ['b64'];

/**
 * Why a protected header's `crit`/`b64` make the JWS unacceptable (RFC 7515
 * §4.1.11, RFC 7797 §3), or null: jose's rules, and `b64: false` never.
 */
export function critProblem(header: Record<string, unknown>): string | null {
  // An unencoded payload (RFC 7797) is signed as raw bytes while we read the
  // segment as base64url: refused whether or not "crit" names it.
  if (header.b64 === false) return '"b64": false (unencoded payload) is not supported';
  const crit = header.crit;
  if (crit === undefined) return null;
  if (!Array.isArray(crit) || crit.length === 0 || crit.some((c) => typeof c !== 'string' || c === '')) return '"crit" must be an array of names';
  for (const name of crit as string[]) {
    if (!RECOGNIZED_CRIT.includes(name)) return `extension "${name}" is not supported`;
    if (header[name] === undefined) return `extension "${name}" is missing`;
  }
  if (crit.includes('b64') && typeof header.b64 !== 'boolean') return '"b64" must be a boolean';
  return null;
}

export interface CompactJws<A extends string = string> {
  alg: A;
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
  /** What the signature covers: `<header>.<payload>` as sent. */
  signingInput: string;
  signature: Buffer;
}

/**
 * Decodes (without verifying) a compact JWS whose `alg` is one of
 * `algorithms`, or throws InvalidCredentials naming `what`. The header must be
 * UTF-8; so must the payload when `strictPayloadUtf8` (JWT claims, as RFC
 * 7519 §7.2 and jose read them; BrowserID payloads are read leniently).
 */
export function parseCompactJws<A extends string>(compact: string, what: string, algorithms: readonly A[], strictPayloadUtf8 = false): CompactJws<A> {
  const first = compact.indexOf('.');
  // No first dot: the search for the second starts at 0 and finds none either.
  const second = compact.indexOf('.', first + 1);
  if (second === -1 || second === compact.length - 1 || compact.includes('.', second + 1)) throw new InvalidCredentials(`${what} is not a compact JWS`);
  const header = jsonSegment(compact.slice(0, first), `${what} header`, true);
  const payload = jsonSegment(compact.slice(first + 1, second), `${what} payload`, strictPayloadUtf8);
  const signature = base64UrlDecode(compact.slice(second + 1));
  if (!signature) throw new InvalidCredentials(`${what} signature is not base64url`);
  const alg = header.alg;
  if (!(algorithms as readonly unknown[]).includes(alg)) {
    throw new InvalidCredentials(`${what} algorithm must be one of ${algorithms.join(', ')}`);
  }
  const crit = critProblem(header);
  if (crit) throw new InvalidCredentials(`${what} header: ${crit}`);
  return { alg: alg as A, header, payload, signingInput: compact.slice(0, second), signature };
}
