// The shared nonce store: its pure parts (keys, expiry, the script's arguments
// and replies), then the store itself against a real redis-server.
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ServiceUnavailable } from '../../lib/errors.js';
import { logger } from '../../lib/log.js';
import { capturedLog } from '../../tests/support/log.js';
import { redisSkipReason, startRedis, type TestRedis } from '../../tests/support/redis.js';
import { eventually } from '../../tests/support/services.js';
import {
  EPOCH_KEY,
  epochArgs,
  epochOf,
  evictionProblem,
  GATEWAY_ACL_RULES,
  nonceKey,
  nonceTtlMs,
  QUOTA_SLICES,
  quotaKey,
  redactedUrl,
  RedisNonceStore,
  RECHECK_MS,
  reconnectDelayMs,
  rememberCall,
  serverOf,
  sliceSeconds,
  verdictOf,
  verdictOfError,
} from './redis-nonces.js';

const T0 = 1_700_000_000; // seconds
const ID = 'eyJ0b2tlbiI6InBheWxvYWQifQ' + 'S'.repeat(43);

// ---- pure parts ----

test('keys: 128 bits of SHA-256, never the token; one per (token, ts, nonce)', () => {
  const key = nonceKey(ID, String(T0), 'n1');
  assert.match(key, /^nonce:[A-Za-z0-9_-]{22}$/);
  const expected = createHash('sha256').update(`${ID}\n${T0}\nn1`).digest().subarray(0, 16).toString('base64url');
  assert.equal(key, `nonce:${expected}`);
  assert.ok(!key.includes(ID.slice(-16)), 'no part of the token');
  assert.notEqual(nonceKey(ID, String(T0), 'n2'), key, 'another nonce');
  assert.notEqual(nonceKey(ID, String(T0 + 1), 'n1'), key, 'another ts');
  assert.notEqual(nonceKey(ID + 'x', String(T0), 'n1'), key, 'another token');
  // The fields cannot slide into each other.
  assert.notEqual(nonceKey('a', '1', '2x'), nonceKey('a', '12', 'x'));
  const quota = quotaKey(ID);
  assert.match(quota, /^nonces:[A-Za-z0-9_-]{22}$/);
  assert.equal(quota, `nonces:${createHash('sha256').update(ID).digest().subarray(0, 16).toString('base64url')}`);
  assert.notEqual(quotaKey(ID + 'x'), quota);
});

test('expiry: remembered through the last millisecond at which ts passes the skew check', () => {
  const now = T0 * 1000 + 250;
  assert.equal(nonceTtlMs(String(T0), 60, now), 60_000 - 250 + 1);
  assert.equal(nonceTtlMs(String(T0 + 60), 60, now), 120_000 - 250 + 1, 'signed a skew ahead: twice the skew');
  assert.equal(nonceTtlMs(String(T0 - 60), 60, T0 * 1000), 1, 'the very last millisecond');
  assert.ok(nonceTtlMs(String(T0 - 60), 60, T0 * 1000 + 1) < 0, 'over');
});

test('quota slices: eight over the 2 × skew a nonce lives, at least a second', () => {
  assert.equal(QUOTA_SLICES, 8);
  assert.equal(sliceSeconds(60), 15);
  assert.equal(sliceSeconds(1), 1);
  assert.equal(sliceSeconds(3), 1);
  assert.equal(sliceSeconds(5), 2);
});

test('rememberCall: the epoch arguments, then the nonce\'s; nothing once the window is over', () => {
  const limits = { perToken: 100, skewSeconds: 60 };
  const view = { runId: 'a'.repeat(40), knownSince: T0 * 1000 - 5000 };
  const now = T0 * 1000 + 500;
  const call = rememberCall(ID, 'n1', String(T0 + 10), now, limits, view)!;
  assert.deepEqual(call.keys, [nonceKey(ID, String(T0 + 10), 'n1'), quotaKey(ID), EPOCH_KEY]);
  const slice = Math.floor((T0 + 70) / 15);
  assert.deepEqual(epochArgs(view, now, 60), [view.runId, view.knownSince, now, 60_000]);
  assert.deepEqual(call.args, [...epochArgs(view, now, 60), T0 + 10, 70_000 - 500 + 1, slice, Math.floor(T0 / 15), 100, (slice + 1) * 15_000 - now]);
  assert.ok(call.args[9] >= call.args[5] - 1, 'the count outlives every nonce it counts');
  assert.deepEqual([call.slice, call.ts, call.nowMs], [15, T0 + 10, now]);
  assert.equal(rememberCall(ID, 'n1', String(T0 - 61), T0 * 1000, limits, view), undefined);
});

