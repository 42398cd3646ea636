// Fuzzing through real HTTP against the running system (the embedded stack):
// the login path with random paths, Accept, X-Client-State and Authorization
// headers, and the gateway with mutated Hawk headers and request targets.
// Never a 5xx; always the status DESIGN §3/§6 documents for the first fault,
// with the JSON error body. FUZZ_RUNS sets the cases per property.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { call, grpcClient } from '../lib/grpc.js';
import { TEST_AUTH } from './support/services.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { hawkHeader, parseHawkHeader } from '../lib/hawk.js';
import { fuzzParams, headerSafe, mutate, mutationsArb } from './support/fuzz.js';
import { APP, isErrorBody, rawRequest, startTestStack, TOKEN_PATH, type RawResponse, type TestStack, type Token } from './support/stack.js';

let stack: TestStack;
let token: Token;
let emails = 0;

before(async () => {
  stack = await startTestStack();
  // Every valid case is a new user: with FUZZ_RUNS=100000 they outgrow the stack's node (10 000 users),
  // and a full node is a correct 503. Room for all of them keeps the expected answers fixed.
  const nodes = grpcClient(NodeAssignClient, stack.nodeAssignAddr, TEST_AUTH);
  try {
    await call(nodes, nodes.updateNode, { service: APP, url: stack.nodeUrl, capacity: 10_000_000 }, { deadlineMs: 5000, retryAfter: 1 });
  } finally {
    nodes.close();
  }
  const res = await stack.login('fuzz-owner@example.com');
  assert.equal(res.status, 200, res.text);
  token = res.json;
});

after(async () => {
  await stack?.close();
});

const LOGIN_STATUS_STRINGS = ['error', 'invalid-credentials', 'invalid-timestamp', 'invalid-generation', 'invalid-client-state', 'new-users-disabled'];

/** What every answer must look like, whatever the request. */
function assertWellFormed(res: RawResponse, what: unknown): void {
  const context = `${res.status} ${res.text.slice(0, 200)} for ${JSON.stringify(what).slice(0, 400)}`;
  assert.ok(res.status < 500, `server error: ${context}`);
  assert.match(String(res.headers['content-type']), /^application\/json/, context);
  if (res.status !== 200) {
    assert.ok(isErrorBody(res.json), `error body: ${context}`);
    assert.ok(LOGIN_STATUS_STRINGS.includes(res.json.status), `status string: ${context}`);
  }
}

// Accept values and whether they admit JSON (DESIGN §3 step 2).
const ACCEPT: Array<[string | undefined, boolean]> = [
  [undefined, true],
  ['application/json', true],
  ['*/*', true],
  ['application/*', true],
  ['text/html, application/json;q=0.5', true],
  ['text/html', false],
  ['application/xml', false],
  ['application/json;q=0', false],
  ['image/*', false],
];

const CLIENT_STATE = /^[a-zA-Z0-9._-]{1,32}$/;

test('login: random Accept, X-Client-State and Authorization → the status of the first fault, never a 5xx', async () => {
  const clientState = fc.option(
    fc.oneof(fc.stringMatching(/^[a-zA-Z0-9._-]{1,32}$/), fc.stringMatching(/^[a-zA-Z0-9._-]{30,40}$/), fc.string({ unit: 'binary', maxLength: 40 }).map(headerSafe)),
    { nil: undefined },
  );
  const authKind = fc.constantFrom('valid', 'mutated', 'random', 'none') as fc.Arbitrary<'valid' | 'mutated' | 'random' | 'none'>;
  const cases = fc.record({
    accept: fc.nat({ max: ACCEPT.length - 1 }),
    clientState,
    authKind,
    mutations: mutationsArb,
    random: fc.string({ unit: 'binary', maxLength: 300 }).map(headerSafe),
    query: fc.constantFrom('', '?duration=60', '?duration=-1', '?duration=%zz', '?x=%E0%A4%A'),
  });
  let ok = 0;
  await fc.assert(
    fc.asyncProperty(cases, async (c) => {
      const email = `fuzz-login-${++emails}@example.com`;
      const valid = await stack.authorization(email);
      const authorization = c.authKind === 'valid' ? valid : c.authKind === 'mutated' ? headerSafe(mutate(valid, c.mutations)) : c.authKind === 'random' ? c.random : undefined;
      const headers: Record<string, string> = {};
      const [accept, acceptsJson] = ACCEPT[c.accept];
      if (accept !== undefined) headers.Accept = accept;
      if (c.clientState !== undefined) headers['X-Client-State'] = c.clientState;
      if (authorization !== undefined) headers.Authorization = authorization;
      const res = await rawRequest(stack.loginUrl, { target: TOKEN_PATH + c.query, headers });
      assertWellFormed(res, { ...c, headers });
      // HTTP drops the header value's surrounding spaces and tabs before anyone reads it.
      const sentState = c.clientState?.replace(/^[ \t]+|[ \t]+$/g, '') ?? '';
      // Valid exactly when the scheme (any case) and the credentials are intact, whatever the spacing.
      const parts = (h: string) => /^(\S+)[ \t]+(\S+)[ \t]*$/.exec(h.trim());
      const intact = (h: string | undefined) => {
        const p = h === undefined ? null : parts(h);
        return p !== null && ['assertion', 'browserid'].includes(p[1].toLowerCase()) && p[2] === parts(valid)![2];
      };
      if (!acceptsJson) assert.equal(res.status, 406, res.text);
      else if (sentState !== '' && !CLIENT_STATE.test(sentState)) assert.equal(res.status, 400, res.text);
      else if (intact(authorization)) assert.equal(res.status, 200, res.text);
      else assert.equal(res.status, 401, res.text);
      if (res.status === 200) {
        ok++;
        assert.deepEqual(Object.keys(res.json).sort(), ['api_endpoint', 'duration', 'hashalg', 'hashed_fxa_uid', 'id', 'key', 'uid']);
      }
      if (res.status === 200 || res.status === 401) assert.match(String(res.headers['x-timestamp']), /^\d+$/);
    }),
    fuzzParams(400),
  );
  assert.ok(ok > 0, 'some requests are valid (the property is not vacuous)');
});

