// The strict compact-JWS parser shared by assertions, access tokens and
// security event tokens: every branch, with the exact refusal of each.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidCredentials } from '../../lib/errors.js';
import { base64UrlDecode, critProblem, jsonSegment, parseCompactJws } from './jws.js';

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const jws = (header: unknown, payload: unknown, sig = 'c2ln') => `${b64(header)}.${b64(payload)}.${sig}`;
const ALGS = ['RS256', 'ES256'] as const;
/** Refused with InvalidCredentials and exactly `message`. */
const refusal = (message: string) => (e: unknown) => e instanceof InvalidCredentials && e.constructor === InvalidCredentials && e.message === message;

test('base64UrlDecode: canonical unpadded base64url only', () => {
  assert.equal(base64UrlDecode('aGk')?.toString(), 'hi');
  assert.equal(base64UrlDecode('aGVsbG8-_w')?.toString('hex'), '68656c6c6f3eff');
  assert.equal(base64UrlDecode('')?.length, 0);
  assert.equal(base64UrlDecode('AAAA')?.length, 3, 'a whole group');
  assert.equal(base64UrlDecode('aGk='), null, 'padding');
  assert.equal(base64UrlDecode('a+/b'), null, 'the standard alphabet');
  assert.equal(base64UrlDecode('aG k'), null, 'a blank');
  assert.equal(base64UrlDecode('aGk\u00e9'), null, 'a character outside the alphabet');
  assert.equal(base64UrlDecode('aGk\n'), null, 'a line break');
  assert.equal(base64UrlDecode('abcde'), null, 'a length of 4n + 1');
  assert.equal(base64UrlDecode('a'), null, 'one character');
  assert.equal(base64UrlDecode('aGl'), null, 'non-canonical trailing bits');
  assert.equal(base64UrlDecode('AB'), null, 'non-canonical trailing bits, one byte');
  assert.equal(base64UrlDecode('AA')?.length, 1);
});

test('jsonSegment: a base64url JSON object, UTF-8 checked on request', () => {
  assert.deepEqual(jsonSegment(b64({ a: 1 }), 'x'), { a: 1 });
  assert.throws(() => jsonSegment('a+b', 'x'), refusal('x is not base64url'));
  assert.throws(() => jsonSegment(b64('{'), 'x'), refusal('x is not JSON'));
  for (const v of ['[1]', 'null', '"s"', '7', 'true']) assert.throws(() => jsonSegment(b64(v), 'x'), refusal('x is not a JSON object'), v);
  const latin1 = Buffer.from('{"a":"\xe9"}', 'latin1').toString('base64url');
  assert.equal(jsonSegment(latin1, 'x').a, '\ufffd', 'lenient by default: the byte decodes as U+FFFD');
  assert.throws(() => jsonSegment(latin1, 'x', true), refusal('x is not UTF-8'));
  assert.deepEqual(jsonSegment(b64({ a: 'é' }), 'x', true), { a: 'é' });
});

test('critProblem: no crit is fine; b64 false never; crit only names b64, present, as a boolean', () => {
  assert.equal(critProblem({ alg: 'RS256' }), null);
  assert.equal(critProblem({ b64: 'ignored without crit' }), null);
  assert.equal(critProblem({ b64: true }), null);
  assert.equal(critProblem({ crit: ['b64'], b64: true }), null);
  assert.equal(critProblem({ b64: false }), '"b64": false (unencoded payload) is not supported');
  assert.equal(critProblem({ crit: ['b64'], b64: false }), '"b64": false (unencoded payload) is not supported');
  for (const crit of ['b64', [], [''], [7], ['b64', 5], ['b64', ''], {}, null]) {
    assert.equal(critProblem({ crit, b64: true }), '"crit" must be an array of names', JSON.stringify(crit));
  }
  assert.equal(critProblem({ crit: ['exp'], exp: 1 }), 'extension "exp" is not supported');
  assert.equal(critProblem({ crit: ['b64', 'exp'], b64: true, exp: 1 }), 'extension "exp" is not supported');
  assert.equal(critProblem({ crit: ['b64'] }), 'extension "b64" is missing');
  assert.equal(critProblem({ crit: ['b64'], b64: 1 }), '"b64" must be a boolean');
  assert.equal(critProblem({ crit: ['b64'], b64: null }), '"b64" must be a boolean');
});

