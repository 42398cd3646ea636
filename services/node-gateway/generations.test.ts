import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GenerationalMap } from './generations.js';

test('entries survive one rotation, not two', () => {
  const m = new GenerationalMap<number>(4, Infinity, 0);
  m.set('a', 1);
  m.set('b', 2);
  assert.equal(m.get('a'), 1);
  m.set('c', 3); // generation full (2): rotates, a and b now older
  assert.deepEqual([m.get('a'), m.get('b'), m.get('c')], [1, 2, 3]);
  m.set('d', 4);
  m.set('e', 5); // rotates again: a and b are gone
  assert.deepEqual([m.get('a'), m.get('b'), m.get('c'), m.get('e')], [undefined, undefined, 3, 5]);
  assert.ok(m.size <= 4);
  assert.equal(m.earlyRotations, 2);
});

test('generations also retire by age', () => {
  const m = new GenerationalMap<string>(100, 1000, 0);
  m.set('a', 'x', 0);
  m.set('b', 'y', 1000);
  assert.equal(m.get('a'), 'x');
  m.set('c', 'z', 2000);
  assert.equal(m.get('a'), undefined);
  assert.equal(m.get('b'), 'y');
  assert.equal(m.earlyRotations, 0);
});

// Found missing by mutation testing (npm run mutation -- services/node-gateway/generations.ts).

test('age counts from when the generation started, on a clock far from 0', () => {
  const start = 1_700_000_000_000;
  const m = new GenerationalMap<string>(100, 1000, start);
  m.set('a', 'x', start + 100);
  m.set('b', 'y', start + 500);
  m.set('c', 'z', start + 999);
  // No rotation before maxAgeMs: all three are in one generation (two rotations would have dropped a).
  assert.deepEqual([m.get('a'), m.get('b'), m.get('c')], ['x', 'y', 'z']);
  m.set('d', 'w', start + 1000);
  m.set('e', 'v', start + 2000);
  assert.deepEqual([m.get('a'), m.get('d'), m.get('e')], [undefined, 'w', 'v']);
  assert.equal(m.earlyRotations, 0);
});

test('size counts both generations', () => {
  const m = new GenerationalMap<number>(6, Infinity, 0);
  for (const [i, k] of ['a', 'b', 'c', 'd'].entries()) m.set(k, i);
  // a, b, c filled the first generation (3); d started the second.
  assert.equal(m.size, 4);
});
