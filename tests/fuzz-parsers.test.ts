// Function-level fuzzing of every parser that reads client input: the
// Authorization/assertion decoding, the Hawk header, the token, X-Client-State
// and the gateway's request check. Each either returns or throws one of its
// documented protocol errors, never anything else; mutations of a valid input
// never turn into a different valid one. FUZZ_RUNS sets the cases per property.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { BadRequest, InvalidCredentials, InvalidGeneration, InvalidTimestamp, Unauthorized } from '../lib/errors.js';
import { hawkHeader, parseHawkHeader } from '../lib/hawk.js';
import { encodeToken, makeToken, nodeSecrets, parseToken } from '../lib/token.js';
import { DsaPublicKey } from '../lib/dsa.js';
import { requestProblem } from '../services/directory/rules.js';
import {
  assertionClaims,
  certificateClaims,
  decodeJws,
  parseAuthorization,
  parseGeneration,
  userPublicKey,
} from '../services/login/assertion.js';
import { isValidClientState } from '../services/login/rules.js';
import { authenticate, guardedNode, tokenCache } from '../services/node-gateway/auth.js';
import { fuzzParams, mutate, mutationsArb, outcome } from './support/fuzz.js';

const NODE_URL = 'https://node-1.fuzz.example';
const MASTERS = ['fuzz-master-secret-0123456789abcdef'];
const SECRET = nodeSecrets(MASTERS, NODE_URL)[0];
const NOW_S = Math.floor(Date.now() / 1000);
const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

/** Any string: full Unicode (lone surrogates included), or ASCII, or the grammar's own characters. */
const anyString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.string({ unit: 'binary-ascii', maxLength: 200 }),
  fc.string({ unit: fc.constantFrom('a', 'Z', '0', '~', '.', ',', '=', '"', ' ', '-', '_', '\\', '\t'), maxLength: 80 }),
);

