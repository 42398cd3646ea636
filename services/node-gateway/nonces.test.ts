import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NonceCache, nonceKey } from './nonces.js';

test('a nonce is accepted once per (id, ts)', () => {
  const cache = new NonceCache(100, 1000, 0);
  assert.equal(cache.add('id', 'n1', '10', 0), true);
  assert.equal(cache.add('id', 'n1', '10', 1), false);
  assert.equal(cache.add('id', 'n1', '11', 1), true, 'another ts');
  assert.equal(cache.add('other', 'n1', '10', 1), true, 'another id');
  assert.equal(cache.add('id', 'n2', '10', 1), true, 'another nonce');
  assert.equal(cache.size, 4);
});

test('nonce keys: short, distinct per token tail, nonce and ts; long nonces hashed', () => {
  const id = 'x'.repeat(300) + 'SIGNATURE-tail-of-the-token-id-0==';
  assert.equal(nonceKey(id, 'abc', '17'), `17\nabc\n${id.slice(-32)}`);
  assert.notEqual(nonceKey(id, 'abc', '17'), nonceKey(id.replace('tail', 'tall'), 'abc', '17'));
  assert.notEqual(nonceKey(id, 'abc', '17'), nonceKey(id, 'abd', '17'));
  assert.notEqual(nonceKey(id, 'abc', '17'), nonceKey(id, 'abc', '18'));
  const long = 'n'.repeat(4000);
  assert.ok(nonceKey(id, long, '17').length < 100);
  assert.notEqual(nonceKey(id, long, '17'), nonceKey(id, long + 'm', '17'));
  // A hashed long nonce cannot collide with a plain short one (which holds no newline).
  assert.equal(nonceKey(id, long, '17').split('\n').length, 4);
  assert.equal(nonceKey(id, 'n'.repeat(64), '17').split('\n').length, 3);
});

test('a nonce is remembered for at least the window, then forgotten', () => {
  const cache = new NonceCache(100, 1000, 0);
  cache.add('id', 'early', '1', 0);
  cache.add('id', 'late', '1', 999);
  assert.equal(cache.add('id', 'other', '1', 1000), true, 'a new generation starts');
  assert.equal(cache.add('id', 'early', '1', 1500), false, 'in the older generation, still known');
  assert.equal(cache.add('id', 'late', '1', 1999), false, 'late entry kept a full window');
  assert.equal(cache.add('id', 'another', '1', 2000), true, 'the next generation starts');
  assert.equal(cache.add('id', 'late', '1', 2001), true, 'two generations later it is gone');
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
