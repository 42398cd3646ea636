import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BadRequest,
  ConfigError,
  errorClasses,
  InternalError,
  InvalidClientState,
  InvalidCredentials,
  InvalidGeneration,
  InvalidKeysChangedAt,
  InvalidTimestamp,
  KeysUnavailable,
  loginAnswer,
  MethodNotAllowed,
  MOZILLA_ERRORS,
  NoNodeAvailable,
  NotAcceptable,
  ProtocolError,
  ServiceUnavailable,
  TooManyRequests,
  Unauthorized,
  unsupportedVersion,
  type MozillaErrorKey,
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

// Found missing by mutation testing: the wire names themselves. The tables below are written out from
// DESIGN §3 and docs/compatibility.md ("Error answers"), not read from lib/errors.ts, so an edit of a
// status, status string or Mozilla entry fails here, as it would fail a client.

test('every class: its HTTP status and status string (DESIGN §3), where its entry points by default; a 5xx description never reaches the caller', () => {
  // [status, status string, default location, default field]
  const wire: Record<string, [number, string, string, string]> = {
    BadRequest: [400, 'error', 'internal', ''],
    Unauthorized: [401, 'error', 'header', 'Authorization'],
    InvalidCredentials: [401, 'invalid-credentials', 'header', 'Authorization'],
    InvalidTimestamp: [401, 'invalid-timestamp', 'header', 'Authorization'],
    InvalidGeneration: [401, 'invalid-generation', 'body', 'generation'],
    InvalidClientState: [401, 'invalid-client-state', 'header', 'X-Client-State'],
    InvalidKeysChangedAt: [401, 'invalid-keysChangedAt', 'header', 'X-KeyID'],
    InvalidKeyId: [401, 'invalid-key-id', 'header', 'X-KeyID'],
    NewUsersDisabled: [403, 'new-users-disabled', 'body', 'email'],
    UserNotAllowed: [403, 'user-not-allowed', 'body', 'email'],
    NotFound: [404, 'error', 'url', ''],
    NotAcceptable: [406, 'error', 'header', 'Accept'],
    PayloadTooLarge: [413, 'error', 'body', ''],
    TooManyRequests: [429, 'error', 'internal', ''],
    InternalError: [500, 'error', 'internal', ''],
    BadGateway: [502, 'error', 'internal', ''],
    ServiceUnavailable: [503, 'error', 'internal', ''],
    NoNodeAvailable: [503, 'error', 'internal', ''],
    KeysUnavailable: [503, 'error', 'internal', ''],
    GatewayTimeout: [504, 'error', 'internal', ''],
    RecordNotFound: [404, 'error', 'internal', ''],
    Conflict: [409, 'error', 'internal', ''],
  };
  assert.deepEqual(Object.keys(errorClasses).sort(), Object.keys(wire).sort(), 'every class can be rebuilt by name after crossing gRPC');
  for (const [name, cls] of Object.entries(errorClasses)) {
    const e = new cls('the reason');
    assert.equal(e.name, name);
    assert.deepEqual([e.status, e.statusString, e.location, e.field], wire[name], name);
    assert.equal(e.expose, e.status < 500, name);
    assert.equal(e.detail().description, e.status < 500 ? 'the reason' : 'the service is unavailable, try again later', name);
  }
  assert.equal(new ProtocolError('x').statusString, 'error');
  assert.deepEqual([new ProtocolError('x').location, new ProtocolError('x').field], ['internal', '']);
  const limited = new TooManyRequests('too many changes today', 3600);
  assert.deepEqual([limited.headers, limited.retryAfter], [{ 'Retry-After': '3600' }, 3600]);
  assert.equal(new TooManyRequests('x').headers['Retry-After'], '1');
  assert.equal(new ServiceUnavailable('x').headers['Retry-After'], '10');
  const notAllowed = new MethodNotAllowed(['GET', 'HEAD']);
  assert.deepEqual([notAllowed.status, notAllowed.message, notAllowed.location], [405, 'method not allowed; allowed: GET, HEAD', 'url']);
});

test("MOZILLA_ERRORS: each entry byte for byte as docs/compatibility.md gives Mozilla's", () => {
  const refused = 'Unacceptable client-state value';
  const entries: Record<MozillaErrorKey, [string, string, string]> = {
    missingAuthorization: ['body', '', 'Unauthorized'],
    malformedAuthorization: ['body', '', 'Unauthorized'],
    unsupportedScheme: ['body', '', 'Unsupported'],
    webhookUnsupportedScheme: ['body', '', 'Unsupported'],
    invalidCredentials: ['body', '', 'Unauthorized'],
    expired: ['body', '', 'Unauthorized'],
    malformedGeneration: ['body', '', 'Unauthorized'],
    missingKeyId: ['header', '', 'Missing X-KeyID header'],
    invalidKeyId: ['header', '', 'Invalid X-KeyID header'],
    invalidClientStateHeader: ['header', 'X-Client-State', 'Invalid client state value'],
    clientStateMismatch: ['body', '', 'Unauthorized'],
    keysChangedAtAboveGeneration: ['body', '', 'Unauthorized'],
    emptyClientState: ['header', 'X-Client-State', `${refused} empty string`],
    staleClientState: ['header', 'X-Client-State', `${refused} stale value`],
    clientStateWithoutGeneration: ['header', 'X-Client-State', `${refused} new value with no generation change`],
    clientStateWithoutKeysChangedAt: ['header', 'X-Client-State', `${refused} new value with no keys_changed_at change`],
    oldGeneration: ['body', '', 'Unauthorized'],
    oldKeysChangedAt: ['body', '', 'Unauthorized'],
    missingKeysChangedAt: ['body', '', 'Unauthorized'],
    unsupportedApplication: ['url', 'application', 'Unsupported application'],
    unsupportedVersion: ['url', '', 'Unsupported application version'],
    noNode: ['internal', '', 'Unexpected error: unable to get a node'],
    resourceUnavailable: ['body', '', 'Resource is not available'],
    serverError: ['internal', '', 'Server error'],
  };
  assert.deepEqual(Object.keys(MOZILLA_ERRORS).sort(), Object.keys(entries).sort());
  for (const [key, [location, name, description]] of Object.entries(entries)) {
    assert.deepEqual(MOZILLA_ERRORS[key as MozillaErrorKey].entry, { location, name, description }, key);
  }
});

test("loginAnswer: each class that has one Mozilla entry whatever the reason answers with it", () => {
  const byClass: Array<[ProtocolError, MozillaErrorKey]> = [
    [new Unauthorized('no header'), 'missingAuthorization'],
    [new InvalidCredentials('bad signature'), 'invalidCredentials'],
    [new InvalidTimestamp('expired'), 'expired'],
    [new InvalidGeneration('older'), 'oldGeneration'],
    [new InvalidKeysChangedAt('older'), 'oldKeysChangedAt'],
    [new NoNodeAvailable('full'), 'noNode'],
    [new ServiceUnavailable('down'), 'resourceUnavailable'],
    [new KeysUnavailable('no keys yet'), 'resourceUnavailable'],
    [new InternalError('bug'), 'serverError'],
  ];
  for (const [err, key] of byClass) assert.deepEqual(loginAnswer(err), MOZILLA_ERRORS[key].entry, err.name);
});

test('ConfigError names the variable in its message', () => {
  const e = new ConfigError('MAX_INFLIGHT', 'must be a positive integer');
  assert.deepEqual([e.name, e.variable, e.message], ['ConfigError', 'MAX_INFLIGHT', 'MAX_INFLIGHT: must be a positive integer']);
});