test('verdictOf: new, replayed, over the quota or opened before the epoch, with a Retry-After, and the epoch; anything else 503', () => {
  const call = { nowMs: T0 * 1000 + 999, slice: 15, ts: T0 };
  const since = T0 * 1000 - 30_000;
  const epoch = { since, floor: 0 };
  assert.deepEqual(verdictOf([0, since, 0], call), { verdict: { outcome: 'new' }, epoch });
  assert.deepEqual(verdictOf([1, since, 0], call), { verdict: { outcome: 'replayed' }, epoch });
  const oldest = Math.floor(T0 / 15);
  assert.deepEqual(verdictOf([2, since, 0, oldest], call), { verdict: { outcome: 'token-full', retryAfter: (oldest + 1) * 15 - T0 }, epoch });
  assert.deepEqual(verdictOf([2, since, 0, oldest - 5], call).verdict, { outcome: 'token-full', retryAfter: 1 }, 'at least a second');
  // The epoch's floor is T0 + 42.5 s: the client waits until its clock reaches it.
  const floor = T0 * 1000 + 42_500;
  assert.deepEqual(verdictOf([3, since, floor], call), { verdict: { outcome: 'unknown', retryAfter: 43 }, epoch: { since, floor } });
  assert.deepEqual(verdictOf([3, since, T0 * 1000 + 1], call).verdict, { outcome: 'unknown', retryAfter: 1 });
  for (const odd of [null, 'OK', [], [3], [0], [0, since], [4, since, 0], [0, since, 0, 1], [2, since, 0], [2, since, 0, 'x'], [2, since, 0, 1.5], [3, since, 'x'], [0, -1, 0], [0, since, 1.5], { 0: 0 }]) {
    assert.throws(() => verdictOf(odd, call), ServiceUnavailable, JSON.stringify(odd));
  }
});

test('epochOf and serverOf: what the epoch script and INFO server memory say, or 503', () => {
  assert.deepEqual(epochOf([5, 0]), { since: 5, floor: 0 });
  for (const odd of [null, [], [5], [5, 0, 1], ['5', 0], [5, -1]]) assert.throws(() => epochOf(odd), ServiceUnavailable, JSON.stringify(odd));
  const run = '0123456789abcdef0123456789abcdef01234567';
  assert.deepEqual(serverOf(`# Server\r\nredis_version:7.0.15\r\nrun_id:${run}\r\n\r\n# Memory\r\nmaxmemory_policy:noeviction\r\n`), { runId: run, problem: undefined });
  assert.match(serverOf(`run_id:${run}\r\nmaxmemory_policy:allkeys-lru\r\n`).problem ?? '', /allkeys-lru/);
  assert.throws(() => serverOf('# Memory\r\nmaxmemory_policy:noeviction\r\n'), ServiceUnavailable);
  assert.ok(RECHECK_MS <= 500, 'read twice a second at least, so a change is seen within one');
});

test('verdictOfError: Redis at maxmemory is a full store; any other failure is 503 with Retry-After', () => {
  const oom = new Error("ERR Error running script: @user_script:14: OOM command not allowed when used memory > 'maxmemory'.");
  assert.deepEqual(verdictOfError(oom, 7), { outcome: 'cache-full', retryAfter: 7 });
  for (const err of [new Error('Command timed out'), new Error("Stream isn't writeable and enableOfflineQueue options is false"), 'weird']) {
    assert.throws(
      () => verdictOfError(err, 7),
      (e: unknown) => e instanceof ServiceUnavailable && e.status === 503 && e.headers['Retry-After'] === '7',
    );
  }
  assert.throws(() => verdictOfError(new Error('ROOMY'), 7), ServiceUnavailable, 'OOM as a word only');
});

test('evictionProblem: only noeviction keeps every nonce for its window', () => {
  assert.equal(evictionProblem('# Memory\r\nused_memory:1\r\nmaxmemory_policy:noeviction\r\n'), undefined);
  assert.match(evictionProblem('maxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n') ?? '', /allkeys-lru.*noeviction/);
  assert.match(evictionProblem('maxmemory_policy:volatile-ttl\r\n') ?? '', /volatile-ttl/);
  assert.equal(evictionProblem('# Memory\r\nused_memory:1\r\n'), undefined, 'not told: nothing to refuse');
});

