// The shared nonce store: its pure parts (keys, expiry, the script's arguments
// and replies), then the store itself against a real redis-server.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { ServiceUnavailable } from '../../lib/errors.js';
import { logger } from '../../lib/log.js';
import { redisSkipReason, startRedis, type TestRedis } from '../../tests/support/redis.js';
import {
  evictionProblem,
  nonceKey,
  nonceTtlMs,
  QUOTA_SLICES,
  quotaKey,
  redactedUrl,
  RedisNonceStore,
  rememberCall,
  SINCE_KEY,
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

test('rememberCall: the script\'s arguments, or nothing once the window is over', () => {
  const limits = { perToken: 100, skewSeconds: 60 };
  const now = T0 * 1000 + 500;
  const call = rememberCall(ID, 'n1', String(T0 + 10), now, limits)!;
  assert.deepEqual(call.keys, [nonceKey(ID, String(T0 + 10), 'n1'), quotaKey(ID), SINCE_KEY]);
  const slice = Math.floor((T0 + 70) / 15);
  assert.deepEqual(call.args, [70_000 - 500 + 1, slice, Math.floor(T0 / 15), 100, (slice + 1) * 15_000 - now, now, T0 + 10]);
  assert.ok(call.args[4] >= call.args[0] - 1, 'the count outlives every nonce it counts');
  assert.deepEqual([call.slice, call.ts, call.nowMs], [15, T0 + 10, now]);
  assert.equal(rememberCall(ID, 'n1', String(T0 - 61), T0 * 1000, limits), undefined);
});

test('verdictOf: new, replayed, over the quota or signed before the store began, with a Retry-After; anything else 503', () => {
  const call = { nowMs: T0 * 1000 + 999, slice: 15, ts: T0 };
  assert.deepEqual(verdictOf([0], call), { outcome: 'new' });
  assert.deepEqual(verdictOf([1], call), { outcome: 'replayed' });
  const oldest = Math.floor(T0 / 15);
  assert.deepEqual(verdictOf([2, oldest], call), { outcome: 'token-full', retryAfter: (oldest + 1) * 15 - T0 });
  assert.deepEqual(verdictOf([2, oldest - 5], call), { outcome: 'token-full', retryAfter: 1 }, 'at least a second');
  // The store began at T0 + 2.5 s: the client waits until its clock reaches that second.
  assert.deepEqual(verdictOf([3, T0 * 1000 + 2500], call), { outcome: 'unknown', retryAfter: 2 });
  assert.deepEqual(verdictOf([3, T0 * 1000 + 999], call), { outcome: 'unknown', retryAfter: 1 });
  for (const odd of [null, 'OK', [], [3], [4], [0, 1], [2], [2, 'x'], [2, 1.5], [3, 'x'], { 0: 0 }]) {
    assert.throws(() => verdictOf(odd, call), ServiceUnavailable, JSON.stringify(odd));
  }
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

  test('a Redis that lost its data: a request signed before it is refused (503), not taken as new', async () => {
    const s = await open();
    const now = Date.now();
    const ts = Math.floor(now / 1000);
    assert.equal((await s.remember(`${ID}-lost`, 'captured', String(ts), now)).outcome, 'new');
    await redis.command('FLUSHALL');
    // Five seconds on, the captured request comes back: its nonce is gone, so is the record of the store's start.
    const later = now + 5000;
    const replay = await s.remember(`${ID}-lost`, 'captured', String(ts), later);
    assert.deepEqual(replay, { outcome: 'unknown', retryAfter: Math.floor(later / 1000) - ts });
    assert.equal((await s.remember(`${ID}-lost`, 'fresh', String(Math.floor(later / 1000)), later)).outcome, 'new', 'signed now: served');
    assert.equal(Number(await redis.command('GET', SINCE_KEY)), later);
    // The clock of this test ran ahead: the tests after it start from an older record.
    await redis.command('SET', SINCE_KEY, String(now));
  });

  test('a Redis that may evict is refused (503) until set to noeviction', async () => {
    const s = await open();
    const now = Date.now();
    const ts = String(Math.floor(now / 1000));
    await redis.command('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      assert.equal(await s.healthy(), false);
      await assert.rejects(s.remember(ID, 'evictable', ts, now), (e: unknown) => e instanceof ServiceUnavailable && /noeviction/.test(e.message));
    } finally {
      await redis.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    }
    assert.equal(await s.healthy(), true);
    assert.equal((await s.remember(ID, 'evictable', ts, now)).outcome, 'new');
  });

  test('no Redis at the URL: start goes on, every check is 503, the heartbeat says so', async () => {
    const started = Date.now();
    const s = await open(5, 'redis://127.0.0.1:1');
    assert.ok(Date.now() - started < 3000, 'start does not hang');
    assert.equal(await s.healthy(), false);
    await assert.rejects(s.remember(ID, 'n', String(Math.floor(Date.now() / 1000)), Date.now()), (e: unknown) => e instanceof ServiceUnavailable && e.headers['Retry-After'] === '3');
  });
});
