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
// A Redis that lost nonces it had acknowledged (a restart from an older RDB
// snapshot or from an AOF missing its last second, a restart without
// persistence, FLUSHALL, a failover to a replica that had not caught up) cannot
// tell a replay of a request accepted before the loss. So the store has epochs:
// `nonce-store:epoch` names the Redis server process that holds it (INFO
// server's run_id, which every restart and every other server has anew) and
// when it began. The script checks it on every request, in the same round trip
// as the nonce. A marker from another server process, a missing marker where
// this gateway knew one, or one older than this gateway saw, means data was
// lost: a new epoch begins, and every request whose acceptance window opened
// before it (ts - skew < its start) is refused with 503 + Retry-After. That is
// everything signed before the loss whatever its ts, and for HAWK_SKEW seconds
// every request. A Redis no gateway has used (no marker, and this gateway knew
// none) starts an epoch without that wait. Every half second each gateway
// reads the marker, so one that serves nothing still knows the epoch.
//
// Redis that cannot answer (down, restarting, slower than NONCE_STORE_TIMEOUT_MS)
// means 503 + Retry-After: a request is never forwarded unchecked. A Redis that
// may evict keys (maxmemory-policy other than noeviction) would forget nonces
// early, so it is refused the same way until it is set right; the policy is
// read every half second, so a change at run time is seen within a second.
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
/** The longest wait between two reconnects. */
const MAX_RECONNECT_DELAY_MS = 1000;
/** How long to wait before the `times`-th reconnect (1, 2, …): 100 ms, doubling, at most MAX_RECONNECT_DELAY_MS; never given up. */
export function reconnectDelayMs(times: number): number {
  return Math.min(50 * 2 ** Math.min(times, 10), MAX_RECONNECT_DELAY_MS);
}
/** How often the eviction policy, the server and the epoch are read again: a change is seen within a second. */
export const RECHECK_MS = 500;

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

/** The store's epoch: a hash of `run` (the run_id of the server that began it), `since` and `floor` (ms). */
export const EPOCH_KEY = 'nonce-store:epoch';

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

/** What this gateway knows of the server and the store: the epoch arguments of every script call. */
export interface EpochView {
  /** INFO server's run_id of the server on this connection. */
  runId: string;
  /** `since` of the last epoch this gateway saw (ms), 0 for none. */
  knownSince: number;
}

/** The epoch arguments (ARGV 1–4): run_id, the epoch this gateway knew, its clock, the skew in ms. */
export function epochArgs(view: EpochView, nowMs: number, skewSeconds: number): [string, number, number, number] {
  return [view.runId, view.knownSince, nowMs, skewSeconds * 1000];
}

export interface RememberCall {
  keys: [nonce: string, quota: string, epoch: string];
  /** The epoch's four (epochArgs), then ts, nonce TTL ms, the nonce's slice, the oldest live slice, the quota, the quota hash's TTL ms. */
  args: [string, number, number, number, number, number, number, number, number, number];
  /** For reading the reply: the clock, slice length and ts the arguments were made with. */
  nowMs: number;
  slice: number;
  ts: number;
}

/** The script's arguments for one request; undefined when the nonce's window is already over. */
export function rememberCall(
  id: string,
  nonce: string,
  ts: string,
  nowMs: number,
  limits: Pick<RedisNonceLimits, 'perToken' | 'skewSeconds'>,
  view: EpochView,
): RememberCall | undefined {
  const ttl = nonceTtlMs(ts, limits.skewSeconds, nowMs);
  if (ttl < 0) return undefined;
  const slice = sliceSeconds(limits.skewSeconds);
  const nonceSlice = Math.floor((Number(ts) + limits.skewSeconds) / slice);
  // The quota hash lives until the end of its newest slice: every nonce it counts has expired by then.
  const quotaTtl = (nonceSlice + 1) * slice * 1000 - nowMs;
  return {
    keys: [nonceKey(id, ts, nonce), quotaKey(id), EPOCH_KEY],
    args: [...epochArgs(view, nowMs, limits.skewSeconds), Number(ts), ttl, nonceSlice, Math.floor(nowMs / 1000 / slice), limits.perToken, quotaTtl],
    nowMs,
    slice,
    ts: Number(ts),
  };
}

