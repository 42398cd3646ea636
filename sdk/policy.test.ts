import { test } from 'node:test';
import assert from 'node:assert/strict';
import { staleTimestampChallenge } from '../lib/hawk.js';
import {
  correctedOffset,
  DEFAULT_RETRY_AFTER,
  expiresAt,
  gateAfter,
  nextStep,
  OPEN_GATE,
  parseHawkChallenge,
  parseRetryAfter,
  parseSeconds,
  parseTokenBody,
  refreshAt,
  resolveUrl,
  verifyTimestampMac,
  type CachedToken,
  type Token,
} from './policy.js';

const token: Token = { id: 'tok', key: 'k', uid: 7, api_endpoint: 'http://node.test/1.5/7', duration: 100, hashalg: 'sha256' };
// Received at t=1000 ms: refresh point at 81 000, expiry at 101 000.
const cached: CachedToken = { token, receivedAt: 1000 };

test('refresh point is 80 % of the duration, expiry the whole duration', () => {
  assert.equal(refreshAt(cached), 81_000);
  assert.equal(expiresAt(cached), 101_000);
});

test('nextStep: a token before its refresh point is used', () => {
  assert.deepEqual(nextStep(cached, OPEN_GATE, 80_999), { kind: 'cached', token });
  // Even during a backoff window: no request is needed at all.
  assert.deepEqual(nextStep(cached, { backoffUntil: 500_000, unavailableUntil: 0 }, 2000), { kind: 'cached', token });
});

test('nextStep: no token, or one past its refresh point, means log in when the gate is open', () => {
  assert.deepEqual(nextStep(undefined, OPEN_GATE, 0), { kind: 'login' });
  assert.deepEqual(nextStep(cached, OPEN_GATE, 81_000), { kind: 'login' });
  assert.deepEqual(nextStep(cached, OPEN_GATE, 500_000), { kind: 'login' });
  // The gate reopens at exactly its end.
  assert.deepEqual(nextStep(undefined, { backoffUntil: 5000, unavailableUntil: 4000 }, 5000), { kind: 'login' });
});

test('nextStep: during backoff an unexpired token is used past its refresh point', () => {
  const gate = { backoffUntil: 200_000, unavailableUntil: 0 };
  assert.deepEqual(nextStep(cached, gate, 90_000), { kind: 'cached', token });
  assert.deepEqual(nextStep(cached, gate, 100_999), { kind: 'cached', token });
});

test('nextStep: during backoff with nothing usable, refuse with the remaining seconds rounded up', () => {
  const gate = { backoffUntil: 200_000, unavailableUntil: 0 };
  assert.deepEqual(nextStep(cached, gate, 101_000), { kind: 'backoff', retryAfter: 99 });
  assert.deepEqual(nextStep(undefined, gate, 199_001), { kind: 'backoff', retryAfter: 1 });
});

test('nextStep: after a 503 the later window decides which refusal it is', () => {
  assert.deepEqual(nextStep(undefined, { backoffUntil: 0, unavailableUntil: 10_000 }, 0), { kind: 'unavailable', retryAfter: 10 });
  assert.deepEqual(nextStep(undefined, { backoffUntil: 30_000, unavailableUntil: 10_000 }, 0), { kind: 'backoff', retryAfter: 30 });
  assert.deepEqual(nextStep(undefined, { backoffUntil: 10_000, unavailableUntil: 30_000 }, 0), { kind: 'unavailable', retryAfter: 30 });
  assert.deepEqual(nextStep(cached, { backoffUntil: 0, unavailableUntil: 200_000 }, 95_000), { kind: 'cached', token });
});

test('gateAfter: X-Backoff extends the backoff window, never shortens it', () => {
  assert.deepEqual(gateAfter(OPEN_GATE, { status: 200, backoff: 30 }, 1000), { backoffUntil: 31_000, unavailableUntil: 0 });
  const long = { backoffUntil: 100_000, unavailableUntil: 0 };
  assert.deepEqual(gateAfter(long, { status: 200, backoff: 5 }, 1000), long);
});

