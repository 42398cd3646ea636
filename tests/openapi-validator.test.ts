// The schema validation (Ajv) and the response checker that tests/openapi.test.ts
// relies on: they must reject what is wrong, or that test proves nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadOpenApi, pathTemplate, resolveRef, responseProblems, validate, type ObservedResponse, type Schema } from './support/openapi.js';

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
    ['not an object', /^\$: must be object$/],
    [null, /^\$: must be object$/],
    [[good], /^\$: must be object$/],
    [{ ...good, name: 1 }, /^\$\.name: must be string$/],
    [(({ name: _n, ...rest }) => rest)(good), /^\$: must have required property 'name'$/],
    [{ ...good, name: 'ABC' }, /^\$\.name: must match pattern "\^\[a-z\]\+\$"$/],
    [{ ...good, kind: 'c' }, /^\$\.kind: must be equal to one of the allowed values \["a","b"\]$/],
    [{ ...good, items: [] }, /^\$\.items: must NOT have fewer than 1 items$/],
    [{ ...good, items: [{ n: 1.5 }] }, /^\$\.items\.0\.n: must be integer$/],
    [{ ...good, items: [{ n: 0 }] }, /^\$\.items\.0\.n: must be >= 1$/],
    [{ ...good, items: [{ n: 1, m: 2 }] }, /^\$\.items\.0: must NOT have additional properties \("m"\)$/],
    [{ ...good, surprise: 1 }, /^\$: must NOT have additional properties \("surprise"\)$/],
    [{ ...good, extra: { x: 'yes' } }, /^\$\.extra\.x: must be boolean$/],
  ];
  for (const [value, expected] of cases) {
    const problems = validate(schema, value, root);
    assert.ok(problems.some((p) => expected.test(p)), `${JSON.stringify(value)} → ${JSON.stringify(problems)}`);
  }
});

test('an unknown keyword, an unknown type or a dangling $ref throws instead of passing', () => {
  assert.throws(() => validate({ type: 'string', patern: '^a$' }, 'b', root), /unknown keyword: "patern"/);
  assert.throws(() => validate({ type: 'uuid' }, 'x', root), /schema is invalid: data\/type/);
  assert.throws(() => validate({ $ref: '#/components/schemas/Nope' }, 1, root), /can't resolve reference/);
  assert.throws(() => resolveRef(root, 'other.yaml#/x'), /only local/);
  assert.throws(() => resolveRef(root, '#/components/schemas/Nope'), /unresolvable \$ref/);
});

test('the document: every $ref resolves, and its Token schema refuses a wrong body', () => {
  const doc = loadOpenApi();
  assert.match(doc.openapi, /^3\./);
  const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1]);
  assert.ok(refs.length > 10);
  for (const ref of refs) assert.doesNotThrow(() => resolveRef(doc, ref), ref);
  const token = { $ref: '#/components/schemas/Token' };
  const body = { id: 'abc=', key: `${'k'.repeat(43)}=`, uid: 7, api_endpoint: 'https://n.example/1.5/7', duration: 3600, hashalg: 'sha256', hashed_fxa_uid: '0'.repeat(32) };
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
    [{ headers: headers({ 'x-timestamp': [] }).set('x-timestamp', ['soon']) }, /header x-timestamp: must be integer/],
    [{ headers: (() => { const h = headers(); h.delete('x-request-id'); return h; })() }, /required header x-request-id missing/],
    [{ status: 401, headers: headers() }, /required header www-authenticate missing/],
    [{ status: 401, headers: headers({ 'www-authenticate': ['Assertion', 'Basic'] }) }, /www-authenticate: must be equal to one of the allowed values/],
    [{ headers: headers({ 'retry-after': ['5'] }) }, /header retry-after sent but not documented/],
    [{ status: 503, headers: headers() }, /required header retry-after missing/],
    [{ text: JSON.stringify({ status: 'invalid-credentials', errors: [] }) }, /body\.status: must be equal to one of the allowed values \["error"\]/],
    [{ text: JSON.stringify({ status: 'error', errors: [] }) }, /body\.errors: must NOT have fewer than 1 items/],
    [{ text: JSON.stringify({ status: 'error', errors: [{ location: 'url', name: '' }] }) }, /body\.errors\.0: must have required property 'description'/],
    [{ text: '<html>' }, /body is not JSON/],
    [{ headers: headers({ 'content-type': ['text/html'] }) }, /content type text\/html is not one of application\/json/],
  ];
  for (const [o, expected] of cases) {
    const problems = responseProblems(doc, res(o));
    assert.ok(problems.some((p) => expected.test(p)), `${JSON.stringify(o, (_, v) => (v instanceof Map ? Object.fromEntries(v) : v))} → ${JSON.stringify(problems)}`);
  }
});
