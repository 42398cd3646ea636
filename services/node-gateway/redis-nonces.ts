// The nonce store shared by a node's gateways (NONCE_STORE=redis://…): one
// script per request does the replay check, the per-token quota and the write
// in one round trip, atomically, so two gateways never both accept a nonce.
//
// What Redis holds, per request: `nonce:<h>` (h: 128 bits of SHA-256 over token
// id, ts and nonce) set with NX and PX until ts + HAWK_SKEW. Per token:
// `nonces:<h>` (h over the token id), a small hash counting its live nonces by
// expiry slice (QUOTA_SLICES slices over the 2 × skew a nonce can live), so the
// quota is counted within one slice of exactly and forgets nothing early.
// Neither key holds the token: whoever reads Redis learns no credential.
//
// A Redis that lost its data (restarted without persistence, flushed) cannot
// tell a replay of a request accepted before the loss: `nonce-store:since`
// records when the store's memory begins (set on connecting, or by the first
// request that finds it missing), and a request signed in an earlier second is
// refused (503 + Retry-After until the client's clock reaches it) rather than
// taken as new. A client whose clock is right is not refused at all.
//
// Redis that cannot answer (down, restarting, slower than NONCE_STORE_TIMEOUT_MS)
// means 503 + Retry-After: a request is never forwarded unchecked. A Redis that
// may evict keys (maxmemory-policy other than noeviction) would forget nonces
// early, so it is refused the same way until it is set right.
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import type { NonceStoreConfig } from '../../lib/config.js';
import { ServiceUnavailable } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { NonceStore, NonceVerdict } from './nonce-store.js';

/** A token's quota is counted in this many slices of its nonces' 2 × skew lifetime (at most one more is live). */
export const QUOTA_SLICES = 8;
/** How long start waits for Redis before serving anyway (503 until Redis answers). */
const FIRST_CONNECT_WAIT_MS = 2000;
/** Reconnect delays double from 50 ms up to this. */
const MAX_RECONNECT_DELAY_MS = 1000;

export interface RedisNonceLimits {
  perToken: number;
  skewSeconds: number;
  /** Retry-After while Redis cannot answer, seconds. */
  retryAfter: number;
}

// ---- the pure parts: keys, expiry, the script's arguments and its reply ----

function digest(text: string): string {
  return createHash('sha256').update(text).digest().subarray(0, 16).toString('base64url');
}

/** The key of one (token, ts, nonce); Hawk values are printable ASCII, so "\n" cannot occur inside one. */
export function nonceKey(id: string, ts: string, nonce: string): string {
  return `nonce:${digest(`${id}\n${ts}\n${nonce}`)}`;
}

/** When the store's memory begins (ms, by the clock of the gateway that found it missing). */
export const SINCE_KEY = 'nonce-store:since';

/** The key of a token's quota count. */
export function quotaKey(id: string): string {
  return `nonces:${digest(id)}`;
}

/**
 * Milliseconds from nowMs for which (ts, nonce) must be remembered: a request
 * signed at ts passes the skew check while now ≤ (ts + skew) s, that last
 * millisecond included. Negative: its window is over, nothing to remember.
 */
export function nonceTtlMs(ts: string, skewSeconds: number, nowMs: number): number {
  const last = (Number(ts) + skewSeconds) * 1000 - nowMs;
  return last < 0 ? last : last + 1;
}

/** Seconds per quota slice. */
export function sliceSeconds(skewSeconds: number): number {
  return Math.max(1, Math.ceil((2 * skewSeconds) / QUOTA_SLICES));
}

export interface RememberCall {
  keys: [nonce: string, quota: string, since: string];
  /** nonce TTL ms, the nonce's slice, the oldest live slice, the quota, the quota hash's TTL ms, now ms, ts. */
  args: [number, number, number, number, number, number, number];
  /** For reading the reply: the clock, slice length and ts the arguments were made with. */
  nowMs: number;
  slice: number;
  ts: number;
}