/** A syntactically plausible compact JWS with arbitrary JSON in its parts. */
const jwsLike = fc
  .tuple(
    fc.oneof(fc.constantFrom({ alg: 'ES256' }, { alg: 'RS256' }, { alg: 'EdDSA' }, { alg: 'none' }, { alg: 'HS256' }), fc.jsonValue()),
    fc.jsonValue(),
    fc.oneof(fc.base64String({ maxLength: 90 }).map((s) => s.replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_')), fc.string({ maxLength: 20 })),
  )
  .map(([h, p, s]) => `${b64(h)}.${b64(p)}.${s}`);

const CREDENTIALS_ERRORS = [Unauthorized, InvalidCredentials] as const;

test('parseAuthorization: any header → a certificate and an assertion, or 401', () => {
  fc.assert(
    fc.property(fc.oneof(anyString, anyString.map((s) => `Assertion ${s}`), fc.tuple(jwsLike, jwsLike).map(([c, a]) => `BrowserID ${c}~${a}`)), (header) => {
      const r = outcome(() => parseAuthorization(header), CREDENTIALS_ERRORS, header);
      if (r) {
        assert.ok(r.certificate !== '' && r.assertion !== '' && !r.certificate.includes('~') && !r.assertion.includes('~'));
        assert.ok(['Assertion', 'BrowserID'].includes(r.scheme));
      }
    }),
    fuzzParams(2000),
  );
});

test('decodeJws, certificateClaims, assertionClaims, userPublicKey, parseGeneration: only InvalidCredentials / InvalidGeneration', () => {
  fc.assert(
    fc.property(fc.oneof(jwsLike, anyString), fc.jsonValue(), fc.jsonValue(), (compact, claims, key) => {
      const decoded = outcome(() => decodeJws(compact, 'certificate'), [InvalidCredentials], compact);
      if (decoded) assert.ok(['RS256', 'ES256', 'EdDSA', 'Ed25519'].includes(decoded.alg));
      const payload = typeof claims === 'object' && claims !== null && !Array.isArray(claims) ? (claims as Record<string, unknown>) : { claims };
      outcome(() => certificateClaims({ ...payload, 'public-key': key }, 'fxa-generation'), [InvalidCredentials], payload);
      outcome(() => assertionClaims(payload, ['https://aud.example']), [InvalidCredentials], payload);
      outcome(() => userPublicKey(key), [InvalidCredentials], key);
      const g = outcome(() => parseGeneration(claims), [InvalidGeneration], claims);
      if (g !== undefined) assert.ok(Number.isSafeInteger(g) && g >= 0);
    }),
    fuzzParams(2000),
  );
});

test('userPublicKey: structured keys of every kind, legacy decimal RSA included', () => {
  const member = fc.oneof(fc.base64String({ maxLength: 100 }).map((s) => s.replace(/=+$/, '')), anyString, fc.integer(), fc.constant(undefined));
  const hexMember = fc.oneof(fc.bigInt({ min: 0n, max: 1n << 2100n }).map((v) => v.toString(16)), anyString, fc.integer(), fc.constant(undefined));
  const keyArb = fc.oneof(
    fc.record({ kty: fc.constantFrom('RSA', 'EC', 'OKP', 'oct', 'rsa'), crv: fc.constantFrom('P-256', 'P-384', 'Ed25519', 'X25519', undefined), n: member, e: member, x: member, y: member }),
    fc.record({ algorithm: fc.constantFrom('RS', 'DS', 'rs'), n: fc.oneof(fc.bigInt({ min: 0n, max: 1n << 2100n }).map(String), anyString), e: fc.oneof(fc.constantFrom('65537', '3', '0', '-1', '1e5'), anyString) }),
    fc.record({ algorithm: fc.constant('DS'), p: hexMember, q: hexMember, g: hexMember, y: hexMember }),
  );
  fc.assert(
    fc.property(keyArb, (key) => {
      const jwk = outcome(() => userPublicKey(key), [InvalidCredentials], key);
      if (jwk) {
        assert.ok(jwk instanceof DsaPublicKey || ['RSA', 'EC', 'OKP'].includes(jwk.kty));
        assert.equal((jwk as Record<string, unknown>).d, undefined, 'never a private member');
      }
    }),
    fuzzParams(2000),
  );
});

test('parseHawkHeader: any header → the attributes, 400 or 401; what it accepts it reads back exactly', () => {
  const name = fc.oneof(fc.constantFrom('id', 'ts', 'nonce', 'mac', 'hash', 'ext', 'app', 'dlg'), fc.string({ unit: 'binary-ascii', maxLength: 6 }));
  const value = fc.oneof(fc.string({ unit: 'binary-ascii', maxLength: 30 }), fc.stringMatching(/^\d{1,12}$/), fc.string({ unit: 'binary', maxLength: 10 }));
  const sep = fc.constantFrom(', ', ',', ' ,', ',  ', ' ', '', ',,', '\t,');
  const grammarLike = fc
    .tuple(fc.constantFrom('Hawk', 'hawk', 'HAWK', 'Hawk2', 'Bearer', ''), fc.constantFrom(' ', '  ', '\t', ''), fc.array(fc.tuple(name, value, sep), { maxLength: 10 }))
    .map(([scheme, space, attrs]) => `${scheme}${space}${attrs.map(([n, v, s]) => `${n}="${v}"${s}`).join('')}`);
  fc.assert(
    fc.property(fc.oneof(grammarLike, anyString, fc.string({ minLength: 4000, maxLength: 5000 })), (header) => {
      const attrs = outcome(() => parseHawkHeader(header), [BadRequest, Unauthorized], header);
      if (attrs) {
        for (const k of ['id', 'ts', 'nonce', 'mac'] as const) assert.ok(attrs[k], k);
        assert.match(attrs.ts, /^\d+$/);
        for (const v of Object.values(attrs)) assert.ok(header.includes(`"${v}"`), 'every value is read verbatim');
      }
    }),
    fuzzParams(3000),
  );
});

test('hawkHeader → parseHawkHeader round-trips every value the grammar allows', () => {
  const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)).filter((c) => c !== '"' && c !== '\\'), minLength: 1, maxLength: 40 });
  fc.assert(
    fc.property(printable, printable, fc.option(printable, { nil: undefined }), fc.option(fc.tuple(printable, fc.option(printable, { nil: undefined })), { nil: undefined }), (id, nonce, ext, appDlg) => {
      const header = hawkHeader({ id, key: 'k', method: 'GET', url: `${NODE_URL}/1.5/1`, nonce, ext, app: appDlg?.[0], dlg: appDlg?.[1] });
      const attrs = parseHawkHeader(header);
      assert.equal(attrs.id, id);
      assert.equal(attrs.nonce, nonce);
      assert.equal(attrs.ext, ext || undefined);
      assert.equal(attrs.app, appDlg?.[0]);
    }),
    fuzzParams(1000),
  );
});

