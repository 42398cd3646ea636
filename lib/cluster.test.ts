import { test } from 'node:test';
import assert from 'node:assert/strict';
import { restartDelay, RESTART_POLICY, type RestartPolicy } from './cluster.js';

const policy: RestartPolicy = { firstDelayMs: 100, maxDelayMs: 1000, healthyAfterMs: 5000 };

test('restartDelay: soon for a worker of the first set or one that lived long; doubling while they die young, up to the cap', () => {
  assert.equal(restartDelay(undefined, 10, policy), 100, 'the first restart of a slot');
  assert.equal(restartDelay(800, 5000, policy), 100, 'lived long enough: no crash loop');
  assert.equal(restartDelay(100, 4999, policy), 200);
  assert.equal(restartDelay(400, 50, policy), 800);
  assert.equal(restartDelay(800, 50, policy), 1000, 'capped');
  assert.equal(restartDelay(1000, 50, policy), 1000);
  assert.equal(restartDelay(0, 50, policy), 200, 'never below the first delay doubled');
});

test('restartDelay: a crash loop settles at the cap within a few restarts', () => {
  let delay: number | undefined;
  const delays: number[] = [];
  for (let i = 0; i < 10; i++) delays.push((delay = restartDelay(delay, 10)));
  assert.deepEqual(delays.slice(0, 3), [RESTART_POLICY.firstDelayMs, RESTART_POLICY.firstDelayMs * 2, RESTART_POLICY.firstDelayMs * 4]);
  assert.equal(delays.at(-1), RESTART_POLICY.maxDelayMs);
});