/** The script's arguments for one request; undefined when the nonce's window is already over. */
export function rememberCall(id: string, nonce: string, ts: string, nowMs: number, limits: Pick<RedisNonceLimits, 'perToken' | 'skewSeconds'>): RememberCall | undefined {
  const ttl = nonceTtlMs(ts, limits.skewSeconds, nowMs);
  if (ttl < 0) return undefined;
  const slice = sliceSeconds(limits.skewSeconds);
  const nonceSlice = Math.floor((Number(ts) + limits.skewSeconds) / slice);
  // The quota hash lives until the end of its newest slice: every nonce it counts has expired by then.
  const quotaTtl = (nonceSlice + 1) * slice * 1000 - nowMs;
  return {
    keys: [nonceKey(id, ts, nonce), quotaKey(id), SINCE_KEY],
    args: [ttl, nonceSlice, Math.floor(nowMs / 1000 / slice), limits.perToken, quotaTtl, nowMs, Number(ts)],
    nowMs,
    slice,
    ts: Number(ts),
  };
}

/**
 * KEYS: the nonce, the token's quota hash, SINCE_KEY. ARGV: see RememberCall.args.
 * Replies {0} new, {1} replayed, {2, oldest live slice} over the quota,
 * {3, since} signed in a second before the one the store's memory begins in.
 * A replay is told as such even when the quota is used up, as the memory store does.
 */
export const REMEMBER_SCRIPT = `
local since = redis.call('GET', KEYS[3])
if not since then
  since = ARGV[6]
  redis.call('SET', KEYS[3], since)
end
if tonumber(ARGV[7]) < math.floor(tonumber(since) / 1000) then return {3, tonumber(since)} end
if redis.call('EXISTS', KEYS[1]) == 1 then return {1} end
local live = tonumber(ARGV[3])
local fields = redis.call('HGETALL', KEYS[2])
local count, oldest = 0, nil
for i = 1, #fields, 2 do
  local slice = tonumber(fields[i])
  if slice < live then
    redis.call('HDEL', KEYS[2], fields[i])
  else
    count = count + tonumber(fields[i + 1])
    if oldest == nil or slice < oldest then oldest = slice end
  end
end
if count >= tonumber(ARGV[4]) then return {2, oldest} end
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return {1} end
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[2], ARGV[5]) end
return {0}
`;

/** The script's reply as a verdict; anything else is the store misbehaving (503). */
export function verdictOf(reply: unknown, call: Pick<RememberCall, 'nowMs' | 'slice' | 'ts'>): NonceVerdict {
  if (Array.isArray(reply)) {
    const [code, oldest] = reply as unknown[];
    if (code === 3 && reply.length === 2 && Number.isSafeInteger(oldest)) {
      // Until the client's clock reaches the store's first second, so that its next request is signed in it or later.
      return { outcome: 'unknown', retryAfter: Math.max(1, Math.floor((oldest as number) / 1000) - call.ts) };
    }
    if (code === 0 && reply.length === 1) return { outcome: 'new' };
    if (code === 1 && reply.length === 1) return { outcome: 'replayed' };
    if (code === 2 && reply.length === 2 && Number.isSafeInteger(oldest)) {
      // The oldest slice's count goes once the slice is over.
      const retryAfter = ((oldest as number) + 1) * call.slice - Math.floor(call.nowMs / 1000);
      return { outcome: 'token-full', retryAfter: Math.max(1, retryAfter) };
    }
  }
  throw new ServiceUnavailable(`the nonce store answered ${JSON.stringify(reply)?.slice(0, 100)}`);
}

/** A failed call: Redis at its maxmemory is a full store (503 as the memory store's); anything else, unavailable. */
export function verdictOfError(err: unknown, retryAfter: number): NonceVerdict {
  const message = err instanceof Error ? err.message : String(err);
  if (/\bOOM\b/.test(message)) return { outcome: 'cache-full', retryAfter };
  throw new ServiceUnavailable(`the nonce store did not answer: ${message}`, retryAfter);
}

/** Why a Redis whose `INFO memory` reads so must not hold nonces, or undefined when it may. */
export function evictionProblem(infoMemory: string): string | undefined {
  const policy = /^maxmemory_policy:(\S+)/m.exec(infoMemory)?.[1];
  if (policy === undefined || policy === 'noeviction') return undefined;
  return `its maxmemory-policy is ${policy}, which may evict nonces before their window ends; set maxmemory-policy noeviction`;
}

/** The URL as logs may show it: no password. */
export function redactedUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

// ---- the store ----

type RememberScript = (nonceKey: string, quotaKey: string, sinceKey: string, ...args: number[]) => Promise<unknown>;