test('parseToken: any string or signed JSON → the payload, InvalidCredentials or InvalidTimestamp', () => {
  const signedJson = fc
    .oneof(
      fc.jsonValue(),
      fc.record({ uid: fc.oneof(fc.integer(), fc.double(), fc.string()), node: fc.oneof(fc.constant(NODE_URL), fc.string()), expires: fc.oneof(fc.integer({ min: NOW_S - 1e6, max: NOW_S + 1e6 }), fc.double(), fc.string()), salt: fc.oneof(fc.stringMatching(/^[0-9a-f]{6}$/), fc.integer()) }, { requiredKeys: [] }),
    )
    .map((v) => encodeToken(JSON.stringify(v) ?? 'null', SECRET));
  fc.assert(
    fc.property(fc.oneof(signedJson, anyString, fc.base64String({ maxLength: 300 })), (id) => {
      const r = outcome(() => parseToken(id, [SECRET], NOW_S), [InvalidCredentials, InvalidTimestamp], id);
      if (r) {
        assert.ok(Number.isSafeInteger(r.payload.uid) && r.payload.uid >= 0);
        assert.equal(typeof r.payload.node, 'string');
        assert.ok(r.payload.expires > NOW_S);
        assert.equal(r.secret, SECRET);
      }
    }),
    fuzzParams(3000),
  );
});

test('parseToken: a mutated valid token never verifies (padding aside)', () => {
  const { id } = makeToken({ uid: 42, node: NODE_URL, expires: NOW_S + 600, salt: 'a1b2c3' }, SECRET);
  const bare = (s: string) => s.replace(/=+$/, '');
  fc.assert(
    fc.property(mutationsArb, (ms) => {
      const mutated = mutate(id, ms);
      const r = outcome(() => parseToken(mutated, [SECRET], NOW_S), [InvalidCredentials, InvalidTimestamp], mutated);
      if (r) assert.equal(bare(mutated), bare(id), `a different token verified: ${mutated}`);
    }),
    fuzzParams(3000),
  );
});

test('X-Client-State: valid exactly when DESIGN’s pattern (or empty) matches; the directory agrees', () => {
  const design = /^[a-zA-Z0-9._-]{1,32}$/;
  fc.assert(
    fc.property(fc.oneof(anyString, fc.stringMatching(/^[a-zA-Z0-9._-]{0,40}$/)), (value) => {
      const valid = isValidClientState(value);
      assert.equal(valid, value === '' || design.test(value), value);
      const problem = requestProblem({ service: 'sync', email: 'a@b.example', clientState: value });
      assert.equal(problem === null, valid, value);
      if (problem) assert.equal(problem.constructor, BadRequest);
    }),
    fuzzParams(3000),
  );
});