test('redactedUrl: a password never reaches the logs', () => {
  assert.equal(redactedUrl('redis://:s3cret@redis.internal:6380/2'), 'redis://:***@redis.internal:6380/2');
  assert.equal(redactedUrl('rediss://user:s3cret@r.example'), 'rediss://user:***@r.example');
  assert.equal(redactedUrl('redis://127.0.0.1:6379'), 'redis://127.0.0.1:6379');
});

// ---- the store against a real redis-server ----

const skip = redisSkipReason();
if (skip) console.log(`# skipped: the RedisNonceStore tests against redis-server: ${skip}`);

describe('RedisNonceStore against redis-server', { skip }, () => {
  let redis: TestRedis;
  const stores: RedisNonceStore[] = [];
  const log = logger('redis-nonces-test');
  const open = async (perToken = 5, url = redis.url) => {
    const s = await RedisNonceStore.open({ kind: 'redis', url, timeoutMs: 300 }, { perToken, skewSeconds: 60, retryAfter: 3 }, log);
    stores.push(s);
    return s;
  };
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await redis?.dispose();
  });

  test('two stores on one Redis: a nonce is new once, whichever store sees it', async () => {
    const [a, b] = [await open(), await open()];
    const now = Date.now();
    const ts = String(Math.floor(now / 1000));
    assert.deepEqual(await a.remember(ID, 'shared', ts, now), { outcome: 'new' });
    assert.deepEqual(await b.remember(ID, 'shared', ts, now), { outcome: 'replayed' });
    assert.deepEqual(await a.remember(ID, 'shared', ts, now), { outcome: 'replayed' });
    assert.deepEqual(await b.remember(ID, 'shared', String(Number(ts) + 1), now), { outcome: 'new' }, 'another ts');
    assert.equal(await a.healthy(), true);
  });

  test('what Redis holds: the hashed key with the exact expiry, a small per-token count, no token', async () => {
    const s = await open();
    const id = `${ID}-what`;
    const now = Date.now();
    const ts = Math.floor(now / 1000) + 30;
    assert.deepEqual(await s.remember(id, 'held', String(ts), now), { outcome: 'new' });
    const pttl = Number(await redis.command('PTTL', nonceKey(id, String(ts), 'held')));
    const expected = (ts + 60) * 1000 - now;
    assert.ok(pttl <= expected + 1 && pttl > expected - 1000, `PTTL ${pttl}, expected about ${expected}`);
    const count = await redis.command('HGET', quotaKey(id), String(Math.floor((ts + 60) / sliceSeconds(60))));
    assert.equal(count, '1');
    const keys = (await redis.command('KEYS', '*')) as string[];
    assert.ok(keys.includes(nonceKey(id, String(ts), 'held')) && keys.includes(quotaKey(id)));
    assert.ok(!keys.some((k) => k.includes(id.slice(-20))), 'no key carries the token');
  });

  test('the per-token quota holds across stores; a replay is still a replay; other tokens are untouched', async () => {
    const [a, b] = [await open(3), await open(3)];
    const id = `${ID}-quota`;
    const now = Date.now();
    const ts = String(Math.floor(now / 1000));
    assert.equal((await a.remember(id, 'q1', ts, now)).outcome, 'new');
    assert.equal((await b.remember(id, 'q2', ts, now)).outcome, 'new');
    assert.equal((await a.remember(id, 'q3', ts, now)).outcome, 'new');
    const full = await b.remember(id, 'q4', ts, now);
    assert.equal(full.outcome, 'token-full');
    assert.ok('retryAfter' in full && full.retryAfter >= 1 && full.retryAfter <= 2 * 60 + sliceSeconds(60), JSON.stringify(full));
    assert.equal((await b.remember(id, 'q1', ts, now)).outcome, 'replayed');
    assert.equal((await a.remember(`${id}-other`, 'q4', ts, now)).outcome, 'new');
    // Once its slice is over (here: the clock moved past every nonce's window) the count is pruned.
    const later = now + 200_000;
    assert.equal((await a.remember(id, 'q5', String(Math.floor(later / 1000)), later)).outcome, 'new');
  });

  test('maxmemory reached: a full store, 503 with Retry-After, never a forgotten nonce', async () => {
    const s = await open();
    const now = Date.now();
    const ts = String(Math.floor(now / 1000));
    assert.equal((await s.remember(`${ID}-oom`, 'kept', ts, now)).outcome, 'new');
    await redis.command('CONFIG', 'SET', 'maxmemory', '1');
    try {
      assert.deepEqual(await s.remember(`${ID}-oom`, 'new-one', ts, now), { outcome: 'cache-full', retryAfter: 3 });
      assert.equal((await s.remember(`${ID}-oom`, 'kept', ts, now)).outcome, 'replayed');
    } finally {
      await redis.command('CONFIG', 'SET', 'maxmemory', '0');
    }
  });

  test('no Redis at the URL: start goes on, every check is 503, the heartbeat says so', async () => {
    const started = Date.now();
    const s = await open(5, 'redis://127.0.0.1:1');
    assert.ok(Date.now() - started < 3000, 'start does not hang');
    assert.equal(await s.healthy(), false);
    await assert.rejects(s.remember(ID, 'n', String(Math.floor(Date.now() / 1000)), Date.now()), (e: unknown) => e instanceof ServiceUnavailable && e.headers['Retry-After'] === '3');
  });
});