export class RedisNonceStore implements NonceStore {
  readonly kind = 'redis';
  /** Set once this connection's eviction policy was read and found safe; a reconnect reads it again. */
  private safe = false;
  private unsafeLogged = false;
  private checking: Promise<void> | undefined;
  private down = true;
  private closing = false;
  private readonly script: RememberScript;

  private constructor(
    private readonly client: Redis,
    private readonly limits: RedisNonceLimits,
    private readonly log: Logger,
  ) {
    client.defineCommand('rememberNonce', { numberOfKeys: 3, lua: REMEMBER_SCRIPT });
    this.script = (client as unknown as { rememberNonce: RememberScript }).rememberNonce.bind(client);
    client.on('ready', () => {
      if (this.down) log.info('nonce store connected');
      this.down = false;
      this.prepare().catch(() => {});
    });
    // Without a listener an 'error' would be thrown; the client reconnects by itself.
    client.on('error', (err: Error) => {
      if (!this.down) log.warn({ reason: err.message }, 'nonce store unreachable: answering 503 until it is back');
      else log.debug({ reason: err.message }, 'nonce store still unreachable');
      this.down = true;
    });
    client.on('close', () => {
      this.safe = false;
      this.unsafeLogged = false;
      if (!this.down && !this.closing) log.warn('nonce store connection closed: answering 503 until it is back');
      this.down = true;
    });
  }

  /** Connects (waiting a little for the first connection) and serves from then on, reconnecting whenever Redis comes back. */
  static async open(config: Extract<NonceStoreConfig, { kind: 'redis' }>, limits: RedisNonceLimits, log: Logger): Promise<RedisNonceStore> {
    const client = new Redis(config.url, {
      commandTimeout: config.timeoutMs,
      connectTimeout: Math.max(config.timeoutMs, FIRST_CONNECT_WAIT_MS),
      // Never queue or resend: a request waits for no reconnect, and a resent SET NX would call its own nonce a replay.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 10), MAX_RECONNECT_DELAY_MS),
      connectionName: 'node-gateway',
    });
    const store = new RedisNonceStore(client, limits, log.child({ nonceStore: redactedUrl(config.url) }));
    const waited = new AbortController();
    const timer = setTimeout(() => waited.abort(), FIRST_CONNECT_WAIT_MS);
    try {
      await once(client, 'ready', { signal: waited.signal });
      await store.prepare().catch(() => {});
    } catch {
      store.log.warn('nonce store not reachable yet: answering 503 until it is');
    } finally {
      clearTimeout(timer);
    }
    return store;
  }

  async remember(id: string, nonce: string, ts: string, nowMs: number): Promise<NonceVerdict> {
    const call = rememberCall(id, nonce, ts, nowMs, this.limits);
    if (call === undefined) return { outcome: 'new' };
    if (this.client.status !== 'ready') throw new ServiceUnavailable(`the nonce store is not connected (${this.client.status})`, this.limits.retryAfter);
    let reply: unknown;
    try {
      if (!this.safe) await this.prepare();
      reply = await this.script(...call.keys, ...call.args);
    } catch (err) {
      if (err instanceof ServiceUnavailable) throw err;
      return verdictOfError(err, this.limits.retryAfter);
    }
    return verdictOf(reply, call);
  }

  async healthy(): Promise<boolean> {
    if (this.client.status !== 'ready') return false;
    try {
      await this.client.ping();
      await this.prepare();
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    this.client.disconnect();
  }

  /**
   * Once per connection (the heartbeat again): records when the store's memory
   * begins if it has no record (a new or emptied Redis), and reads the eviction
   * policy; unsafe → ServiceUnavailable.
   */
  private prepare(): Promise<void> {
    this.checking ??= this.client
      .set(SINCE_KEY, String(Date.now()), 'NX')
      .then(() => this.client.info('memory'))
      .then((info) => {
        const problem = evictionProblem(info);
        if (problem) {
          if (!this.unsafeLogged) this.log.error(`nonce store refused: ${problem}`);
          this.unsafeLogged = true;
          this.safe = false;
          throw new ServiceUnavailable(`nonce store refused: ${problem}`, this.limits.retryAfter);
        }
        this.safe = true;
      })
      .finally(() => {
        this.checking = undefined;
      });
    return this.checking;
  }
}
