// A bounded map for the gateway's hot-path caches: two generations, the older
// dropped when the newer is full or older than maxAgeMs. O(1) per operation and
// flat memory, at the price of forgetting early under a flood.
export class GenerationalMap<V> {
  private current = new Map<string, V>();
  private previous = new Map<string, V>();
  private startedAt: number;
  private readonly generationSize: number;
  /** Rotations forced by size rather than age. */
  earlyRotations = 0;

  /**
   * @param capacity most entries kept (both generations together)
   * @param maxAgeMs a generation is retired after this long; an entry then
   *   lives at least this long unless a flood fills its generation first
   */
  constructor(capacity: number, private readonly maxAgeMs = Infinity, now = Date.now()) {
    this.generationSize = Math.max(1, Math.floor(capacity / 2));
    this.startedAt = now;
  }

  get(key: string): V | undefined {
    return this.current.get(key) ?? this.previous.get(key);
  }

  set(key: string, value: V, now = Date.now()): void {
    const aged = now - this.startedAt >= this.maxAgeMs;
    if (aged || this.current.size >= this.generationSize) {
      if (!aged) this.earlyRotations++;
      this.previous = this.current;
      this.current = new Map();
      this.startedAt = now;
    }
    this.current.set(key, value);
  }

  get size(): number {
    return this.current.size + this.previous.size;
  }
}