// ---- epochs, the eviction policy and the connection: each test on a Redis of its own ----

describe('RedisNonceStore epochs, eviction policy and connection against redis-server', { skip }, () => {
  const SKEW = 60;
  let redis: TestRedis | undefined;
  const stores: RedisNonceStore[] = [];
  const open = async (log = logger('redis-nonces-test'), url = redis!.url) => {
    const s = await RedisNonceStore.open({ kind: 'redis', url, timeoutMs: 300 }, { perToken: 50, skewSeconds: SKEW, retryAfter: 3 }, log);
    stores.push(s);
    return s;
  };
  const epoch = async () => {
    const [run, since, floor] = (await redis!.command('HMGET', EPOCH_KEY, 'run', 'since', 'floor')) as string[];
    return { run, since: Number(since), floor: Number(floor) };
  };
  const runId = async () => /run_id:(\w+)/.exec(String(await redis!.command('INFO', 'server')))![1];
  const nowTs = () => String(Math.floor(Date.now() / 1000));
  const named = async () => String(await redis!.command('CLIENT', 'LIST')).split('\n').filter((l) => / name=node-gateway /.test(l)).length;
  /** What a request signed now gets refused with, or undefined when it is not. */
  const refusal = (s: RedisNonceStore, nonce: string) => s.remember(ID, nonce, nowTs(), Date.now()).then(() => undefined, (e: unknown) => e);
  /** A request signed now: its outcome, or undefined when it is refused. */
  const outcome = (s: RedisNonceStore, nonce: string) => s.remember(ID, nonce, nowTs(), Date.now()).then((v) => v.outcome, () => undefined);
  /** Long enough for the store's checks (every RECHECK_MS) to run twice or more. */
  const throughChecks = () => new Promise((r) => setTimeout(r, 2.5 * RECHECK_MS));
  beforeEach(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
    await redis?.dispose();
  });

  test('a Redis never used: the first store begins an epoch at once, named by the server\'s run_id, and refuses nothing', async () => {
    const s = await open();
    const now = Date.now();
    assert.deepEqual(await s.remember(ID, 'first', String(Math.floor(now / 1000)), now), { outcome: 'new' });
    const e = await epoch();
    assert.equal(e.run, await runId());
    assert.equal(e.floor, 0);
    assert.ok(Math.abs(e.since - now) < 60_000, String(e.since));
  });

  test('FLUSHALL: a request signed 30 s ahead and accepted before is refused after, as is all whose window opened before the new epoch; then served; one warning', async () => {
    const { log, lines } = capturedLog();
    const s = await open(log);
    const now = Date.now();
    const ahead = String(Math.floor(now / 1000) + 30);
    assert.equal((await s.remember(ID, 'captured', ahead, now)).outcome, 'new');
    await redis!.command('FLUSHALL');
    const later = Date.now() + 1000;
    const replay = await s.remember(ID, 'captured', ahead, later);
    assert.equal(replay.outcome, 'unknown', JSON.stringify(replay));
    const e = await epoch();
    assert.equal(e.floor, e.since + SKEW * 1000, 'the wait is the skew from the epoch\'s start');
    assert.ok(e.since >= later, 'the epoch begins no earlier than the clock of the store that noticed');
    assert.ok('retryAfter' in replay && replay.retryAfter === Math.ceil(e.floor / 1000 - Number(ahead)), JSON.stringify(replay));
    // A request signed now: its window opened before the epoch too.
    const fresh = await s.remember(ID, 'fresh', String(Math.floor(later / 1000)), later);
    assert.equal(fresh.outcome, 'unknown');
    assert.ok('retryAfter' in fresh && fresh.retryAfter > SKEW - 5 && fresh.retryAfter <= SKEW + 1, JSON.stringify(fresh));
    // Signed at the floor: served.
    const at = Math.ceil(e.floor / 1000);
    assert.equal((await s.remember(ID, 'after', String(at), at * 1000)).outcome, 'new');
    // Told once, with the epoch's start and the end of the wait, however many requests and checks met the epoch.
    await throughChecks();
    const told = lines.filter((l) => /lost nonces/.test(l.msg));
    assert.equal(told.length, 1, JSON.stringify(told));
    assert.equal(told[0].level, 40);
    assert.equal(told[0].epochSince, new Date(e.since).toISOString());
    assert.equal(told[0].refusedUntil, new Date(e.floor).toISOString());
    assert.ok(!lines.some((l) => /began a new epoch/.test(l.msg)), 'the first epoch this store saw is no news');
  });

  test('a store serving nothing notices a flush within a second, so one that never knew the store does not begin an epoch without the wait', async () => {
    const { log, lines } = capturedLog();
    const idle = await open(log);
    const before = await epoch();
    assert.equal(before.floor, 0);
    await redis!.command('FLUSHALL');
    let e = before;
    await eventually('the idle store begins a new epoch', async () => (e = await epoch()).floor > 0, { pollMs: 25 });
    assert.equal(e.floor, e.since + SKEW * 1000);
    // The epoch is in Redis before the script's reply reaches the store that logs it.
    await eventually('a warning in the log', () => lines.some((l) => /lost nonces/.test(l.msg) && l.level === 40), { pollMs: 25 });
    const newcomer = await open();
    const now = Date.now();
    assert.equal((await newcomer.remember(ID, 'captured', String(Math.floor(now / 1000)), now)).outcome, 'unknown');
    assert.ok(idle);
  });

  test('an epoch another server began (a restart from persistence, a failover): a new epoch with the wait, whatever the store knew', async () => {
    const first = await open();
    const now = Date.now();
    assert.equal((await first.remember(ID, 'before', String(Math.floor(now / 1000)), now)).outcome, 'new');
    await first.close();
    // What a snapshot carries to a new server process: the marker, with the old server's run_id.
    await redis!.command('HSET', EPOCH_KEY, 'run', 'f'.repeat(40));
    const s = await open();
    const later = Date.now();
    assert.equal((await s.remember(ID, 'captured', String(Math.floor(later / 1000)), later)).outcome, 'unknown');
    // A nonce the snapshot did carry is a replay, told as such.
    assert.equal((await s.remember(ID, 'before', String(Math.floor(now / 1000)), later)).outcome, 'replayed');
    const e = await epoch();
    assert.equal(e.run, await runId());
    assert.equal(e.floor, e.since + SKEW * 1000);
  });

  test('an evicting maxmemory-policy set at run time: 503 within a second with no request or heartbeat asking, logged; set back: served, logged', async () => {
    const { log, lines } = capturedLog();
    const s = await open(log);
    assert.equal((await s.remember(ID, 'n0', nowTs(), Date.now())).outcome, 'new');
    await redis!.command('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru');
    const changed = Date.now();
    let n = 0;
    let refused: unknown;
    await eventually('refused', async () => (refused = await refusal(s, `n${++n}`)) !== undefined, { pollMs: 25 });
    const seenMs = Date.now() - changed;
    assert.ok(refused instanceof ServiceUnavailable && /^nonce store refused: .*allkeys-lru.*noeviction/.test(refused.message) && refused.headers['Retry-After'] === '3', String(refused));
    console.log(`# evicting policy seen after ${seenMs} ms (read every ${RECHECK_MS} ms)`);
    assert.equal(await s.healthy(), false);
    // Until set back, every request is refused; the checks in the meantime log nothing more.
    await throughChecks();
    await assert.rejects(s.remember(ID, 'still', nowTs(), Date.now()), ServiceUnavailable);
    assert.ok(!lines.some((l) => /usable again/.test(l.msg)), 'not usable again before it is');
    assert.equal(lines.filter((l) => l.level === 50 && /nonce store refused: its maxmemory-policy is allkeys-lru/.test(l.msg)).length, 1, 'logged once');
    await redis!.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    await eventually('served again', async () => (await outcome(s, `m${++n}`)) === 'new', { pollMs: 25 });
    assert.ok(lines.some((l) => /usable again/.test(l.msg)), 'the recovery is logged');
    assert.equal(await s.healthy(), true);
  });

  test('a Redis user limited by GATEWAY_ACL_RULES (the line docs/security.md gives) runs the whole store, and can flush, list or reconfigure nothing', async () => {
    const doc = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8');
    assert.ok(doc.includes(`ACL SETUSER node-gateway on >PASSWORD ${GATEWAY_ACL_RULES}`), 'docs/security.md gives the exact rules');
    await redis!.command('ACL', 'SETUSER', 'node-gateway', 'on', '>gw-password', ...GATEWAY_ACL_RULES.split(' '));
    const url = `redis://node-gateway:gw-password@127.0.0.1:${redis!.port}/0`;
    const s = await RedisNonceStore.open({ kind: 'redis', url, timeoutMs: 300 }, { perToken: 2, skewSeconds: SKEW, retryAfter: 3 }, logger('redis-nonces-test'));
    stores.push(s);
    const now = Date.now();
    const ts = String(Math.floor(now / 1000));
    assert.equal(await s.healthy(), true);
    assert.deepEqual(await s.remember(ID, 'a', ts, now), { outcome: 'new' });
    assert.deepEqual(await s.remember(ID, 'a', ts, now), { outcome: 'replayed' });
    assert.equal((await s.remember(ID, 'b', ts, now)).outcome, 'new');
    assert.equal((await s.remember(ID, 'c', ts, now)).outcome, 'token-full');
    // A flush (by another user) begins an epoch with the wait, and the quota's pruning runs too.
    await redis!.command('FLUSHALL');
    assert.equal((await s.remember(`${ID}-2`, 'd', ts, now)).outcome, 'unknown');
    const at = Math.ceil((await epoch()).floor / 1000);
    assert.equal((await s.remember(`${ID}-2`, 'e', String(at), at * 1000)).outcome, 'new');
    assert.equal((await s.remember(`${ID}-2`, 'f', String(at + 2 * SKEW + 100), (at + 2 * SKEW + 100) * 1000)).outcome, 'new');
    // What the user may not do.
    const { Redis } = await import('ioredis');
    const user = new Redis(url, { maxRetriesPerRequest: 0, lazyConnect: true });
    try {
      await user.connect();
      for (const cmd of [['FLUSHALL'], ['FLUSHDB'], ['KEYS', '*'], ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru'], ['SCRIPT', 'FLUSH'], ['ACL', 'LIST'], ['REPLICAOF', 'NO', 'ONE'], ['SET', 'other', '1'], ['GET', 'nonce-store:epoch'], ['SCAN', '0']]) {
        await assert.rejects(user.call(cmd[0], ...cmd.slice(1)), /NOPERM/, cmd.join(' '));
      }
      await assert.rejects(user.eval("return redis.call('SET', KEYS[1], '1')", 1, 'other'), /NOPERM|No permissions/, 'a script touches only the store keys');
    } finally {
      user.disconnect();
    }
  });

  // ---- found missing by mutation testing: the connection, the epoch's news ----

  test('opened: one line that it connected, under the URL without its password; a client named node-gateway; closed: gone, without a warning', async () => {
    await redis!.command('ACL', 'SETUSER', 'gw', 'on', '>r3dis-pass', '~*', '&*', '+@all');
    const { log, lines } = capturedLog();
    const url = `redis://gw:r3dis-pass@127.0.0.1:${redis!.port}`;
    const s = await open(log, url);
    assert.equal(s.kind, 'redis');
    assert.equal((await s.remember(ID, 'n1', nowTs(), Date.now())).outcome, 'new');
    assert.equal(await named(), 1);
    await throughChecks();
    assert.deepEqual(lines.map((l) => [l.level, l.msg]), [[30, 'nonce store connected']], 'nothing else: no epoch news, no eviction policy news');
    assert.equal(lines[0].nonceStore, `redis://gw:***@127.0.0.1:${redis!.port}`);
    assert.ok(!JSON.stringify(lines).includes('r3dis-pass'));
    await s.close();
    await eventually('the connection is gone', async () => (await named()) === 0, { pollMs: 25 });
    await throughChecks();
    assert.deepEqual(lines.map((l) => l.msg), ['nonce store connected'], 'a close asked for is no warning');
  });

  test('Redis stopped: 503 "not connected" with Retry-After, one warning, the reconnects at debug; back: served again after the wait a restart without its nonces needs', async () => {
    const { log, lines } = capturedLog();
    const s = await open(log);
    assert.equal((await s.remember(ID, 'before', nowTs(), Date.now())).outcome, 'new');
    await redis!.stop();
    let refused: unknown;
    // Until the client has seen the connection close, a call may fail on the closed socket instead
    // ("did not answer: Stream isn't writeable…"): a 503 with Retry-After all the same.
    await eventually(
      'refused as not connected',
      async () => {
        refused = await refusal(s, 'down');
        if (refused === undefined) return false;
        assert.ok(refused instanceof ServiceUnavailable && refused.headers['Retry-After'] === '3', String(refused));
        return /^the nonce store is not connected \(\w+\)$/.test(refused.message);
      },
      { pollMs: 25 },
    );
    assert.equal(await s.healthy(), false);
    // A request whose window is over needs no store: there is nothing to remember.
    assert.deepEqual(await s.remember(ID, 'stale', String(Math.floor(Date.now() / 1000) - 61), Date.now()), { outcome: 'new' });
    await eventually('a few reconnects tried', () => lines.filter((l) => l.msg === 'nonce store still unreachable').length >= 3, { timeoutMs: 5000, pollMs: 25 });
    // Closed by the server as it stops (or, if a check was unread at that moment, reset): one warning while it stays down.
    const warned = lines.filter((l) => l.level >= 40);
    assert.equal(warned.length, 1, JSON.stringify(warned));
    assert.match(warned[0].msg, /^nonce store (connection closed|unreachable): answering 503 until it is back$/);
    assert.ok(lines.filter((l) => l.msg === 'nonce store still unreachable').every((l) => l.level === 20 && /ECONNREFUSED/.test(l.reason)));
    await redis!.start();
    // A new server process without the nonces it had: what was signed before waits for the skew.
    let back: string | undefined;
    await eventually('answering again', async () => (back = await outcome(s, `after-${Date.now()}`)) !== undefined, { timeoutMs: 5000, pollMs: 25 });
    assert.equal(back, 'unknown');
    assert.equal(await s.healthy(), true);
    assert.equal(lines.filter((l) => l.msg === 'nonce store connected').length, 2);
    assert.equal(lines.filter((l) => /lost nonces/.test(l.msg)).length, 1);
  });

  test('the connection reset while up: one warning with the reason; later reconnect failures at debug', async () => {
    const { log, lines } = capturedLog();
    const s = await open(log);
    // A paused Redis that is then killed leaves unread commands behind: the kernel resets the connection.
    redis!.pause();
    assert.ok((await refusal(s, 'paused')) instanceof ServiceUnavailable);
    await redis!.kill();
    await eventually('a reconnect failed', () => lines.some((l) => l.msg === 'nonce store still unreachable'), { timeoutMs: 5000, pollMs: 25 });
    await eventually('another', () => lines.filter((l) => l.msg === 'nonce store still unreachable').length >= 2, { timeoutMs: 5000, pollMs: 25 });
    const warned = lines.filter((l) => l.level >= 40);
    assert.equal(warned.length, 1, JSON.stringify(warned));
    assert.equal(warned[0].msg, 'nonce store unreachable: answering 503 until it is back');
    assert.match(warned[0].reason, /ECONNRESET/);
  });

  test('Redis too slow: 503 "did not answer" within the timeout, unhealthy; a store opened meanwhile starts without waiting on it and serves once Redis answers', async () => {
    const { log, lines } = capturedLog();
    const s = await open(log);
    redis!.pause();
    try {
      const started = Date.now();
      const slow = await refusal(s, 'slow');
      const took = Date.now() - started;
      assert.ok(slow instanceof ServiceUnavailable && /^the nonce store did not answer: Command timed out/.test(slow.message) && slow.headers['Retry-After'] === '3', String(slow));
      assert.ok(took >= 250 && took < 1500, `${took} ms against a 300 ms timeout`);
      assert.equal(await s.healthy(), false);
      const opening = Date.now();
      const late = await open(log);
      const waited = Date.now() - opening;
      assert.ok(waited < 2500, `open waited ${waited} ms`);
      assert.ok(lines.some((l) => l.level === 40 && l.msg === 'nonce store not reachable yet: answering 503 until it is'));
      assert.ok((await refusal(late, 'late')) instanceof ServiceUnavailable);
      redis!.resume();
      await eventually('the late store serves', async () => (await outcome(late, `late-${Date.now()}`)) === 'new', { timeoutMs: 5000, pollMs: 25 });
      assert.equal(await late.healthy(), true);
      assert.equal(await s.healthy(), true);
    } finally {
      redis!.resume();
    }
  });

  test('an epoch another gateway began after the one this store knew, its wait long over: taken up, logged as news without a warning, nothing refused', async () => {
    const run = await runId();
    const old = Date.now() - 10 * 60_000;
    // A store opened on it first is told nothing: the epoch it meets is no news.
    await redis!.command('HSET', EPOCH_KEY, 'run', run, 'since', String(old), 'floor', '0');
    const { log, lines } = capturedLog();
    const s = await open(log);
    const now = Date.now();
    assert.equal((await s.remember(ID, 'n1', String(Math.floor(now / 1000)), now)).outcome, 'new');
    assert.deepEqual(await epoch(), { run, since: old, floor: 0 });
    // Another gateway, knowing none, began one nine minutes ago: this store raises its floor to since + skew, now past.
    const later = old + 60_000;
    await redis!.command('HSET', EPOCH_KEY, 'since', String(later));
    await eventually('the store takes it up', () => lines.some((l) => /began a new epoch/.test(l.msg)), { pollMs: 25 });
    const news = lines.filter((l) => /epoch|lost nonces/.test(l.msg));
    assert.equal(news.length, 1, JSON.stringify(news));
    assert.equal(news[0].level, 30);
    assert.equal(news[0].epochSince, new Date(later).toISOString());
    assert.deepEqual(await epoch(), { run, since: later, floor: later + SKEW * 1000 });
    const now2 = Date.now();
    assert.equal((await s.remember(ID, 'n2', String(Math.floor(now2 / 1000)), now2)).outcome, 'new');
  });
});

