// The Bearer scheme's pure checks branch by branch: X-KeyID's parse (DESIGN
// §9.1), X-Client-State against it, and the scope, sub and generation of a
// verified access token. Each refusal is checked for its exact class (and so
// its status string) and, where Mozilla's servers give one, its errors entry.
// The scheme over HTTP with real tokens is tests/bearer.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidClientState, InvalidCredentials, InvalidGeneration, InvalidKeyId, MOZILLA_ERRORS, type ProtocolError } from '../../lib/errors.js';
import { accessTokenClaims, checkClientStateHeader, parseKeyId } from './scheme-bearer.js';

const SCOPE = 'https://identity.mozilla.com/apps/oldsync';

/** Exactly this class (a subclass would be another status string), with a message matching `re` and, when given, this errors entry. */
const refused =
  (cls: new (...a: never[]) => ProtocolError, re: RegExp, answer?: unknown) =>
  (e: unknown): boolean => {
    assert.equal((e as object).constructor, cls);
    assert.match((e as Error).message, re);
    if (answer) assert.deepEqual((e as ProtocolError).answer, answer);
    else assert.equal((e as ProtocolError).answer, undefined);
    return true;
  };

const malformed = refused(InvalidCredentials, /must be <keys_changed_at>-<base64url client state>/);

test('parseKeyId: keys_changed_at and the client state as lowercase hex', () => {
  assert.deepEqual(parseKeyId('1700000000000-qrvM3e7_'), { keysChangedAt: 1_700_000_000_000, clientState: 'aabbccddeeff' });
  assert.deepEqual(parseKeyId('12-AA'), { keysChangedAt: 12, clientState: '00' });
});

test('parseKeyId: keys_changed_at 0 (however many zeros) means none', () => {
  assert.deepEqual(parseKeyId('0-AA'), { clientState: '00' });
  assert.deepEqual(parseKeyId('0000-AA'), { clientState: '00' });
  assert.equal('keysChangedAt' in parseKeyId('0-AA'), false);
});

test('parseKeyId: an empty client state is the empty string (DESIGN §9.3 still writes fxa_kid for it)', () => {
  assert.deepEqual(parseKeyId('1000-'), { keysChangedAt: 1000, clientState: '' });
  assert.deepEqual(parseKeyId('0-'), { clientState: '' });
});

test('parseKeyId: missing or empty → invalid-key-id with "Missing X-KeyID header"', () => {
  for (const v of [undefined, '']) assert.throws(() => parseKeyId(v), refused(InvalidKeyId, /required/, MOZILLA_ERRORS.missingKeyId.entry), String(v));
});

test('parseKeyId: anything but visible ASCII → invalid-key-id with "Invalid X-KeyID header"', () => {
  for (const v of ['1000 -AA', '1000-A\tA', ' 1000-AA', '1000-AA\x7f', '1000-é', '1000-AA\u0000']) {
    assert.throws(() => parseKeyId(v), refused(InvalidKeyId, /visible ASCII/, MOZILLA_ERRORS.invalidKeyId.entry), JSON.stringify(v));
  }
});

test('parseKeyId: more than 64 characters → invalid-credentials before any other check; 64 are parsed', () => {
  assert.throws(() => parseKeyId('1-' + 'A'.repeat(63)), refused(InvalidCredentials, /too long/));
  assert.throws(() => parseKeyId('x'.repeat(65)), refused(InvalidCredentials, /too long/));
  // 64 characters reach the format check (and fail it: 62 base64url characters are more than 16 bytes).
  assert.throws(() => parseKeyId('1-' + 'A'.repeat(62)), malformed);
});

test('parseKeyId: the refusals name X-KeyID as the field', () => {
  assert.throws(() => parseKeyId('nodash'), (e: unknown) => (e as ProtocolError).field === 'X-KeyID');
  assert.throws(() => parseKeyId('x'.repeat(65)), (e: unknown) => (e as ProtocolError).field === 'X-KeyID');
});

test('parseKeyId: keys_changed_at must be 1 to 16 digits and a safe integer', () => {
  for (const v of ['-AA', 'a1-AA', '1a-AA', '+1-AA', '1.5-AA', '1e3-AA', '0x10-AA', '12345678901234567-AA', '9999999999999999-AA', '9007199254740992-AA']) {
    assert.throws(() => parseKeyId(v), malformed, v);
  }
  assert.deepEqual(parseKeyId('9007199254740991-AA'), { keysChangedAt: 9_007_199_254_740_991, clientState: '00' });
  assert.deepEqual(parseKeyId('0000000000001000-AA'), { keysChangedAt: 1000, clientState: '00' }, '16 digits with leading zeros');
});

test('parseKeyId: no dash → invalid-credentials', () => {
  for (const v of ['1000', '1000AA', 'AA']) assert.throws(() => parseKeyId(v), malformed, v);
});

