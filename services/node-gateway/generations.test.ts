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
