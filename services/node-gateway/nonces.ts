// Replay protection: every Hawk nonce is remembered until its timestamp can no
// longer pass the skew check, and never forgotten earlier. Nonces are kept per
// token with a per-token quota, so a flood fills only the flooder's own share;
// when a share, or the whole cache, is full the request is refused instead.
//
// Compact, since a busy gateway holds ~2 × HAWK_SKEW seconds of its traffic
// (~1.2M nonces at 10k req/s): one typed-array entry per nonce (~20–30 bytes)
// instead of strings and objects (~306 bytes, and old-generation GC work that
// grew with them). A nonce expires at ts + skew, so all nonces of one
// timestamp go in one bucket of a ring indexed by that second: a replay is
// looked up in that bucket alone, and a second's nonces are forgotten by
// emptying its bucket.

import type { NonceOutcome, NonceStore, NonceVerdict } from './nonce-store.js';

export interface NonceLimits {
  /** Most nonces kept in all (NONCE_CACHE_SIZE). */
  capacity: number;
  /** Most nonces kept for one token (NONCE_PER_TOKEN). */
  perToken: number;
  /** The Hawk timestamp skew, seconds: a (ts, nonce) can come back until ts + skew. */
  skewSeconds: number;
}

/**
 * The nonces that expire in one second: (token slot, 64-bit fingerprint of
 * the nonce) entries, found through an open-addressing table of entry numbers.
 */
class Bucket {
  /** The expiry second held; -1 when empty. */
  second = -1;
  size = 0;
  tokens = new Uint32Array(16);
  h1 = new Int32Array(16);
  h2 = new Int32Array(16);
  /** Entry number + 1 per slot, 0 for free; a power of two, at most half full. */
  table = new Int32Array(32);

  has(token: number, h1: number, h2: number): boolean {
    const mask = this.table.length - 1;
    for (let i = slotOf(token, h1) & mask; ; i = (i + 1) & mask) {
      const e = this.table[i] - 1;
      if (e < 0) return false;
      if (this.h1[e] === h1 && this.h2[e] === h2 && this.tokens[e] === token) return true;
    }
  }

  add(token: number, h1: number, h2: number): void {
    if (this.size === this.tokens.length) {
      this.tokens = grow(this.tokens, new Uint32Array(this.size * 2));
      this.h1 = grow(this.h1, new Int32Array(this.size * 2));
      this.h2 = grow(this.h2, new Int32Array(this.size * 2));
    }
    const e = this.size++;
    this.tokens[e] = token;
    this.h1[e] = h1;
    this.h2[e] = h2;
    if (this.size * 2 > this.table.length) this.rehash(this.table.length * 2);
    else this.place(e);
  }

  clear(): void {
    this.size = 0;
    this.second = -1;
    this.table.fill(0);
  }

  private place(e: number): void {
    const mask = this.table.length - 1;
    let i = slotOf(this.tokens[e], this.h1[e]) & mask;
    while (this.table[i] !== 0) i = (i + 1) & mask;
    this.table[i] = e + 1;
  }

  private rehash(length: number): void {
    this.table = new Int32Array(length);
    for (let e = 0; e < this.size; e++) this.place(e);
  }
}

function grow<T extends Uint32Array | Int32Array>(from: T, to: T): T {
  to.set(from);
  return to;
}

function slotOf(token: number, h1: number): number {
  return h1 ^ Math.imul(token, 0x9e3779b1);
}

export class NonceCache implements NonceStore {
  readonly kind = 'memory';

  /** Token key → its slot in the per-token arrays below, while it has nonces kept. */
  private readonly slots = new Map<string, number>();
  private keys: string[] = [];
  private counts = new Uint32Array(64);
  /** No nonce of the token expires before this second: a lower bound, which its nonces' sweeps leave in the past. */
  private firsts = new Float64Array(64);
  private readonly freeSlots: number[] = [];
  private readonly ring: Bucket[];
  private swept: number;
  private count = 0;

  constructor(private readonly limits: NonceLimits, nowMs = Date.now()) {
    // Live expiry seconds span [now, now + 2 × skew]: two slots more keep them apart.
    this.ring = Array.from({ length: 2 * limits.skewSeconds + 3 }, () => new Bucket());
    this.swept = Math.floor(nowMs / 1000) - 1;
  }

