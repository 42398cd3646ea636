import { test } from 'node:test';
import assert from 'node:assert/strict';
import { overloadConfig } from './config.js';
import { ConfigError } from './errors.js';
import { decideLoad, watchLoopDelay, windowDelayMs, type OverloadPolicy } from './load.js';
import { eventually } from '../tests/support/services.js';

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

test('windowDelayMs: the mean in ms less the 20 ms timer resolution, never below 0; 0 without samples', () => {
  assert.equal(windowDelayMs(0, Number.NaN), 0, "a window without samples (the histogram's mean is NaN then)");
  assert.equal(windowDelayMs(10, 25e6), 5);
  assert.equal(windowDelayMs(10, 20e6), 0);
  assert.equal(windowDelayMs(10, 12e6), 0, 'a mean below the resolution reads 0, not a negative delay');
  assert.equal(windowDelayMs(1, 1_020e6), 1000);
});

/** Holds the event loop for `ms`. */
function block(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

test('watchLoopDelay: one monitor per process, read by every user; it stops with its last user, and stop is idempotent', async () => {
  const a = watchLoopDelay();
  const b = watchLoopDelay();
  assert.equal(a.ms(), 0, 'nothing is read before the first window ends');
  a.stop();
  a.stop();
  // b still holds the monitor, so its 1 s windows go on being read: a loop held 150 ms in every 200 ms reads above 0.
  const readsDelay = () => {
    if (b.ms() > 0) return true;
    block(150);
    return false;
  };
  await eventually('the monitor reads a delay', readsDelay, { timeoutMs: 5_000, pollMs: 50 });
  const busy = b.ms();
  assert.ok(busy > 0 && busy < 1_000, `a busy loop reads a delay (${busy} ms)`);
  const c = watchLoopDelay();
  assert.equal(c.ms(), busy, 'a new user reads the same monitor, not a new one');
  b.stop();
  c.stop();
  const d = watchLoopDelay();
  assert.equal(d.ms(), 0, 'once its last user stopped, the next user starts a new monitor');
  d.stop();
});
