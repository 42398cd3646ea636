// Every parser of request data fed 16 KB of its worst input (issue #13 item 5:
// no regex on untrusted input may backtrack). Each must refuse with its
// documented error or value. What it costs is in the bench (`npm run bench --
// --only parse`), not here: these tests assert outcomes, not timings.
//
// Audit of the regexes that see request data (each linear: no nested or
// overlapping quantifiers, or a length cap before it):
// - services/login/authorization.ts: AUTH_SCHEME and ONLY_BLANKS (one class each,
//   anchored), `\s`, base64url `^[…]*$`, legacy RSA `^[1-9][0-9]{0,n}$`, EMAIL
//   (`@` excluded from both sides, so one split; length checked first). The
//   old `[ \t]+(\S*)[ \t]*$` was the quadratic one, replaced.
// - services/login/rules.ts: X-Client-State `^[…]{1,32}$`, duration `^\d{1,10}$`,
//   keyId `^(?:[0-9a-fA-F]{2})+$` (fixed-width groups; only on a checked state);
//   Accept is split, not matched.
// - lib/request-id.ts: `^[A-Za-z0-9._-]{1,64}$`.
// - lib/hawk.ts: a 4096-byte cap first; then the scheme `^[A-Za-z]+`,
//   `^[ \t]+\S` (anchored), the sticky attribute regex (its parts are disjoint
//   classes, and it never restarts at a later position), VALUE_CHARS, `^\d+$`.
// - lib/token.ts: a 4096-byte cap; `^[A-Za-z0-9_-]*={0,2}$`, then `=+$` only on
//   a string that has at most two `=`, at its end.
// - services/node-gateway (auth.ts path segments, forward.ts header names):
//   fixed-length alternatives and anchored single classes; linear.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { BadRequest, InvalidCredentials, Unauthorized } from '../lib/errors.js';
import { parseHawkHeader } from '../lib/hawk.js';
import { isSaneRequestId, requestIdFrom } from '../lib/request-id.js';
import { nodeSecrets, parseToken } from '../lib/token.js';
import { certificateClaims, decodeJws, MAX_AUTHORIZATION_LENGTH, parseAuthorization, userPublicKey } from '../services/login/assertion.js';
import { base64UrlDecode } from '../services/login/jws.js';
import { acceptsJson, isValidClientState, keyId, tokenDuration } from '../services/login/rules.js';
import { hostileHeaders } from '../bench/parse.js';
import { fuzzParams } from './support/fuzz.js';

const KB16 = 16 * 1024;
const blanks = (n: number) => ' \t'.repeat(n / 2);

const refusedWith = (cls: new (...a: never[]) => Error, re?: RegExp) => (e: unknown) => e instanceof cls && e.constructor === cls && (!re || re.test((e as Error).message));

test('parseAuthorization: each hostile 16 KB shape of the bench is refused with its documented error', () => {
  const expected: Record<string, (e: unknown) => boolean> = {
    'blanks then "x y"': refusedWith(Unauthorized, /unparseable/),
    'blanks inside the credentials': refusedWith(Unauthorized, /unparseable/),
    'one long credential, no "~"': refusedWith(InvalidCredentials, /<certificate>~<assertion>/),
    'many "~"': refusedWith(InvalidCredentials, /<certificate>~<assertion>/),
    'a long scheme': refusedWith(Unauthorized, /unsupported authorization scheme/),
    'just over the length cap': refusedWith(InvalidCredentials, /too large/),
  };
  const shapes = hostileHeaders();
  assert.deepEqual(Object.keys(shapes).sort(), Object.keys(expected).sort());
  for (const [shape, header] of Object.entries(shapes)) assert.throws(() => parseAuthorization(header), expected[shape], shape);
});

/** The grammar parseAuthorization had before #13, through the regex it had: the reference the linear parser must agree with. */
function referenceParse(header: string): string {
  if (header.trim() === '') return 'missing';
  const m = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)(?:[ \t]+(\S*))?[ \t]*$/.exec(header);
  if (!m) return 'unparseable';
  if (!['assertion', 'browserid'].includes(m[1].toLowerCase())) return 'unsupported';
  if (!m[2]) return 'missing assertion';
  const parts = m[2].split('~');
  return parts.length !== 2 || parts[0] === '' || parts[1] === '' ? 'bundle' : `ok ${parts[0]} ${parts[1]}`;
}

function linearParse(header: string): string {
  try {
    const r = parseAuthorization(header);
    return `ok ${r.certificate} ${r.assertion}`;
  } catch (e) {
    const m = (e as Error).message;
    if (/^missing Authorization/.test(m)) return 'missing';
    if (/unparseable/.test(m)) return 'unparseable';
    if (/unsupported/.test(m)) return 'unsupported';
    if (/missing assertion/.test(m)) return 'missing assertion';
    return 'bundle';
  }
}