/**
 * The epoch, as both scripts begin: KEYS[1] or KEYS[3] is EPOCH_KEY, ARGV 1–4
 * epochArgs. Returns the epoch's since and floor (ms): a request whose ts (in
 * ms) is below floor had its window open before the epoch began.
 *  - the marker is this server's and the one this gateway knew (or it knew
 *    none): the epoch goes on;
 *  - this server's, begun after the one this gateway knew: another gateway
 *    began it, perhaps not knowing what was lost (it knew no epoch), so its
 *    floor is raised to since + skew;
 *  - none, another server's (restarted from persistence, failed over), or
 *    older than the one this gateway knew: a new epoch from now (the later of
 *    this gateway's clock and Redis's), whose floor is now + skew, unless
 *    there was no marker and this gateway knew none: a Redis never used.
 */
const EPOCH_LUA = `
local function epoch(key)
  local m = redis.call('HMGET', key, 'run', 'since', 'floor')
  local known = tonumber(ARGV[2])
  local since, floor = tonumber(m[2]), tonumber(m[3])
  if m[1] == ARGV[1] and since and floor then
    if known == 0 or since == known then return since, floor end
    if since > known then
      local want = since + tonumber(ARGV[4])
      if floor < want then
        floor = want
        redis.call('HSET', key, 'floor', floor)
      end
      return since, floor
    end
  end
  local t = redis.call('TIME')
  since = math.max(tonumber(ARGV[3]), tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  floor = 0
  if m[1] or known > 0 then floor = since + tonumber(ARGV[4]) end
  redis.call('DEL', key)
  redis.call('HSET', key, 'run', ARGV[1], 'since', since, 'floor', floor)
  return since, floor
end
`;

/** KEYS: EPOCH_KEY. ARGV: epochArgs. Replies {since, floor}. */
export const EPOCH_SCRIPT = `${EPOCH_LUA}
local since, floor = epoch(KEYS[1])
return {since, floor}
`;

/**
 * KEYS: the nonce, the token's quota hash, EPOCH_KEY. ARGV: see RememberCall.args.
 * Replies {code, since, floor}, and for code 2 the oldest live slice: 0 new,
 * 1 replayed, 2 over the quota, 3 its window opened before the epoch began.
 * A nonce still held is a replay (401) whatever the epoch; only the others are unknown.
 * A replay is told as such even when the quota is used up, as the memory store does.
 */
export const REMEMBER_SCRIPT = `${EPOCH_LUA}
local since, floor = epoch(KEYS[3])
if redis.call('EXISTS', KEYS[1]) == 1 then return {1, since, floor} end
if tonumber(ARGV[5]) * 1000 < floor then return {3, since, floor} end
local live = tonumber(ARGV[8])
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
if count >= tonumber(ARGV[9]) then return {2, since, floor, oldest} end
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[6]) then return {1, since, floor} end
redis.call('HINCRBY', KEYS[2], ARGV[7], 1)
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[10]) then redis.call('PEXPIRE', KEYS[2], ARGV[10]) end
return {0, since, floor}
`;

/** An epoch as the scripts report it (ms). */
export interface Epoch {
  since: number;
  floor: number;
}

function isMs(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0;
}

/** EPOCH_SCRIPT's reply; anything else is the store misbehaving (503). */
export function epochOf(reply: unknown): Epoch {
  if (Array.isArray(reply) && reply.length === 2 && isMs(reply[0]) && isMs(reply[1])) return { since: reply[0], floor: reply[1] };
  throw new ServiceUnavailable(`the nonce store answered ${JSON.stringify(reply)?.slice(0, 100)}`);
}

