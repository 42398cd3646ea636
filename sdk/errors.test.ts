import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  InvalidClientStateError,
  InvalidCredentialsError,
  InvalidGenerationError,
  InvalidTimestampError,
  LoginError,
  loginErrorFrom,
  NewUsersDisabledError,
  UserNotAllowedError,
  ServiceUnavailableError,
  statusStringOf,
  TooManyRequestsError,
} from './errors.js';

const body = (status: string, description = 'why') => ({ status, errors: [{ location: 'header', name: 'Authorization', description }] });

test('each DESIGN status string maps to its own error class', () => {
  const cases = [
    [401, 'invalid-credentials', InvalidCredentialsError],
    [401, 'invalid-timestamp', InvalidTimestampError],
    [401, 'invalid-generation', InvalidGenerationError],
    [401, 'invalid-client-state', InvalidClientStateError],
    [403, 'new-users-disabled', NewUsersDisabledError],
    [403, 'user-not-allowed', UserNotAllowedError],
  ] as const;
  for (const [status, statusString, Class] of cases) {
    const err = loginErrorFrom(status, body(statusString), 10);
    assert.equal(err.constructor, Class, statusString);
    assert.ok(err instanceof LoginError);
    assert.equal(err.status, status);
    assert.equal(err.statusString, statusString);
    assert.deepEqual(err.body, body(statusString));
    assert.equal(err.name, Class.name);
    assert.equal(err.message, `login failed: ${status} ${statusString}: why`);
  }
});

test('any other answer is a plain LoginError with what the server said', () => {
  const err = loginErrorFrom(401, body('error', 'missing Authorization header'), 10);
  assert.equal(err.constructor, LoginError);
  assert.equal(err.statusString, 'error');
  assert.equal(err.message, 'login failed: 401 error: missing Authorization header');

  const notJson = loginErrorFrom(502, '<html>bad gateway</html>', 10);
  assert.equal(notJson.constructor, LoginError);
  assert.equal(notJson.status, 502);
  assert.equal(notJson.statusString, 'error');
  assert.equal(notJson.body, '<html>bad gateway</html>');
  assert.equal(notJson.message, 'login failed: 502 error');
});

test('a 503 is ServiceUnavailableError with retryAfter', () => {
  const err = loginErrorFrom(503, body('error', 'the service is unavailable, try again later'), 42);
  assert.ok(err instanceof ServiceUnavailableError);
  assert.equal(err.retryAfter, 42);
  assert.equal(err.status, 503);
  assert.equal(err.statusString, 'error');
});

test('a 429 is TooManyRequestsError with retryAfter', () => {
  const err = loginErrorFrom(429, body('error', 'too many client-state changes'), 3600);
  assert.ok(err instanceof TooManyRequestsError);
  assert.equal(err.retryAfter, 3600);
  assert.equal(err.status, 429);
  assert.equal(err.statusString, 'error');
  assert.equal(err.message, 'login failed: 429 error: too many client-state changes');
});

test('statusStringOf reads only a string status', () => {
  assert.equal(statusStringOf({ status: 'invalid-credentials' }), 'invalid-credentials');
  for (const b of [null, undefined, 'text', 5, {}, { status: 401 }]) assert.equal(statusStringOf(b), undefined, String(b));
});