test('gateway authenticate: any target and header → a caller, 400 or 401; a mutated signed request never passes', () => {
  const node = guardedNode(NODE_URL, MASTERS, 'derived');
  const tokens = tokenCache();
  const { id, key } = makeToken({ uid: 7, node: NODE_URL, expires: NOW_S + 600, salt: 'abcdef' }, SECRET);
  let seq = 0;
  const target = fc.oneof(
    fc.constant('/1.5/7/storage/x?full=1'),
    fc.string({ unit: 'binary-ascii', maxLength: 40 }),
    fc.stringMatching(/^\/[a-z0-9./%\\?=&]{0,30}$/),
  );
  let passed = 0;
  fc.assert(
    fc.property(target, mutationsArb, fc.constantFrom('none', 'header', 'target'), (tgt, ms, what) => {
      const url = `${NODE_URL}${tgt.startsWith('/') ? tgt : `/${tgt}`}`;
      let header: string;
      try {
        header = hawkHeader({ id, key, method: 'GET', url, nonce: `n${++seq}` });
      } catch {
        return; // not a URL our client can sign
      }
      const signedTarget = new URL(url).pathname + new URL(url).search;
      const sent = what === 'header' ? mutate(header, ms) : header;
      const sentTarget = what === 'target' ? mutate(signedTarget, ms) : signedTarget;
      const req = { method: 'GET', target: sentTarget, authorization: sent };
      const caller = outcome(
        () => authenticate(req, node, { skewSeconds: 60, tokens }),
        [BadRequest, Unauthorized, InvalidCredentials, InvalidTimestamp],
        req,
      );
      if (caller) {
        assert.equal(sentTarget, signedTarget, 'only the signed target passes');
        const a = parseHawkHeader(sent);
        const b = parseHawkHeader(header);
        assert.deepEqual([a.id, a.mac, a.ts, a.nonce, a.hash, a.ext], [b.id, b.mac, b.ts, b.nonce, b.hash, b.ext], 'only the signed attributes pass');
        assert.equal(caller.uid, 7);
        const segments = sentTarget.split('?', 1)[0].split('/');
        // The uid segment as sent, or percent-decoded (as the application will read it).
        assert.ok(segments[1] !== '' && [segments[2], decodeURIComponent(segments[2] ?? '')].includes('7'), `only a path under /<app_version>/7 passes: ${sentTarget}`);
        passed++;
      }
    }),
    fuzzParams(3000),
  );
  assert.ok(passed > 0, 'some unmutated requests to the uid’s own path pass (the property is not vacuous)');
});

test('gateway authenticate: a correctly signed request passes exactly when its path is under /<app_version>/<token uid>', () => {
  const node = guardedNode(NODE_URL, MASTERS, 'derived');
  const { id, key } = makeToken({ uid: 7, node: NODE_URL, expires: NOW_S + 600, salt: 'abcdef' }, SECRET);
  let seq = 0;
  // Every request is correctly signed, so only the uid-in-path rule can tell these apart
  // (no percent-encoding here: whether '%37' names uid 7 is the target rule's business).
  const version = fc.constantFrom('1.5', '1.0', 'x', '');
  const uid = fc.oneof(fc.constantFrom('7', '8', '70', '07', '', '-7', '7.0', '+7', 'seven'), fc.nat({ max: 100 }).map(String));
  const rest = fc.constantFrom('', '/', '/storage', '/storage/x?full=1', '?q=7', '?/1.5/7', '/7', '//7');
  const checked = { passed: 0, refused: 0 };
  fc.assert(
    fc.property(version, uid, rest, (v, u, r) => {
      const target = `/${v}/${u}${r}`;
      const req = { method: 'GET', target, authorization: hawkHeader({ id, key, method: 'GET', url: `${NODE_URL}${target}`, nonce: `p${++seq}` }) };
      const caller = outcome(() => authenticate(req, node, { skewSeconds: 60 }), [InvalidCredentials], req);
      assert.equal(caller !== undefined, v !== '' && u === '7', `${target}: ${caller ? 'passed' : 'refused'}`);
      checked[caller ? 'passed' : 'refused']++;
    }),
    fuzzParams(1000),
  );
  assert.ok(checked.passed > 0 && checked.refused > 0, `both outcomes exercised: ${JSON.stringify(checked)}`);
});