test('gateAfter: a 503 opens the Retry-After window (default when absent); other statuses do not', () => {
  assert.deepEqual(gateAfter(OPEN_GATE, { status: 503, retryAfter: 7 }, 1000), { backoffUntil: 0, unavailableUntil: 8000 });
  assert.deepEqual(gateAfter(OPEN_GATE, { status: 503 }, 0), { backoffUntil: 0, unavailableUntil: DEFAULT_RETRY_AFTER * 1000 });
  assert.deepEqual(gateAfter(OPEN_GATE, { status: 401, retryAfter: 7 }, 0), OPEN_GATE);
  assert.deepEqual(gateAfter(OPEN_GATE, { status: 200 }, 0), OPEN_GATE);
  assert.deepEqual(gateAfter(OPEN_GATE, { status: 503, backoff: 60, retryAfter: 5 }, 0), { backoffUntil: 60_000, unavailableUntil: 5000 });
});

test('parseSeconds reads non-negative seconds and nothing else', () => {
  assert.equal(parseSeconds('5'), 5);
  assert.equal(parseSeconds(' 7 '), 7);
  assert.equal(parseSeconds('1700000000.25'), 1_700_000_000.25);
  for (const bad of [null, undefined, '', '-1', 'abc', '1e3', '5s', '1.']) assert.equal(parseSeconds(bad), undefined, String(bad));
});

test('parseRetryAfter: seconds, or an HTTP date against the given clock', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  assert.equal(parseRetryAfter('120', now), 120);
  assert.equal(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now), 30);
  assert.equal(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now), 0);
  for (const bad of [null, undefined, '', '-5', '+5', 'soon']) assert.equal(parseRetryAfter(bad, now), undefined, String(bad));
});

test('correctedOffset keeps an offset that agrees with the server and replaces one that does not', () => {
  // Local clock 10 000 ms; server says second 10 → its middle is 10 500.
  assert.equal(correctedOffset(10, 10_000, 0), 0);
  assert.equal(correctedOffset(10, 12_400, 0), 0);
  // Local clock 10 minutes ahead.
  assert.equal(correctedOffset(10, 610_000, 0), 10_500 - 610_000);
  // An offset learnt before stays when it still agrees.
  assert.equal(correctedOffset(10, 610_000, -599_600), -599_600);
  // Behind by 10 minutes.
  assert.equal(correctedOffset(1000, 400_000, 0), 600_500);
});

test('parseTokenBody accepts the login 200 body and refuses anything else', () => {
  assert.deepEqual(parseTokenBody({ ...token, extra: 1 }), token);
  const { hashalg: _, ...bare } = token;
  assert.deepEqual(parseTokenBody(bare), bare);
  const bad: unknown[] = [
    null,
    'text',
    { ...token, id: '' },
    { ...token, id: 1 },
    { ...token, key: '' },
    { ...token, uid: '7' },
    { ...token, uid: 1.5 },
    { ...token, api_endpoint: 'ftp://x' },
    { ...token, api_endpoint: undefined },
    { ...token, duration: 0 },
    { ...token, duration: '100' },
  ];
  for (const b of bad) assert.equal(parseTokenBody(b), null, JSON.stringify(b));
});

test('resolveUrl: paths go under the api_endpoint, absolute URLs stay', () => {
  const base = 'http://node.test:8080/1.5/7';
  assert.equal(resolveUrl(base, 'storage/x?full=1'), 'http://node.test:8080/1.5/7/storage/x?full=1');
  assert.equal(resolveUrl(base, '/storage/x'), 'http://node.test:8080/1.5/7/storage/x');
  assert.equal(resolveUrl(base + '/', 'info'), 'http://node.test:8080/1.5/7/info');
  assert.equal(resolveUrl(base, ''), base);
  assert.equal(resolveUrl(base, '?q=1'), base + '?q=1');
  assert.equal(resolveUrl(base, 'https://other.test/a'), 'https://other.test/a');
  assert.equal(resolveUrl(base, new URL('http://other.test/b')), 'http://other.test/b');
});

test('parseHawkChallenge reads the gateway stale-timestamp challenge', () => {
  assert.deepEqual(parseHawkChallenge('Hawk ts="1353832234", tsm="abc=", error="Stale timestamp"'), {
    ts: 1353832234,
    tsm: 'abc=',
    error: 'Stale timestamp',
  });
  // Next to another scheme in a combined header.
  assert.deepEqual(parseHawkChallenge('Assertion realm="login", Hawk ts="5", tsm="m"'), { ts: 5, tsm: 'm' });
  for (const bad of [null, undefined, '', 'Hawk', 'Assertion ts="5", tsm="m"', 'Hawk ts="5"', 'Hawk tsm="m"', 'Hawk ts="x5", tsm="m"', 'Hawk ts="", tsm="m"']) {
    assert.equal(parseHawkChallenge(bad), null, String(bad));
  }
});

