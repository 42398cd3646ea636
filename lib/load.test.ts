import { test } from 'node:test';
import assert from 'node:assert/strict';
import { overloadConfig } from './config.js';
import { ConfigError } from './errors.js';
import { decideLoad, watchLoopDelay, type OverloadPolicy } from './load.js';

const policy: OverloadPolicy = { backoffSeconds: 30, backoffInFlight: 10, maxInFlight: 20, backoffLoopDelayMs: 200, retryAfter: 7 };

test('decideLoad: at or below both thresholds → serve', () => {
  assert.deepEqual(decideLoad({ inFlight: 1, loopDelayMs: 0 }, policy), { action: 'serve' });
  assert.deepEqual(decideLoad({ inFlight: 10, loopDelayMs: 200 }, policy), { action: 'serve' });
});

test('decideLoad: more in flight than the backoff threshold → serve with X-Backoff', () => {
  assert.deepEqual(decideLoad({ inFlight: 11, loopDelayMs: 0 }, policy), { action: 'backoff', backoffSeconds: 30 });
  assert.deepEqual(decideLoad({ inFlight: 20, loopDelayMs: 0 }, policy), { action: 'backoff', backoffSeconds: 30 }, 'the cap itself is still served');
});

test('decideLoad: a lagging event loop → serve with X-Backoff, unless that check is off (0)', () => {
  assert.deepEqual(decideLoad({ inFlight: 1, loopDelayMs: 201 }, policy), { action: 'backoff', backoffSeconds: 30 });
  assert.deepEqual(decideLoad({ inFlight: 1, loopDelayMs: 10_000 }, { ...policy, backoffLoopDelayMs: 0 }), { action: 'serve' });
});

test('decideLoad: beyond the hard cap → reject with Retry-After and X-Backoff, whatever the loop delay', () => {
  assert.deepEqual(decideLoad({ inFlight: 21, loopDelayMs: 0 }, policy), { action: 'reject', backoffSeconds: 30, retryAfter: 7 });
  assert.deepEqual(decideLoad({ inFlight: 21, loopDelayMs: 999 }, policy), { action: 'reject', backoffSeconds: 30, retryAfter: 7 });
});

test('overloadConfig: defaults, overrides, and errors that name the variable', () => {
  assert.deepEqual(overloadConfig({}), { backoffSeconds: 30, backoffInFlight: 100, maxInFlight: 400, backoffLoopDelayMs: 500, retryAfter: 10 });
  assert.deepEqual(overloadConfig({ BACKOFF_SECONDS: '5', BACKOFF_INFLIGHT: '2', MAX_INFLIGHT: '3', BACKOFF_LOOP_DELAY_MS: '0', RETRY_AFTER: '4' }), {
    backoffSeconds: 5,
    backoffInFlight: 2,
    maxInFlight: 3,
    backoffLoopDelayMs: 0,
    retryAfter: 4,
  });
  // A backoff threshold above the default cap raises the default cap with it.
  assert.equal(overloadConfig({ BACKOFF_INFLIGHT: '1000' }).maxInFlight, 1000);
  const cases: Array<[Record<string, string>, string]> = [
    [{ BACKOFF_SECONDS: '0' }, 'BACKOFF_SECONDS'],
    [{ BACKOFF_SECONDS: 'soon' }, 'BACKOFF_SECONDS'],
    [{ BACKOFF_INFLIGHT: '0' }, 'BACKOFF_INFLIGHT'],
    [{ MAX_INFLIGHT: '-1' }, 'MAX_INFLIGHT'],
    [{ BACKOFF_INFLIGHT: '50', MAX_INFLIGHT: '49' }, 'MAX_INFLIGHT'],
    [{ BACKOFF_LOOP_DELAY_MS: '1.5' }, 'BACKOFF_LOOP_DELAY_MS'],
  ];
  for (const [env, variable] of cases) {
    assert.throws(() => overloadConfig(env), (e: unknown) => e instanceof ConfigError && e.variable === variable, JSON.stringify(env));
  }
});

test('watchLoopDelay: one shared monitor, a non-negative reading, stop is idempotent', () => {
  const a = watchLoopDelay();
  const b = watchLoopDelay();
  assert.ok(a.ms() >= 0);
  assert.equal(a.ms(), b.ms(), 'both read the same process-wide window');
  a.stop();
  a.stop();
  assert.ok(b.ms() >= 0, 'still readable while another user holds it');
  b.stop();
});
