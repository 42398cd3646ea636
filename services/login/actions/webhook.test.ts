// The account events webhook's pure parts: which security event tokens are
// fresh enough to apply, until when each is remembered (DESIGN §10), and how
// the claims name the account and its events (DESIGN §9.4).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { BadRequest, InvalidCredentials, InvalidTimestamp } from '../../../lib/errors.js';
import { accountEvents, DELETE_USER, eventTokenWindow, PASSWORD_CHANGE } from './webhook.js';

const NOW_MS = 1_700_000_000_000;
const NOW = NOW_MS / 1000;
const SKEW = 60;
const MAX_AGE = 3600;
const window = (claims: Record<string, unknown>, header: Record<string, unknown> = {}) => eventTokenWindow({ jti: 'j1', ...claims }, header, NOW_MS, SKEW, MAX_AGE);
const refused = (claims: Record<string, unknown>, type: typeof InvalidCredentials | typeof InvalidTimestamp, message: RegExp, header: Record<string, unknown> = {}) =>
  assert.throws(() => window(claims, header), (e: unknown) => e instanceof type && message.test((e as Error).message));

test('eventTokenWindow: the key is the SHA-256 of issuer and jti; the same jti of another issuer is another key', () => {
  const { key } = window({ iss: 'https://a.example', iat: NOW });
  assert.equal(key, createHash('sha256').update('https://a.example\nj1').digest('hex'));
  assert.notEqual(window({ iss: 'https://b.example', iat: NOW }).key, key);
  assert.equal(window({ iat: NOW }).key, createHash('sha256').update('\nj1').digest('hex'), 'no issuer');
  assert.equal(window({ iss: 7, iat: NOW }).key, createHash('sha256').update('\nj1').digest('hex'), 'an issuer that is no string');
});

test('eventTokenWindow: jti is required, a string of 1 to 256 characters', () => {
  for (const jti of [undefined, '', 7, 'x'.repeat(257)]) refused({ jti, iat: NOW }, InvalidCredentials, /"jti" of 1 to 256 characters/);
  assert.equal(typeof window({ jti: 'x'.repeat(256), iat: NOW }).key, 'string');
});

test('eventTokenWindow: typ, when present, is secevent+jwt with or without application/, in any case', () => {
  for (const typ of ['secevent+jwt', 'application/secevent+jwt', 'SecEvent+JWT']) assert.ok(window({ iat: NOW }, { typ }));
  // An array would read as its text to a regex: ['secevent+jwt'] is no media type.
  for (const typ of ['JWT', 'at+jwt', 'secevent+jwt ', 'xapplication/secevent+jwt', 7, null, ['secevent+jwt']]) refused({ iat: NOW }, InvalidCredentials, /"typ" must be secevent\+jwt/, { typ });
});

test('eventTokenWindow: iat within the window (with the skew) is fresh until iat + max age + skew', () => {
  assert.equal(window({ iat: NOW }).untilMs, NOW_MS + (MAX_AGE + SKEW) * 1000);
  assert.equal(window({ iat: NOW + SKEW }).untilMs, NOW_MS + (MAX_AGE + 2 * SKEW) * 1000, 'the future within the skew');
  refused({ iat: NOW + SKEW + 1 }, InvalidTimestamp, /issued in the future/);
  assert.equal(window({ iat: NOW - MAX_AGE - SKEW }).untilMs, NOW_MS + 1, 'the oldest accepted: remembered at least a moment');
  refused({ iat: NOW - MAX_AGE - SKEW - 1 }, InvalidTimestamp, /older than 3600 s/);
});

test('eventTokenWindow: exp at most max age (plus skew) ahead; fresh until exp + skew, or iat + max age if sooner', () => {
  assert.equal(window({ exp: NOW + 60 }).untilMs, NOW_MS + (60 + SKEW) * 1000);
  assert.equal(window({ exp: NOW + MAX_AGE + SKEW }).untilMs, NOW_MS + (MAX_AGE + 2 * SKEW) * 1000);
  refused({ exp: NOW + MAX_AGE + SKEW + 1 }, InvalidTimestamp, /expires more than 3600 s ahead/);
  refused({ iat: NOW, exp: NOW + MAX_AGE + SKEW + 1 }, InvalidTimestamp, /expires more than/);
  assert.equal(window({ iat: NOW - 3000, exp: NOW + 3000 }).untilMs, NOW_MS + (600 + SKEW) * 1000, 'iat ends it first');
  assert.equal(window({ iat: NOW, exp: NOW + 100 }).untilMs, NOW_MS + (100 + SKEW) * 1000, 'exp ends it first');
});

test('eventTokenWindow: without iat or exp (or with them not numbers) a token has no window', () => {
  refused({}, InvalidCredentials, /needs "iat" or "exp"/);
  refused({ iat: 'now', exp: null }, InvalidCredentials, /needs "iat" or "exp"/);
});

test('eventTokenWindow: a fractional time rounds the remembering up', () => {
  assert.equal(window({ exp: NOW + 0.0005 }).untilMs, Math.ceil(NOW_MS + 0.5 + SKEW * 1000));
});

test('accountEvents: sub and events parsed; password-change needs a positive changeTime', () => {
  assert.deepEqual(accountEvents({ sub: 'abc', events: { [DELETE_USER]: {}, [PASSWORD_CHANGE]: { changeTime: 5 }, 'https://x': {} } }), {
    sub: 'abc',
    events: [{ kind: 'delete-user' }, { kind: 'password-change', generation: 4 }, { kind: 'ignored', uri: 'https://x' }],
  });
  /** A BadRequest that names the body field at fault and says what it must be. */
  const malformed = (field: string, message: RegExp) => (e: unknown) =>
    e instanceof BadRequest && e.location === 'body' && e.field === field && message.test(e.message);
  for (const sub of [undefined, '', 'a b', 'x'.repeat(65)]) assert.throws(() => accountEvents({ sub, events: {} }), malformed('sub', /^"sub" must be an account id$/));
  for (const events of [undefined, null, [], 'x']) assert.throws(() => accountEvents({ sub: 'a', events }), malformed('events', /^"events" must be an object keyed by event URI$/));
  for (const body of [{}, null, { changeTime: 0 }, { changeTime: 1.5 }, { changeTime: '5' }]) {
    assert.throws(() => accountEvents({ sub: 'a', events: { [PASSWORD_CHANGE]: body } }), malformed('changeTime', /^password-change needs "changeTime", a positive integer \(ms\)$/));
  }
  // The smallest changeTime: generation 0, "none".
  assert.deepEqual(accountEvents({ sub: 'a', events: { [PASSWORD_CHANGE]: { changeTime: 1 } } }).events, [{ kind: 'password-change', generation: 0 }]);
});