/** REMEMBER_SCRIPT's reply: the verdict and the epoch; anything else is the store misbehaving (503). */
export function verdictOf(reply: unknown, call: Pick<RememberCall, 'nowMs' | 'slice' | 'ts'>): { verdict: NonceVerdict; epoch: Epoch } {
  if (Array.isArray(reply) && isMs(reply[1]) && isMs(reply[2])) {
    const [code, since, floor, oldest] = reply as [unknown, number, number, unknown];
    const epoch = { since, floor };
    if (code === 0 && reply.length === 3) return { verdict: { outcome: 'new' }, epoch };
    if (code === 1 && reply.length === 3) return { verdict: { outcome: 'replayed' }, epoch };
    if (code === 2 && reply.length === 4 && Number.isSafeInteger(oldest)) {
      // The oldest slice's count goes once the slice is over.
      const retryAfter = ((oldest as number) + 1) * call.slice - Math.floor(call.nowMs / 1000);
      return { verdict: { outcome: 'token-full', retryAfter: Math.max(1, retryAfter) }, epoch };
    }
    if (code === 3 && reply.length === 3) {
      // Until the client's clock reaches the floor, so that its next request is signed at or after it.
      return { verdict: { outcome: 'unknown', retryAfter: Math.max(1, Math.ceil(floor / 1000 - call.ts)) }, epoch };
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

/** What `INFO server memory` says about the server: its run_id, and why it must not hold nonces (undefined when it may). */
export interface ServerView {
  runId: string;
  problem?: string;
}

/** Reads `INFO server memory`; throws when it names no run_id. */
export function serverOf(info: string): ServerView {
  const runId = /^run_id:([0-9a-f]+)\r?$/m.exec(info)?.[1];
  if (runId === undefined) throw new ServiceUnavailable('the nonce store did not say its run_id (INFO server)');
  return { runId, problem: evictionProblem(info) };
}

/** Why a Redis whose `INFO memory` reads so must not hold nonces, or undefined when it may. */
export function evictionProblem(infoMemory: string): string | undefined {
  const policy = /^maxmemory_policy:(\S+)/m.exec(infoMemory)?.[1];
  if (policy === undefined || policy === 'noeviction') return undefined;
  return `its maxmemory-policy is ${policy}, which may evict nonces before their window ends; set maxmemory-policy noeviction`;
}

/**
 * The Redis ACL rules a gateway's user needs (docs/security.md gives the whole
 * ACL SETUSER line): its three key prefixes, and only the commands its client
 * and its scripts send; no FLUSHALL, CONFIG, KEYS, DEBUG or pub/sub.
 */
export const GATEWAY_ACL_RULES =
  'resetkeys ~nonce:* ~nonces:* ~nonce-store:* resetchannels -@all ' +
  '+evalsha +eval +info +ping +client|setname +select +exists +set +del +hmget +hset +hgetall +hdel +hincrby +pttl +pexpire +time';

/** The URL as logs may show it: no password. */
export function redactedUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

// ---- the store ----

type RememberScript = (nonceKey: string, quotaKey: string, epochKey: string, ...args: Array<string | number>) => Promise<unknown>;
type EpochScript = (epochKey: string, ...args: Array<string | number>) => Promise<unknown>;

export class RedisNonceStore implements NonceStore {
  readonly kind = 'redis';
  /** What INFO said on this connection (read on connecting, then every RECHECK_MS); undefined until read, and after a disconnect. */
  private server: ServerView | undefined;
  /** The `since` of the last epoch seen: it outlives connections, so a Redis that comes back empty is told from a new one. */
  private knownSince = 0;
  private unsafeLogged = false;
  private checking: Promise<ServerView> | undefined;
  private down = true;
  private closing = false;
  private readonly timer: NodeJS.Timeout;
  private readonly script: RememberScript;
  private readonly epochScript: EpochScript;

  private constructor(
    private readonly client: Redis,
    private readonly limits: RedisNonceLimits,
    private readonly log: Logger,
  ) {
    client.defineCommand('rememberNonce', { numberOfKeys: 3, lua: REMEMBER_SCRIPT });
    client.defineCommand('nonceEpoch', { numberOfKeys: 1, lua: EPOCH_SCRIPT });
    const commands = client as unknown as { rememberNonce: RememberScript; nonceEpoch: EpochScript };
    this.script = commands.rememberNonce.bind(client);
    this.epochScript = commands.nonceEpoch.bind(client);
    client.on('ready', () => {
      if (this.down) log.info('nonce store connected');
      this.down = false;
      this.check().catch(() => {});
    });
    // Without a listener an 'error' would be thrown; the client reconnects by itself.
    client.on('error', (err: Error) => {
      if (!this.down) log.warn({ reason: err.message }, 'nonce store unreachable: answering 503 until it is back');
      else log.debug({ reason: err.message }, 'nonce store still unreachable');
      this.down = true;
    });
    client.on('close', () => {
      this.server = undefined;
      if (!this.down && !this.closing) log.warn('nonce store connection closed: answering 503 until it is back');
      this.down = true;
    });
    // A policy changed at run time, a server switched under the connection, an epoch begun elsewhere: seen within a second.
    this.timer = setInterval(() => {
      if (this.client.status === 'ready') this.check().catch(() => {});
    }, RECHECK_MS);
    this.timer.unref();
  }

  /** Connects (waiting a little for the first connection) and serves from then on, reconnecting whenever Redis comes back. */
  static async open(config: Extract<NonceStoreConfig, { kind: 'redis' }>, limits: RedisNonceLimits, log: Logger): Promise<RedisNonceStore> {
    const client = new Redis(config.url, {
      commandTimeout: config.timeoutMs,
      connectTimeout: Math.max(config.timeoutMs, FIRST_CONNECT_WAIT_MS),
      // Never queue or resend: a request waits for no reconnect, and a resent SET NX would call its own nonce a replay.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: reconnectDelayMs,
      connectionName: 'node-gateway',
    });
    const store = new RedisNonceStore(client, limits, log.child({ nonceStore: redactedUrl(config.url) }));
    const waited = new AbortController();
    const timer = setTimeout(() => waited.abort(), FIRST_CONNECT_WAIT_MS);
    try {
      await once(client, 'ready', { signal: waited.signal });
      await store.check().catch(() => {});
    } catch {
      store.log.warn('nonce store not reachable yet: answering 503 until it is');
    } finally {
      clearTimeout(timer);
    }
    return store;
  }

  async remember(id: string, nonce: string, ts: string, nowMs: number): Promise<NonceVerdict> {
    if (nonceTtlMs(ts, this.limits.skewSeconds, nowMs) < 0) return { outcome: 'new' };
    if (this.client.status !== 'ready') throw new ServiceUnavailable(`the nonce store is not connected (${this.client.status})`, this.limits.retryAfter);
    let reply: unknown;
    let call: RememberCall;
    try {
      const server = this.server ?? (await this.check());
      if (server.problem) throw new ServiceUnavailable(`nonce store refused: ${server.problem}`, this.limits.retryAfter);
      call = rememberCall(id, nonce, ts, nowMs, this.limits, { runId: server.runId, knownSince: this.knownSince })!;
      reply = await this.script(...call.keys, ...call.args);
    } catch (err) {
      if (err instanceof ServiceUnavailable) throw err;
      return verdictOfError(err, this.limits.retryAfter);
    }
    const { verdict, epoch } = verdictOf(reply, call);
    this.saw(epoch);
    return verdict;
  }

  async healthy(): Promise<boolean> {
    if (this.client.status !== 'ready') return false;
    try {
      return (await this.check()).problem === undefined;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.timer);
    this.client.disconnect();
  }

  /** Notes the epoch a reply named; a new one that refuses what came before it is logged once, by each gateway that sees it. */
  private saw({ since, floor }: Epoch): void {
    if (since === this.knownSince) return;
    const first = this.knownSince === 0;
    this.knownSince = since;
    // A wait already over (a gateway meeting the store long after) is no news.
    if (floor > since && floor > Date.now()) {
      this.log.warn(
        { epochSince: new Date(since).toISOString(), refusedUntil: new Date(floor).toISOString() },
        'nonce store lost nonces (restarted, flushed or failed over): requests whose window opened before epochSince get 503 until refusedUntil',
      );
    } else if (!first) this.log.info({ epochSince: new Date(since).toISOString() }, 'nonce store began a new epoch');
  }

  /**
   * Reads the server (run_id, eviction policy) and the store's epoch; on
   * connecting, every RECHECK_MS, and for the heartbeat. One at a time.
   */
  private check(): Promise<ServerView> {
    this.checking ??= this.readServer().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  private async readServer(): Promise<ServerView> {
    const server = serverOf(await this.client.info('server', 'memory'));
    const epoch = epochOf(await this.epochScript(EPOCH_KEY, ...epochArgs({ runId: server.runId, knownSince: this.knownSince }, Date.now(), this.limits.skewSeconds)));
    this.saw(epoch);
    if (server.problem && !this.unsafeLogged) this.log.error(`nonce store refused: ${server.problem}`);
    else if (!server.problem && this.unsafeLogged) this.log.warn('nonce store usable again: its maxmemory-policy is noeviction');
    this.unsafeLogged = server.problem !== undefined;
    // A reply that came back after a disconnect describes a connection that is gone.
    if (this.client.status === 'ready') this.server = server;
    return server;
  }
}
