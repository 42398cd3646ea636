import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NonceCache } from './nonces.js';

test('a nonce is accepted once per (id, ts)', () => {
  const cache = new NonceCache(100, 1000, 0);
  assert.equal(cache.add('id', 'n1', '10', 0), true);
  assert.equal(cache.add('id', 'n1', '10', 1), false);
  assert.equal(cache.add('id', 'n1', '11', 1), true, 'another ts');
  assert.equal(cache.add('other', 'n1', '10', 1), true, 'another id');
  assert.equal(cache.add('id', 'n2', '10', 1), true, 'another nonce');
  // The parts are delimited, so shifting characters between them is another key.
  assert.equal(cache.add('i', 'd\nn1', '10', 1), true);
  assert.equal(cache.size, 5);
});

test('a nonce is remembered for at least the window, then forgotten', () => {
  const cache = new NonceCache(100, 1000, 0);
  cache.add('id', 'early', '1', 0);
  cache.add('id', 'late', '1', 999);
  assert.equal(cache.add('id', 'early', '1', 1000), false, 'rotated into the older generation, still known');
  assert.equal(cache.add('id', 'late', '1', 1998), false, 'late entry kept a full window');
  assert.equal(cache.add('id', 'late', '1', 2000), true, 'two rotations later it is gone');
  assert.equal(cache.earlyRotations, 0);
});

test('memory stays flat under a flood of unique nonces', () => {
  const cache = new NonceCache(1000, 60_000, 0);
  for (let i = 0; i < 10_000; i++) assert.equal(cache.add('id', `n${i}`, '1', 1), true);
  assert.ok(cache.size <= 1000, `size ${cache.size}`);
  assert.ok(cache.earlyRotations >= 18);
  // The most recent nonces are still refused.
  assert.equal(cache.add('id', 'n9999', '1', 2), false);
});
