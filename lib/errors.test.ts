import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BadRequest,
  InvalidClientState,
  InvalidCredentials,
  loginAnswer,
  MethodNotAllowed,
  MOZILLA_ERRORS,
  NoNodeAvailable,
  NotAcceptable,
  ProtocolError,
  ServiceUnavailable,
  Unauthorized,
  unsupportedVersion,
} from './errors.js';

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

test("loginAnswer: the error's own answer, else its class's Mozilla entry, else its detail()", () => {
  const answered = new Unauthorized('unsupported scheme', { answer: MOZILLA_ERRORS.unsupportedScheme.entry });
  assert.deepEqual(loginAnswer(answered), { location: 'body', name: '', description: 'Unsupported' });
  assert.deepEqual(loginAnswer(new InvalidCredentials('bad signature')), { location: 'body', name: '', description: 'Unauthorized' });
  assert.deepEqual(loginAnswer(new NoNodeAvailable('no room')), MOZILLA_ERRORS.noNode.entry, 'the subclass, not ServiceUnavailable');
  assert.deepEqual(loginAnswer(new ServiceUnavailable('directory down')), MOZILLA_ERRORS.resourceUnavailable.entry);
  const stale = new InvalidClientState(MOZILLA_ERRORS.staleClientState.entry.description);
  assert.deepEqual(loginAnswer(stale), MOZILLA_ERRORS.staleClientState.entry, 'the message is the description, as it crossed gRPC');
  assert.deepEqual(loginAnswer(new NotAcceptable('JSON only')), { location: 'header', name: 'Accept', description: 'JSON only' });
});

test('unsupportedVersion names the version asked for; every row is a ProtocolError class with an entry', () => {
  assert.deepEqual(unsupportedVersion('1.2'), { location: 'url', name: '1.2', description: 'Unsupported application version' });
  for (const [key, row] of Object.entries(MOZILLA_ERRORS)) {
    assert.ok(new row.error('x') instanceof ProtocolError, key);
    assert.deepEqual(Object.keys(row.entry), ['location', 'name', 'description'], key);
  }
});
