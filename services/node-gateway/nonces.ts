// Replay protection: every Hawk nonce is remembered until its timestamp can no
// longer pass the skew check, and never forgotten earlier. Nonces are kept per
// token with a per-token quota, so a flood fills only the flooder's own share;
// when a share, or the whole cache, is full the request is refused instead.
import { createHash } from 'node:crypto';

export type NonceOutcome = 'new' | 'replayed' | 'token-full' | 'cache-full';

export interface NonceLimits {
  /** Most nonces kept in all (NONCE_CACHE_SIZE). */
  capacity: number;
  /** Most nonces kept for one token (NONCE_PER_TOKEN). */
  perToken: number;
  /** The Hawk timestamp skew, seconds: a (ts, nonce) can come back until ts + skew. */
  skewSeconds: number;
}

/** One remembered nonce, filed under the second after which it may go. */
interface Entry {
  token: string;
  key: string;
  expires: number;
}

export class NonceCache {
  /** Token key → nonce key → the second until which it is kept. */
  private readonly byToken = new Map<string, Map<string, number>>();
  /** Entries by expiry second, modulo the ring length; swept as time passes. */
  private readonly ring: Entry[][];
  private swept: number;
  private count = 0;

  constructor(private readonly limits: NonceLimits, nowMs = Date.now()) {
    // Live expiry seconds span [now, now + 2 × skew + 1]: one slot more keeps them apart.
    this.ring = Array.from({ length: 2 * limits.skewSeconds + 3 }, () => []);
    this.swept = Math.floor(nowMs / 1000) - 1;
  }

  /**
   * Records (id, nonce, ts) for a token whose request passed every other check.
   * `ts` passed the skew check, so it expires at ts + skew; one already past
   * that could not be replayed anyway and is not stored.
   */
  add(id: string, nonce: string, ts: string, nowMs = Date.now()): NonceOutcome {
    const now = Math.floor(nowMs / 1000);
    this.sweep(now);
    const token = tokenKey(id);
    const key = nonceKey(nonce, ts);
    const own = this.byToken.get(token);
    if (own?.has(key)) return 'replayed';
    const expires = Number(ts) + this.limits.skewSeconds;
    if (expires < now) return 'new';
    if ((own?.size ?? 0) >= this.limits.perToken) return 'token-full';
    if (this.count >= this.limits.capacity) return 'cache-full';
    if (own) own.set(key, expires);
    else this.byToken.set(token, new Map([[key, expires]]));
    this.ring[expires % this.ring.length].push({ token, key, expires });
    this.count++;
    return 'new';
  }

  /** Seconds until a refused token (`token-full`) or anyone (`cache-full`) will find room. */
  retryAfter(id: string, outcome: 'token-full' | 'cache-full', nowMs = Date.now()): number {
    const now = Math.floor(nowMs / 1000);
    this.sweep(now);
    let first = now + this.ring.length;
    if (outcome === 'token-full') {
      for (const expires of this.byToken.get(tokenKey(id))?.values() ?? []) first = Math.min(first, expires);
    } else {
      // Swept, every slot holds only the live entries of its own second.
      for (let s = now; s < now + this.ring.length; s++) {
        if (this.ring[s % this.ring.length].length > 0) {
          first = s;
          break;
        }
      }
    }
    // An entry of second s goes once that second is over.
    return Math.max(1, first + 1 - now);
  }

  get size(): number {
    return this.count;
  }

  /** Forgets the entries whose second is over (every slot once at most, however long the pause). */
  private sweep(now: number): void {
    const last = Math.min(now - 1, this.swept + this.ring.length);
    for (let s = this.swept + 1; s <= last; s++) {
      const slot = this.ring[s % this.ring.length];
      if (slot.length === 0) continue;
      const kept: Entry[] = [];
      for (const e of slot) {
        if (e.expires >= now) kept.push(e);
        else this.forget(e);
      }
      this.ring[s % this.ring.length] = kept;
    }
    this.swept = Math.max(this.swept, now - 1);
  }

  private forget(e: Entry): void {
    const own = this.byToken.get(e.token);
    if (!own?.delete(e.key)) return;
    this.count--;
    if (own.size === 0) this.byToken.delete(e.token);
  }
}

/** Nonces longer than this are stored as a digest. */
const MAX_PLAIN_NONCE = 64;
/** The tail of a token id is its HMAC signature: enough to tell tokens apart. */
const ID_TAIL = 32;

/** Which share a token's nonces go to. */
export function tokenKey(id: string): string {
  return id.slice(-ID_TAIL);
}

/**
 * A short key for (nonce, ts) within a token's share. A hash per request costs
 * more than the rest of the nonce check on the hot path, so only unusually
 * long nonces are hashed.
 */
export function nonceKey(nonce: string, ts: string): string {
  if (nonce.length <= MAX_PLAIN_NONCE) return `${ts}\n${nonce}`;
  // A parsed nonce holds no newline, so the extra one keeps digests apart from plain nonces.
  return `${ts}\n\n${createHash('sha256').update(nonce).digest('base64')}`;
}
