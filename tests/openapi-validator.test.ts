// The small JSON Schema validator and the response checker that
// tests/openapi.test.ts relies on: they must reject what is wrong, or that test proves nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { validate, resolveRef, type Schema } from './support/json-schema.js';
import { loadOpenApi, pathTemplate, responseProblems, type ObservedResponse } from './support/openapi.js';

const root = {
  components: {
    schemas: {
      Item: { type: 'object', required: ['n'], additionalProperties: false, properties: { n: { type: 'integer', minimum: 1 } } },
    },
  },
};
const schema: Schema = {
  type: 'object',
  required: ['name', 'kind', 'items'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', pattern: '^[a-z]+$' },
    kind: { type: 'string', enum: ['a', 'b'] },
    items: { type: 'array', minItems: 1, items: { $ref: '#/components/schemas/Item' } },
    extra: { type: 'object', additionalProperties: { type: 'boolean' } },
  },
};
const good = { name: 'abc', kind: 'a', items: [{ n: 1 }, { n: 2 }], extra: { x: true } };

test('a conforming value has no problems', () => {
  assert.deepEqual(validate(schema, good, root), []);
});

test('each keyword rejects what breaks it, and says where', () => {
  const cases: Array<[unknown, RegExp]> = [
    ['not an object', /^\$: expected object, got string$/],
    [null, /expected object, got null/],
    [[good], /expected object, got array/],
    [{ ...good, name: undefined }, /\$\.name: expected string/],
    [(({ name: _n, ...rest }) => rest)(good), /missing required property "name"/],
    [{ ...good, name: 'ABC' }, /\$\.name: "ABC" does not match/],
    [{ ...good, kind: 'c' }, /\$\.kind: "c" is not one of \["a","b"\]/],
    [{ ...good, items: [] }, /\$\.items: 0 items, at least 1 expected/],
    [{ ...good, items: [{ n: 1.5 }] }, /\$\.items\[0\]\.n: expected integer, got number/],
    [{ ...good, items: [{ n: 0 }] }, /\$\.items\[0\]\.n: 0 is below the minimum 1/],
    [{ ...good, items: [{ n: 1, m: 2 }] }, /\$\.items\[0\]\.m: property not allowed/],
    [{ ...good, surprise: 1 }, /\$\.surprise: property not allowed/],
    [{ ...good, extra: { x: 'yes' } }, /\$\.extra\.x: expected boolean/],
  ];
  for (const [value, expected] of cases) {
    const problems = validate(schema, value, root);
    assert.ok(problems.some((p) => expected.test(p)), `${JSON.stringify(value)} → ${JSON.stringify(problems)}`);
  }
});

test('a keyword outside the subset, an unknown type or a dangling $ref throws instead of passing', () => {
  assert.throws(() => validate({ oneOf: [] }, 1), /unsupported schema keyword "oneOf"/);
  assert.throws(() => validate({ type: 'uuid' }, 'x'), /unsupported type uuid/);
  assert.throws(() => validate({ $ref: '#/components/schemas/Nope' }, 1, root), /unresolvable \$ref/);
  assert.throws(() => resolveRef(root, 'other.yaml#/x'), /only local/);
});

test('the document: every $ref resolves, and its Token schema refuses a wrong body', () => {
  const doc = loadOpenApi();
  assert.match(doc.openapi, /^3\./);
  const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1]);
  assert.ok(refs.length > 10);
  for (const ref of refs) assert.doesNotThrow(() => resolveRef(doc, ref), ref);
  const token = { $ref: '#/components/schemas/Token' };
  const body = { id: 'abc=', key: `${'k'.repeat(43)}=`, uid: 7, api_endpoint: 'https://n.example/1.5/7', duration: 3600, hashalg: 'sha256' };
  assert.deepEqual(validate(token, body, doc), []);
  assert.notDeepEqual(validate(token, { ...body, hashalg: 'md5' }, doc), []);
  assert.notDeepEqual(validate(token, { ...body, uid: '7' }, doc), []);
  assert.notDeepEqual(validate(token, { ...body, key: 'short' }, doc), []);
  assert.notDeepEqual(validate(token, { ...body, secret: 'leak' }, doc), []);
});

test('the response checker: undocumented statuses, missing or wrong headers, wrong bodies and content types', () => {
  const doc = loadOpenApi();
  assert.equal(pathTemplate(doc, '/1.0/sync/1.5'), '/1.0/{app}/{version}');
  assert.equal(pathTemplate(doc, '/1.0/sync'), undefined);
  const headers = (extra: Record<string, string[]> = {}) =>
    new Map(Object.entries({ 'content-type': ['application/json'], 'x-timestamp': ['1700000000'], 'x-request-id': ['r-1'], ...extra }));
  const error = JSON.stringify({ status: 'error', errors: [{ location: 'url', name: '', description: 'no' }] });
  const res = (o: Partial<ObservedResponse>): ObservedResponse => ({ method: 'GET', path: '/1.0/sync/1.5', status: 404, headers: headers(), text: error, ...o });

  assert.deepEqual(responseProblems(doc, res({})), []);
  const cases: Array<[Partial<ObservedResponse>, RegExp]> = [
    [{ path: '/elsewhere' }, /path not in the document/],
    [{ status: 418 }, /status not documented/],
    [{ method: 'PATCH', status: 404 }, /method not in the document/],
    [{ headers: headers({ 'x-timestamp': [] }).set('x-timestamp', ['soon']) }, /header x-timestamp: expected integer/],
    [{ headers: (() => { const h = headers(); h.delete('x-request-id'); return h; })() }, /required header x-request-id missing/],
    [{ status: 401, headers: headers() }, /required header www-authenticate missing/],
    [{ status: 401, headers: headers({ 'www-authenticate': ['Assertion', 'Basic'] }) }, /"Basic" is not one of/],
    [{ headers: headers({ 'retry-after': ['5'] }) }, /header retry-after sent but not documented/],
    [{ status: 503, headers: headers() }, /required header retry-after missing/],
    [{ text: JSON.stringify({ status: 'invalid-credentials', errors: [] }) }, /"invalid-credentials" is not one of/],
    [{ text: JSON.stringify({ status: 'error', errors: [] }) }, /0 items, at least 1/],
    [{ text: '<html>' }, /body is not JSON/],
    [{ headers: headers({ 'content-type': ['text/html'] }) }, /content type text\/html is not one of application\/json/],
  ];
  for (const [o, expected] of cases) {
    const problems = responseProblems(doc, res(o));
    assert.ok(problems.some((p) => expected.test(p)), `${JSON.stringify(o, (_, v) => (v instanceof Map ? Object.fromEntries(v) : v))} → ${JSON.stringify(problems)}`);
  }
});