test('parseAuthorization agrees with the old regex grammar on short headers of blanks, whitespace and separators', () => {
  const piece = fc.constantFrom(' ', '\t', '  ', 'a', 'b~c', '~', ':', '\u00a0', '\n', '\r', '\u2028', '\ufeff', 'x.y');
  const scheme = fc.constantFrom('Assertion', 'browserid', 'Bearer', 'Assertion!', '', ' ', '1x');
  fc.assert(
    fc.property(scheme, fc.array(piece, { maxLength: 12 }), (s, parts) => {
      const header = s + parts.join('');
      assert.equal(linearParse(header), referenceParse(header), JSON.stringify(header));
    }),
    fuzzParams(3000),
  );
});

test('login parsers of other request data: 16 KB inputs refused with their documented result', () => {
  // JWS segments and base64url.
  assert.equal(base64UrlDecode(`${'A'.repeat(KB16)}!`), null);
  assert.throws(() => decodeJws('.'.repeat(KB16), 'certificate'), refusedWith(InvalidCredentials));
  assert.throws(() => decodeJws(`${'A'.repeat(KB16)}.${'A'.repeat(KB16)}.!`, 'certificate'), refusedWith(InvalidCredentials));
  // E-mail and the legacy RSA key: length checked before the regex.
  const claims = { iss: 'idp.example', exp: 1, 'public-key': { kty: 'OKP', crv: 'Ed25519', x: 'A'.repeat(43) } };
  for (const email of [`${'a'.repeat(KB16)}@example.com`, `a@${'b'.repeat(KB16)}`, '@'.repeat(KB16), `${'a'.repeat(64)}@${' '.repeat(KB16)}`]) {
    assert.throws(() => certificateClaims({ ...claims, principal: { email } }, 'g'), refusedWith(InvalidCredentials, /principal\.email/), email.slice(0, 20));
  }
  assert.throws(() => userPublicKey({ algorithm: 'RS', n: '9'.repeat(KB16), e: '3' }), refusedWith(InvalidCredentials, /"n"/));
  assert.throws(() => userPublicKey({ algorithm: 'RS', n: '99', e: '9'.repeat(KB16) }), refusedWith(InvalidCredentials, /"e"/));
  // Headers and query of the token endpoint.
  assert.equal(isValidClientState('a'.repeat(KB16)), false);
  assert.equal(isValidClientState(`${'a'.repeat(31)}${' '.repeat(KB16)}`), false);
  assert.equal(acceptsJson(`${'text/html;'.repeat(KB16 / 10)},${' ,'.repeat(KB16 / 2)}`), false);
  assert.equal(acceptsJson(`${'text/html, '.repeat(KB16 / 11)}application/json`), true);
  assert.equal(tokenDuration('9'.repeat(KB16), 3600), 3600);
  assert.equal(keyId(0, `${'ab'.repeat(KB16 / 2)}z`), undefined);
});

test('X-Request-Id: a 16 KB id is not sane and is replaced', () => {
  for (const id of ['a'.repeat(KB16), `${'a'.repeat(63)}${'!'.repeat(KB16)}`, `${'.'.repeat(KB16)}\n`]) {
    assert.equal(isSaneRequestId(id), false);
    assert.match(requestIdFrom(id), /^[0-9a-f-]{36}$/);
  }
});

test('Hawk header (the gateway): 16 KB → 400 by the length cap; the worst shapes under the cap → 400 malformed', () => {
  const malformed = refusedWith(BadRequest);
  assert.throws(() => parseHawkHeader(`Hawk ${blanks(KB16)}id="a"`), refusedWith(BadRequest, /longer than 4096/));
  assert.throws(() => parseHawkHeader(`Hawk id="${'a'.repeat(KB16)}"`), refusedWith(BadRequest, /longer than 4096/));
  for (const header of [
    `Hawk${blanks(4090)}`,
    `Hawk ${blanks(4000)}x`,
    `Hawk id="${'a'.repeat(4080)}`,
    `Hawk ${'id'.repeat(2040)}`,
    `Hawk id="a"${blanks(4000)},`,
    `Hawk id="a",${' id="a",'.repeat(450)}`,
    `Hawk id="a", ts="${'1'.repeat(4000)}x", nonce="n", mac="m"`,
  ]) {
    assert.ok(header.length <= 4096, `${header.length}`);
    assert.throws(() => parseHawkHeader(header), malformed, header.slice(0, 30));
  }
});

test('token id (the gateway): 16 KB of base64 or of padding → InvalidCredentials', () => {
  const secrets = nodeSecrets(['adversarial-master-secret-0123456789'], 'https://node.example');
  for (const id of ['A'.repeat(KB16), `${'A'.repeat(4000)}${'='.repeat(KB16)}`, '='.repeat(4000), `${'A'.repeat(4090)}==!`]) {
    assert.throws(() => parseToken(id, secrets), refusedWith(InvalidCredentials, /malformed token/), id.slice(-10));
  }
});

test('the length cap of the Authorization header is what the bench calls 16 KB', () => {
  assert.ok(MAX_AUTHORIZATION_LENGTH >= KB16 && MAX_AUTHORIZATION_LENGTH < KB16 + 128);
});