test('parseCompactJws: header, payload, signing input and signature of a good one', () => {
  const compact = jws({ alg: 'ES256', kid: 'k' }, { a: 1 });
  const d = parseCompactJws(compact, 'token', ALGS);
  assert.equal(d.alg, 'ES256');
  assert.deepEqual(d.header, { alg: 'ES256', kid: 'k' });
  assert.deepEqual(d.payload, { a: 1 });
  assert.equal(d.signingInput, compact.slice(0, compact.lastIndexOf('.')));
  assert.equal(d.signature.toString(), 'sig');
  assert.equal(parseCompactJws(jws({ alg: 'RS256', crit: ['b64'], b64: true }, {}), 'token', ALGS).alg, 'RS256');
});

test('parseCompactJws: not three segments, or no signature → not a compact JWS', () => {
  const [h, p] = [b64({ alg: 'ES256' }), b64({})];
  for (const c of ['', '.', 'a', 'a.b', `${h}.${p}`, `${h}.${p}.`, `${h}.${p}.c2ln.`, `${h}.${p}.c2ln.c2ln`, `${h}..`, '..', '...', `${h}.`]) {
    assert.throws(() => parseCompactJws(c, 'token', ALGS), refusal('token is not a compact JWS'), c);
  }
  assert.throws(() => parseCompactJws(`${h}..c2ln`, 'token', ALGS), refusal('token payload is not JSON'), 'an empty payload is a segment, and not JSON');
});

test('parseCompactJws: each part refused with its own message, header first', () => {
  const latin1 = Buffer.from('{"alg":"ES256","x":"\xe9"}', 'latin1').toString('base64url');
  const cases: Array<[string, string, string]> = [
    ['header not base64url', `!!!.${b64({})}.c2ln`, 'token header is not base64url'],
    ['header empty', `.${b64({})}.c2ln`, 'token header is not JSON'],
    ['header not UTF-8', `${latin1}.${b64({})}.c2ln`, 'token header is not UTF-8'],
    ['header not JSON', `${b64('{x')}.${b64({})}.c2ln`, 'token header is not JSON'],
    ['header an array', `${b64([1])}.${b64({})}.c2ln`, 'token header is not a JSON object'],
    ['payload not base64url', `${b64({ alg: 'ES256' })}.a+b.c2ln`, 'token payload is not base64url'],
    ['payload not JSON', `${b64({ alg: 'ES256' })}.${b64('x')}.c2ln`, 'token payload is not JSON'],
    ['payload a string', `${b64({ alg: 'ES256' })}.${b64('"s"')}.c2ln`, 'token payload is not a JSON object'],
    ['signature padded', `${b64({ alg: 'ES256' })}.${b64({})}.c2l=`, 'token signature is not base64url'],
    ['signature non-canonical', `${b64({ alg: 'ES256' })}.${b64({})}.c2m`, 'token signature is not base64url'],
    ['no alg', jws({}, {}), 'token algorithm must be one of RS256, ES256'],
    ['alg none', jws({ alg: 'none' }, {}), 'token algorithm must be one of RS256, ES256'],
    ['alg HS256', jws({ alg: 'HS256' }, {}), 'token algorithm must be one of RS256, ES256'],
    ['alg in another case', jws({ alg: 'rs256' }, {}), 'token algorithm must be one of RS256, ES256'],
    ['alg not a string', jws({ alg: ['RS256'] }, {}), 'token algorithm must be one of RS256, ES256'],
    ['crit', jws({ alg: 'ES256', crit: ['exp'], exp: 1 }, {}), 'token header: extension "exp" is not supported'],
    ['b64 false', jws({ alg: 'ES256', b64: false }, {}), 'token header: "b64": false (unencoded payload) is not supported'],
    ['a bad header and a bad payload: the header', `${b64('[')}.a+b.c2ln`, 'token header is not JSON'],
  ];
  for (const [what, c, message] of cases) assert.throws(() => parseCompactJws(c, 'token', ALGS), refusal(message), what);
  assert.equal(parseCompactJws(jws({ alg: 'EdDSA' }, {}), 'cert', ['EdDSA', 'DS128'] as const).alg, 'EdDSA', 'the caller names the algorithms');
});

test('parseCompactJws: the payload is UTF-8 checked only when asked (JWT claims), the header always', () => {
  const payload = Buffer.from('{"note":"\xff"}', 'latin1').toString('base64url');
  const compact = `${b64({ alg: 'ES256' })}.${payload}.c2ln`;
  assert.equal(parseCompactJws(compact, 'assertion', ALGS).payload.note, '\ufffd');
  assert.throws(() => parseCompactJws(compact, 'token', ALGS, true), refusal('token payload is not UTF-8'));
});
