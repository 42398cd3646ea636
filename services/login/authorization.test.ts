// The Authorization header's outer grammar, `<scheme> <credentials>`, branch by
// branch: which class each refusal is (and so its status), the length limits at
// their edges, and the header sent twice. Over HTTP: tests/adversarial-parsers.test.ts
// and tests/fuzz-http.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequest, InvalidCredentials, Unauthorized, type ProtocolError } from '../../lib/errors.js';
import { authorizationOf, MAX_AUTHORIZATION_LENGTH, MAX_CREDENTIALS_LENGTH, splitAuthorization } from './authorization.js';

/** Exactly this class (Unauthorized and InvalidCredentials are different status strings) and a message matching `re`. */
const refused = (cls: new (...a: never[]) => ProtocolError, re: RegExp) => (e: unknown) => {
  assert.equal((e as object).constructor, cls);
  assert.match((e as Error).message, re);
  return true;
};

test('splitAuthorization: the scheme as sent and one word of credentials', () => {
  assert.deepEqual(splitAuthorization('Bearer abc.def'), { name: 'Bearer', credentials: 'abc.def' });
  assert.deepEqual(splitAuthorization('bEaReR x'), { name: 'bEaReR', credentials: 'x' });
  // RFC 9110 token characters in the scheme; base64 and JWS characters in the credentials.
  assert.deepEqual(splitAuthorization("X!#$%&'*+.^_`|~-9 a+/=_-"), { name: "X!#$%&'*+.^_`|~-9", credentials: 'a+/=_-' });
});

test('splitAuthorization: any run of spaces and tabs around the credentials', () => {
  for (const h of ['Bearer  abc', 'Bearer\tabc', 'Bearer \t abc', 'Bearer abc ', 'Bearer abc\t \t']) {
    assert.deepEqual(splitAuthorization(h), { name: 'Bearer', credentials: 'abc' }, JSON.stringify(h));
  }
});

test('splitAuthorization: a scheme alone, or followed by blanks only, has empty credentials', () => {
  assert.deepEqual(splitAuthorization('Bearer'), { name: 'Bearer', credentials: '' });
  assert.deepEqual(splitAuthorization('Bearer   '), { name: 'Bearer', credentials: '' });
  assert.deepEqual(splitAuthorization('Bearer\t'), { name: 'Bearer', credentials: '' });
});

test('splitAuthorization: no header, or one of blanks → Unauthorized, "missing"', () => {
  for (const h of [undefined, '', ' ', '\t \t']) assert.throws(() => splitAuthorization(h), refused(Unauthorized, /^missing Authorization header$/), JSON.stringify(h));
});

test('splitAuthorization: a header that does not start with a scheme → Unauthorized, "unparseable"', () => {
  // '9 x' and 'é x': a scheme found later in the header ('x') is still no scheme at its start.
  for (const h of [' Bearer abc', '1Bearer abc', '-x abc', '"Bearer" abc', 'é abc', '\tBearer abc', '9 x', 'é x']) {
    assert.throws(() => splitAuthorization(h), refused(Unauthorized, /^unparseable/), JSON.stringify(h));
  }
});

test('splitAuthorization: no blank after the scheme, other whitespace, or more than one word → Unauthorized, "unparseable"', () => {
  // A character outside the token set glued to the scheme.
  for (const h of ['Bearer:abc', 'Bearer,abc', 'Bearer"abc"', 'Bearer/abc', 'Bearer(abc)']) {
    assert.throws(() => splitAuthorization(h), refused(Unauthorized, /^unparseable/), h);
  }
  // Whitespace other than space and tab between or around, two words.
  for (const h of ['Bearer\nabc', 'Bearer\rabc', 'Bearer\u00a0abc', 'Bearer\vabc', 'Bearer abc\n', 'Bearer abc\u00a0', 'Bearer \nabc', 'Bearer a b', 'Bearer a\tb', 'Bearer a\u2028b']) {
    assert.throws(() => splitAuthorization(h), refused(Unauthorized, /^unparseable/), JSON.stringify(h));
  }
});

test('splitAuthorization: the whole header is length-checked first, then the credentials', () => {
  const scheme = 'Bearer ';
  // At the limits: credentials of MAX_CREDENTIALS_LENGTH in a header of at most MAX_AUTHORIZATION_LENGTH.
  const max = 'a'.repeat(MAX_CREDENTIALS_LENGTH);
  assert.equal(splitAuthorization(scheme + max).credentials, max);
  assert.throws(() => splitAuthorization(scheme + max + 'a'), refused(InvalidCredentials, /too large/), 'credentials one over');
  // A header one over its limit is refused even when only blanks make it long…
  const padded = scheme + ' '.repeat(MAX_AUTHORIZATION_LENGTH - scheme.length - 1) + 'a';
  assert.equal(padded.length, MAX_AUTHORIZATION_LENGTH);
  assert.equal(splitAuthorization(padded).credentials, 'a');
  assert.throws(() => splitAuthorization(' ' + padded), refused(InvalidCredentials, /too large/), 'header one over');
  // …and before its grammar is looked at.
  assert.throws(() => splitAuthorization('\n'.repeat(MAX_AUTHORIZATION_LENGTH + 1)), refused(InvalidCredentials, /too large/));
});

const request = (rawHeaders: string[]) => {
  const headers: Record<string, string> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) headers[rawHeaders[i].toLowerCase()] ??= rawHeaders[i + 1];
  return { rawHeaders, headers };
};

test('authorizationOf: the header once, whatever its case; absent or empty is undefined', () => {
  assert.equal(authorizationOf(request(['Host', 'x', 'Authorization', 'Bearer a'])), 'Bearer a');
  assert.equal(authorizationOf(request(['AUTHORIZATION', 'Bearer a'])), 'Bearer a');
  assert.equal(authorizationOf(request(['Host', 'x'])), undefined);
  assert.equal(authorizationOf(request(['Authorization', ''])), undefined);
});

test('authorizationOf: sent twice, in any case and even empty once → 400 naming the header', () => {
  for (const raw of [
    ['Authorization', 'Bearer a', 'Authorization', 'Bearer b'],
    ['authorization', 'Bearer a', 'Host', 'x', 'AuThOrIzAtIoN', 'Bearer a'],
    ['Authorization', '', 'Authorization', 'Bearer b'],
  ]) {
    assert.throws(
      () => authorizationOf(request(raw)),
      (e: unknown) => refused(BadRequest, /sent once/)(e) && (e as ProtocolError).field === 'Authorization' && (e as ProtocolError).location === 'header',
      JSON.stringify(raw),
    );
  }
});
