import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequest, InvalidCredentials, MethodNotAllowed, NoNodeAvailable, ServiceUnavailable } from './errors.js';

test('class defaults for location and field, overridable per instance', () => {
  const d = new InvalidCredentials('bad');
  assert.equal(d.location, 'header');
  assert.equal(d.field, 'Authorization');
  const o = new InvalidCredentials('bad', { location: 'body', field: 'token' });
  assert.equal(o.location, 'body');
  assert.equal(o.field, 'token');
  assert.equal(new BadRequest('x').location, 'internal');
});

test('status, status string, headers and exposure', () => {
  const e = new InvalidCredentials('bad');
  assert.deepEqual([e.status, e.statusString, e.expose, e.name], [401, 'invalid-credentials', true, 'InvalidCredentials']);
  const u = new NoNodeAvailable('no room', 7);
  assert.ok(u instanceof ServiceUnavailable);
  assert.equal(u.headers['Retry-After'], '7');
  assert.equal(u.expose, false);
  assert.equal(u.detail().description.includes('no room'), false);
  assert.equal(new MethodNotAllowed(['GET', 'HEAD']).headers.Allow, 'GET, HEAD');
});