// ---- found missing by mutation testing: whole replies and fields, what the 503s say, the reconnect delays ----

/** A reply longer than a log line quotes. */
const LONG_REPLY = ['x'.repeat(300)];

test('verdictOf and epochOf: a reply with an element too many is the store misbehaving; the 503 quotes the reply, at most 100 characters of it', () => {
  const call = { nowMs: T0 * 1000, slice: 15, ts: T0 };
  const since = T0 * 1000 - 30_000;
  for (const odd of [undefined, [1, since, 0, 1], [2, since, 0, 5, 1], [3, since, 0, 1]]) {
    assert.throws(() => verdictOf(odd, call), (e: unknown) => e instanceof ServiceUnavailable && e.message === `the nonce store answered ${JSON.stringify(odd)}`, JSON.stringify(odd));
  }
  assert.throws(() => epochOf(undefined), (e: unknown) => e instanceof ServiceUnavailable && e.message === 'the nonce store answered undefined');
  assert.throws(() => epochOf([5, 0, 1]), (e: unknown) => e instanceof ServiceUnavailable && e.message === 'the nonce store answered [5,0,1]');
  const quoted = `the nonce store answered ${JSON.stringify(LONG_REPLY).slice(0, 100)}`;
  assert.throws(() => verdictOf(LONG_REPLY, call), (e: unknown) => e instanceof Error && e.message === quoted);
  assert.throws(() => epochOf(LONG_REPLY), (e: unknown) => e instanceof Error && e.message === quoted);
});