test('parseKeyId: the client state must be canonical base64url of at most 16 bytes', () => {
  // Not base64url's alphabet, padding, non-zero trailing bits, a length no encoding has.
  for (const v of ['1-AA==', '1-A+', '1-A/', '1-AB', '1-AAB', '1-A', '1-AAAAA', '1-AA.']) assert.throws(() => parseKeyId(v), malformed, v);
  const sixteen = Buffer.alloc(16, 0xab).toString('base64url');
  assert.deepEqual(parseKeyId(`1-${sixteen}`), { keysChangedAt: 1, clientState: 'ab'.repeat(16) });
  assert.throws(() => parseKeyId(`1-${Buffer.alloc(17, 0xab).toString('base64url')}`), malformed, '17 bytes');
});

test('parseKeyId: only the first dash separates; later ones belong to the base64url state', () => {
  // '-' is in base64url's alphabet: "-_8" is bytes fb ff.
  assert.deepEqual(parseKeyId('5--_8'), { keysChangedAt: 5, clientState: 'fbff' });
});

test('checkClientStateHeader: absent or empty passes; the same state in either case passes', () => {
  const keyId = { keysChangedAt: 1, clientState: 'aabb' };
  for (const sent of [undefined, '', 'aabb', 'AABB', 'AaBb']) assert.doesNotThrow(() => checkClientStateHeader(sent, keyId), String(sent));
});

test('checkClientStateHeader: another state → invalid-client-state with "Unauthorized"', () => {
  const entry = MOZILLA_ERRORS.clientStateMismatch.entry;
  for (const sent of ['aabc', 'aab', 'aabbcc', ' aabb']) {
    assert.throws(() => checkClientStateHeader(sent, { clientState: 'aabb' }), refused(InvalidClientState, /does not match X-KeyID/, entry), sent);
  }
  // A state sent beside an X-KeyID with an empty one is another state.
  assert.throws(() => checkClientStateHeader('aabb', { clientState: '' }), refused(InvalidClientState, /does not match/, entry));
});

test('accessTokenClaims: the scope is a space-separated list that must contain the configured scope', () => {
  assert.deepEqual(accessTokenClaims({ scope: SCOPE, sub: 'a1' }, SCOPE), { sub: 'a1' });
  assert.deepEqual(accessTokenClaims({ scope: `profile ${SCOPE} other`, sub: 'a1' }, SCOPE), { sub: 'a1' });
  const scopeRefused = refused(InvalidCredentials, /scope must include/);
  // Comma-separated (Mozilla's own split), a prefix, a longer scope, other types, absent.
  for (const scope of [`profile,${SCOPE}`, 'https://identity.mozilla.com/apps', `${SCOPE}x`, `${SCOPE}/sub`, '', [SCOPE], 7, null, undefined]) {
    assert.throws(() => accessTokenClaims({ scope, sub: 'a1' }, SCOPE), scopeRefused, JSON.stringify(scope));
  }
  assert.throws(() => accessTokenClaims({ sub: 'a1' }, SCOPE), scopeRefused, 'no scope claim');
});

test('accessTokenClaims: sub must be 1 to 64 characters of [A-Za-z0-9_-]', () => {
  for (const sub of ['a', 'A-z_09', 'f'.repeat(64)]) assert.equal(accessTokenClaims({ scope: SCOPE, sub }, SCOPE).sub, sub);
  const subRefused = refused(InvalidCredentials, /"sub" must be/);
  for (const sub of ['', 'f'.repeat(65), 'a@b', 'a b', 'a.b', 'é', 'a\n', 7, null, undefined, ['a']]) {
    assert.throws(() => accessTokenClaims({ scope: SCOPE, sub }, SCOPE), subRefused, JSON.stringify(sub));
  }
});

test('accessTokenClaims: fxa-generation, when set and not 0, is the generation', () => {
  assert.deepEqual(accessTokenClaims({ scope: SCOPE, sub: 'a', 'fxa-generation': 1_700_000_000_000 }, SCOPE), { sub: 'a', generation: 1_700_000_000_000 });
  // 0 means none, as an absent claim does (FxA leaves the claim out when it has none).
  assert.deepEqual(accessTokenClaims({ scope: SCOPE, sub: 'a', 'fxa-generation': 0 }, SCOPE), { sub: 'a' });
  assert.deepEqual(accessTokenClaims({ scope: SCOPE, sub: 'a' }, SCOPE), { sub: 'a' });
});

test('accessTokenClaims: an fxa-generation that is not a non-negative safe integer → invalid-generation', () => {
  for (const g of [-1, 1.5, '1000', null, true, 2 ** 53, Number.NaN, [1]]) {
    assert.throws(() => accessTokenClaims({ scope: SCOPE, sub: 'a', 'fxa-generation': g }, SCOPE), refused(InvalidGeneration, /non-negative integer/), String(g));
  }
});

test('accessTokenClaims: the scope is checked before sub, and sub before the generation', () => {
  assert.throws(() => accessTokenClaims({ sub: '', 'fxa-generation': -1 }, SCOPE), refused(InvalidCredentials, /scope/));
  assert.throws(() => accessTokenClaims({ scope: SCOPE, sub: '', 'fxa-generation': -1 }, SCOPE), refused(InvalidCredentials, /"sub"/));
});