test('login: random paths and methods → 404, 405 or a token answer, never a 5xx', async () => {
  const segment = fc.oneof(
    fc.constantFrom('1.0', 'sync', '1.5', '', '.', '..', '%2e%2e', '%E0%A4%A', '%00', 'sy%6ec', '%2F'),
    fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)).filter((ch) => ch !== '/' && ch !== '?' && ch !== '#'), maxLength: 12 }),
  );
  const target = fc.array(segment, { minLength: 0, maxLength: 5 }).map((s) => `/${s.join('/')}`);
  const method = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH');
  const authorization = await stack.authorization('fuzz-paths@example.com');
  await fc.assert(
    fc.asyncProperty(target, method, async (t, m) => {
      const res = await rawRequest(stack.loginUrl, { method: m, target: t, headers: { Authorization: authorization } });
      assert.ok(res.status < 500, `${m} ${t} → ${res.status} ${res.text}`);
      assert.ok([200, 400, 401, 404, 405].includes(res.status), `${m} ${t} → ${res.status} ${res.text}`);
      if (m !== 'HEAD') {
        assert.match(String(res.headers['content-type']), /^application\/json/, `${m} ${t}`);
        if (res.status !== 200) assert.ok(isErrorBody(res.json), `${m} ${t} → ${res.text}`);
      }
      if (res.status === 405) assert.equal(res.headers.allow, 'GET, HEAD');
    }),
    fuzzParams(600),
  );
});

test('gateway: mutated Hawk headers and targets → 400 or 401 with the error body; 200 only for what was signed', async () => {
  const uidPath = new URL(token.api_endpoint).pathname;
  const target = fc.oneof(
    fc.constant(`${uidPath}/storage/x?full=1`),
    fc.stringMatching(/^[a-z0-9/._%?=&-]{0,20}$/).map((s) => `${uidPath}/${s}`),
    fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 30 }).map((s) => `/${s}`),
  );
  let nonce = 0;
  let passed = 0;
  await fc.assert(
    fc.asyncProperty(target, fc.constantFrom('none', 'header', 'target'), mutationsArb, fc.constantFrom('GET', 'DELETE', 'POST'), async (t, what, ms, method) => {
      const body = method === 'POST' ? '{"n":1}' : undefined;
      let header: string;
      try {
        header = hawkHeader({ id: token.id, key: token.key, method, url: `${stack.gatewayUrl}${t}`, nonce: `fz${++nonce}`, ...(body ? { payload: body, contentType: 'application/json' } : {}) });
      } catch {
        fc.pre(false);
        return;
      }
      // hawkHeader signs the target as URL parsing normalises it ("/a/./b" → "/a/b"); keep targets that need none.
      const normalised = new URL(`${stack.gatewayUrl}${t}`);
      fc.pre(normalised.pathname + normalised.search === t);
      const sentHeader = what === 'header' ? headerSafe(mutate(header, ms)) : header;
      // Node's own HTTP parser answers a target that is not a path with a bare 400 before any service code runs.
      const sentTarget = what === 'target' ? `/${mutate(t, ms).replace(/[^\x21-\x7e]/g, '').replace(/^\/+/, '')}` : t;
      const headers: Record<string, string> = { Authorization: sentHeader, ...(body ? { 'Content-Type': 'application/json' } : {}) };
      const res = await rawRequest(stack.gatewayUrl, { method, target: sentTarget, headers, body });
      const context = `${res.status} ${res.text.slice(0, 200)} for ${method} ${sentTarget} ${sentHeader}`;
      assert.ok(res.status < 500, context);
      // 204: the demo app's answer to the purge's DELETE /<version>/<uid> (no body to compare).
      if (res.status === 200 || (res.status === 204 && method === 'DELETE')) {
        passed++;
        assert.equal(new URL(sentTarget, 'http://x').pathname.split('/')[2], String(token.uid), context);
        // Same signed attributes (spacing may differ) and the target it was signed for.
        const a = parseHawkHeader(sentHeader);
        const b = parseHawkHeader(header);
        assert.deepEqual([a.id, a.mac, a.ts, a.nonce, a.hash, a.ext], [b.id, b.mac, b.ts, b.nonce, b.hash, b.ext], context);
        assert.equal(sentTarget, t, context);
        if (res.status === 200) assert.equal(res.json?.uid, String(token.uid), context);
      } else {
        assert.ok([400, 401].includes(res.status), context);
        assert.ok(isErrorBody(res.json), context);
        assert.match(String(res.headers['x-timestamp']), /^\d+$/, context);
        if (res.status === 401) assert.match(String(res.headers['www-authenticate']), /^Hawk/, context);
      }
    }),
    fuzzParams(600),
  );
  assert.ok(passed > 0, 'some signed requests pass (the property is not vacuous)');
});