test('serverOf and evictionProblem: only a whole field counts, its lines ended by \\r\\n or \\n alone', () => {
  const run = '0123456789abcdef0123456789abcdef01234567';
  assert.equal(serverOf(`redis_version:7.0.15\nrun_id:${run}\nmaxmemory_policy:noeviction\n`).runId, run);
  for (const info of [`master_run_id:${run}\r\n`, `run_id:${run}zz\r\n`, 'run_id:\r\n']) {
    assert.throws(() => serverOf(info), (e: unknown) => e instanceof ServiceUnavailable && e.message === 'the nonce store did not say its run_id (INFO server)', JSON.stringify(info));
  }
  assert.equal(evictionProblem('not_maxmemory_policy:allkeys-lru\r\nmaxmemory_policy:noeviction\r\n'), undefined);
});

test('verdictOfError: the 503 says why the store did not answer', () => {
  assert.throws(() => verdictOfError(new Error('Command timed out'), 7), (e: unknown) => e instanceof ServiceUnavailable && e.message === 'the nonce store did not answer: Command timed out');
  assert.throws(() => verdictOfError('weird', 7), (e: unknown) => e instanceof ServiceUnavailable && e.message === 'the nonce store did not answer: weird');
});

test('reconnectDelayMs: 100 ms, doubling, at most a second, never giving up', () => {
  assert.deepEqual([1, 2, 3, 4, 5, 6, 10, 11, 1000].map(reconnectDelayMs), [100, 200, 400, 800, 1000, 1000, 1000, 1000, 1000]);
});