  /**
   * Records (id, nonce, ts) for a token whose request passed every other check
   * (ts within the skew: a later one is refused with a RangeError). It expires
   * at ts + skew; one already past that could not be replayed anyway and is
   * not stored.
   */
  add(id: string, nonce: string, ts: string, nowMs = Date.now()): NonceOutcome {
    const now = Math.floor(nowMs / 1000);
    this.sweep(now);
    const expires = Number(ts) + this.limits.skewSeconds;
    if (expires < now) return 'new';
    if (expires >= now + this.ring.length - 1) throw new RangeError('Hawk timestamp beyond the skew window');
    const bucket = this.ring[expires % this.ring.length];
    const key = tokenKey(id);
    let slot = this.slots.get(key);
    const [h1, h2] = fingerprint(nonce);
    if (slot !== undefined && bucket.second === expires && bucket.has(slot, h1, h2)) return 'replayed';
    if (slot !== undefined && this.counts[slot] >= this.limits.perToken) return 'token-full';
    if (this.count >= this.limits.capacity) return 'cache-full';
    if (slot === undefined) slot = this.newSlot(key, expires);
    else this.firsts[slot] = Math.min(this.firsts[slot], expires);
    // Swept, a bucket holds its own live second or nothing.
    bucket.second = expires;
    bucket.add(slot, h1, h2);
    this.counts[slot]++;
    this.count++;
    return 'new';
  }

  /** NonceStore: add, with the Retry-After of a refusal. */
  remember(id: string, nonce: string, ts: string, nowMs = Date.now()): NonceVerdict {
    const outcome = this.add(id, nonce, ts, nowMs);
    if (outcome === 'new' || outcome === 'replayed') return { outcome };
    return { outcome, retryAfter: this.retryAfter(id, outcome, nowMs) };
  }

  async healthy(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {}

  /** Seconds until a refused token (`token-full`) or anyone (`cache-full`) will find room. */
  retryAfter(id: string, outcome: 'token-full' | 'cache-full', nowMs = Date.now()): number {
    const now = Math.floor(nowMs / 1000);
    this.sweep(now);
    let first = now + this.ring.length;
    if (outcome === 'token-full') {
      const slot = this.slots.get(tokenKey(id));
      if (slot !== undefined) first = Math.max(now, this.firsts[slot]);
    } else {
      for (let s = now; s < now + this.ring.length; s++) {
        const b = this.ring[s % this.ring.length];
        if (b.second === s && b.size > 0) {
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

  private newSlot(key: string, expires: number): number {
    let slot = this.freeSlots.pop();
    if (slot === undefined) {
      slot = this.keys.length;
      if (slot === this.counts.length) {
        this.counts = grow(this.counts, new Uint32Array(slot * 2));
        const firsts = new Float64Array(slot * 2);
        firsts.set(this.firsts);
        this.firsts = firsts;
      }
      this.keys.push(key);
    } else this.keys[slot] = key;
    this.slots.set(key, slot);
    this.counts[slot] = 0;
    this.firsts[slot] = expires;
    return slot;
  }

  /** Forgets the buckets whose second is over (every bucket once at most, however long the pause). */
  private sweep(now: number): void {
    const last = Math.min(now - 1, this.swept + this.ring.length);
    for (let s = this.swept + 1; s <= last; s++) {
      const b = this.ring[s % this.ring.length];
      if (b.second === -1 || b.second >= now) continue;
      // A token left with nonces keeps its `firsts`, now in the past: retryAfter reads it no earlier than now.
      for (let e = 0; e < b.size; e++) {
        const slot = b.tokens[e];
        if (--this.counts[slot] === 0) {
          this.slots.delete(this.keys[slot]);
          this.keys[slot] = '';
          this.freeSlots.push(slot);
        }
      }
      this.count -= b.size;
      b.clear();
    }
    this.swept = Math.max(this.swept, now - 1);
  }
}

/** The tail of a token id is its HMAC signature: enough to tell tokens apart. */
const ID_TAIL = 32;

/** Which share a token's nonces go to. */
export function tokenKey(id: string): string {
  return id.slice(-ID_TAIL);
}

/**
 * Two independent 32-bit hashes of a nonce (FNV-1a with murmur3's finaliser,
 * two offsets). The same nonce always gives the same pair, so a replay is
 * always caught; two different nonces of one token and second share a pair
 * with odds of about 2^-64, and that refuses only the token's own request.
 * A cryptographic hash costs more than the whole nonce check.
 */
export function fingerprint(nonce: string): [number, number] {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ nonce.length;
  for (let i = 0; i < nonce.length; i++) {
    const c = nonce.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 15;
  }
  return [mix(a), mix(b)];
}

function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}
