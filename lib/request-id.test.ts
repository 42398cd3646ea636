import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isSaneRequestId, requestIdFrom } from './request-id.js';

test('a sane id is short and log-safe: letters, digits, dot, underscore, dash', () => {
  for (const ok of ['a', 'req-42', 'A.b_c-D', '0'.repeat(64), '6f1c1f0e-3a3b-4c3e-9d1e-2f3a4b5c6d7e']) assert.ok(isSaneRequestId(ok), ok);
  for (const bad of [undefined, null, 42, '', ' ', 'a b', 'a\nb', 'a"b', '0'.repeat(65), 'ünï', 'x;y', ['a']]) {
    assert.equal(isSaneRequestId(bad), false, JSON.stringify(bad));
  }
});

test('requestIdFrom keeps a sane id and replaces anything else with a fresh UUID', () => {
  assert.equal(requestIdFrom('client-id-1'), 'client-id-1');
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  for (const bad of [undefined, '', 'has space', 'x'.repeat(65), 'line\nbreak']) assert.match(requestIdFrom(bad), uuid, String(bad));
  assert.notEqual(requestIdFrom(undefined), requestIdFrom(undefined));
});
