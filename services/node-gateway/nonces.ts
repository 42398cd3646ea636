// Replay protection: Hawk nonces seen within the timestamp window, in a
// bounded two-generation map with short keys, so memory stays flat under a
// flood of unique nonces.
import { createHash } from 'node:crypto';
import { GenerationalMap } from './generations.js';

export class NonceCache {
  private readonly seen: GenerationalMap<true>;

  /**
   * @param capacity most nonces kept
   * @param windowMs how long a nonce must be remembered: a timestamp is accepted
   *   within ±skew, so the same (ts, nonce) can come back for 2 × skew.
   */
  constructor(capacity: number, windowMs: number, now = Date.now()) {
    this.seen = new GenerationalMap(capacity, windowMs, now);
  }

  /**
   * Records (id, nonce, ts) for a verified token id; false when it was already
   * seen within the window.
   */
  add(id: string, nonce: string, ts: string, now = Date.now()): boolean {
    const key = nonceKey(id, nonce, ts);
    if (this.seen.get(key)) return false;
    this.seen.set(key, true, now);
    return true;
  }

  get size(): number {
    return this.seen.size;
  }

  /** Rotations forced by a flood: nonces were forgotten before their window ended. */
  get earlyRotations(): number {
    return this.seen.earlyRotations;
  }
}

/** Nonces longer than this are stored as a digest. */
const MAX_PLAIN_NONCE = 64;
/** The tail of a token id is its HMAC signature: enough to tell tokens apart. */
const ID_TAIL = 32;

/**
 * A short key for (id, nonce, ts). A hash per request costs more than the rest
 * of the nonce check on the hot path, so only unusually long nonces are hashed.
 */
export function nonceKey(id: string, nonce: string, ts: string): string {
  const tail = id.slice(-ID_TAIL);
  if (nonce.length <= MAX_PLAIN_NONCE) return `${ts}\n${nonce}\n${tail}`;
  // A parsed nonce holds no newline, so the extra one keeps digests apart from plain nonces.
  return `${ts}\n\n${createHash('sha256').update(nonce).digest('base64')}\n${tail}`;
}