test('verifyTimestampMac accepts the server MAC of ts with our key only', () => {
  const key = 'werxhqb98rpaxn39848xrunpaw3489ruxnpa98w4rxn';
  const challenge = parseHawkChallenge(staleTimestampChallenge(key, 1_700_000_000))!;
  assert.equal(verifyTimestampMac(key, challenge), true);
  assert.equal(verifyTimestampMac('another key', challenge), false);
  assert.equal(verifyTimestampMac(key, { ...challenge, ts: challenge.ts + 600 }), false);
  assert.equal(verifyTimestampMac(key, { ...challenge, tsm: challenge.tsm.slice(1) }), false);
});

// ---- found missing by mutation testing (npm run mutation -- sdk/policy.ts) ----

test('edges: a 503 and a backoff ending together refuse as unavailable; an offset exactly at the tolerance is kept', () => {
  assert.deepEqual(nextStep(undefined, { backoffUntil: 5000, unavailableUntil: 5000 }, 1000), { kind: 'unavailable', retryAfter: 4 });
  // The server's mid-second is 10 500 ms; local 8500 + offset 0 is 2000 ms from it.
  assert.equal(correctedOffset(10, 8500, 0), 0);
  assert.equal(correctedOffset(10, 8499, 0), 2001);
});

test('parseRetryAfter: a signed or dotted number with spaces before it is neither seconds nor a date', () => {
  for (const bad of [' -5', ' +5', ' .5', '\t-1']) assert.equal(parseRetryAfter(bad, 0), undefined, JSON.stringify(bad));
});

test('parseTokenBody: an empty id, a key that is no string, an api_endpoint that is not http(s) at its start; hashalg and hashed_fxa_uid kept', () => {
  const body = { id: 'i', key: 'k', uid: 1, api_endpoint: 'https://n.example/1.5/1', duration: 3600, hashalg: 'sha256' };
  assert.equal(parseTokenBody({ ...body, id: '' }), null);
  assert.equal(parseTokenBody({ ...body, api_endpoint: 'ftp://n.example/https://x' }), null);
  assert.equal(parseTokenBody(body)?.hashalg, 'sha256');
  assert.equal(parseTokenBody({ ...body, hashalg: 7 })?.hashalg, undefined);
  assert.equal(parseTokenBody({ ...body, key: 7 }), null);
  assert.equal(parseTokenBody({ ...body, api_endpoint: [body.api_endpoint] }), null, 'an array whose text is a URL');
  assert.equal(parseTokenBody({ ...body, hashed_fxa_uid: 'abc' })?.hashed_fxa_uid, 'abc');
  assert.equal(parseTokenBody({ ...body, hashed_fxa_uid: 7 })?.hashed_fxa_uid, undefined);
});

test('resolveUrl: a colon inside a path is no scheme; every trailing and leading slash dropped; a fragment stays on the endpoint', () => {
  const api = 'https://n.example/1.5/7';
  assert.equal(resolveUrl(api, 'storage/a:b'), `${api}/storage/a:b`);
  assert.equal(resolveUrl(`${api}//`, 'storage'), `${api}/storage`);
  assert.equal(resolveUrl(api, '//storage'), `${api}/storage`);
  assert.equal(resolveUrl(api, '#frag'), `${api}#frag`);
});

test('parseHawkChallenge: the first of a repeated attribute counts; ts is digits only, at most 15', () => {
  assert.deepEqual(parseHawkChallenge('Hawk ts="5", tsm="m", ts="9", tsm="n"'), { ts: 5, tsm: 'm' });
  assert.equal(parseHawkChallenge('Hawk ts="5x", tsm="m"'), null);
  assert.equal(parseHawkChallenge(`Hawk ts="${'1'.repeat(16)}", tsm="m"`), null);
  assert.deepEqual(parseHawkChallenge(`Hawk ts="${'1'.repeat(15)}", tsm="m"`), { ts: 111_111_111_111_111, tsm: 'm' });
});
