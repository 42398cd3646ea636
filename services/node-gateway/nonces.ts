// Replay protection: Hawk nonces seen within the timestamp window. Memory stays
// flat under a flood of unique nonces: two generations of digests, the older one
// dropped when the newer is full or older than the window.
import { createHash } from 'node:crypto';

export class NonceCache {
  private current = new Set<string>();
  private previous = new Set<string>();
  private startedAt: number;
  private readonly generationSize: number;
  /** Rotations forced by size rather than age: a flood may shorten how long a nonce is remembered. */
  earlyRotations = 0;

  /**
   * @param capacity most digests kept (both generations together)
   * @param windowMs how long a nonce must be remembered: a timestamp is accepted
   *   within ±skew, so the same (ts, nonce) can come back for 2 × skew.
   */
  constructor(
    capacity: number,
    private readonly windowMs: number,
    now = Date.now(),
  ) {
    this.generationSize = Math.max(1, Math.floor(capacity / 2));
    this.startedAt = now;
  }

  /** Records (id, nonce, ts); false when it was already seen within the window. */
  add(id: string, nonce: string, ts: string, now = Date.now()): boolean {
    this.rotate(now);
    // A fixed-size digest, so long ids or nonces cost no more memory than short ones.
    const digest = createHash('sha256').update(`${id}\n${nonce}\n${ts}`).digest('base64');
    if (this.current.has(digest) || this.previous.has(digest)) return false;
    this.current.add(digest);
    return true;
  }

  get size(): number {
    return this.current.size + this.previous.size;
  }

  private rotate(now: number): void {
    const aged = now - this.startedAt >= this.windowMs;
    if (!aged && this.current.size < this.generationSize) return;
    // A digest stays through its own generation and the next one, which lasts
    // at least the window unless a flood fills it first.
    if (!aged) this.earlyRotations++;
    this.previous = this.current;
    this.current = new Set();
    this.startedAt = now;
  }
}
