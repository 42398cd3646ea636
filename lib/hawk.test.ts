import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import {
  MAX_HEADER_LENGTH,
  hawkHeader,
  hawkMac,
  normalizedString,
  parseHawkHeader,
  payloadHash,
  safeEqual,
  staleTimestampChallenge,
  timestampMac,
  type HawkAttributes,
} from './hawk.js';
import { BadRequest, ProtocolError, Unauthorized } from './errors.js';
import { readVectors } from '../tests/support/vectors.js';

// The archived reference package, used only as an oracle.
interface HawkCredentials {
  id: string;
  key: string;
  algorithm: 'sha256';
}
interface HawkLib {
  client: {
    header(uri: string, method: string, options: Record<string, unknown>): { header: string };
    authenticate(res: { headers: Record<string, string> }, credentials: HawkCredentials, artifacts: Record<string, unknown>): unknown;
  };
  server: {
    authenticate(
      req: { method: string; url: string; host: string; port: number; authorization: string; contentType?: string },
      credentialsFunc: (id: string) => Promise<HawkCredentials>,
      options?: Record<string, unknown>,
    ): Promise<{ artifacts: Record<string, unknown> }>;
  };
  crypto: { calculateTsMac(ts: number, credentials: HawkCredentials): string };
}
const Hawk = createRequire(import.meta.url)('hawk') as HawkLib;

interface Vector {
  name: string;
  credentials: HawkCredentials;
  method: string;
  url: string;
  request_target: string;
  host: string;
  port: number;
  ts: number;
  nonce: string;
  ext: string | null;
  payload: string | null;
  content_type: string | null;
  payload_hash: string | null;
  normalized_string: string;
  mac: string;
  authorization: string;
  server_authorization?: { options: { payload: string; contentType: string; ext: string }; header: string; normalized_string: string };
}
const vectors = readVectors<Vector[]>('hawk.json');

/** Our verifier's steps for a parsed header: the MAC over the given request. */
function verifies(attrs: HawkAttributes, key: string, req: { method: string; resource: string; host: string; port: number }): boolean {
  const mac = hawkMac(key, normalizedString('header', { ...attrs, ...req }));
  return safeEqual(mac, attrs.mac);
}

test('hawk vectors: normalized string, payload hash, mac and header', () => {
  assert.equal(vectors.length, 2);
  for (const v of vectors) {
    const key = v.credentials.key;
    const attrs = parseHawkHeader(v.authorization);
    assert.equal(attrs.id, v.credentials.id, v.name);
    assert.equal(attrs.ts, String(v.ts));
    assert.equal(attrs.nonce, v.nonce);
    assert.equal(attrs.hash, v.payload_hash ?? undefined);
    if (v.payload !== null) assert.equal(payloadHash(v.payload, v.content_type ?? ''), v.payload_hash, v.name);
    const req = { method: v.method, resource: v.request_target, host: v.host, port: v.port };
    assert.equal(normalizedString('header', { ...attrs, ...req }), v.normalized_string, v.name);
    assert.equal(hawkMac(key, v.normalized_string), v.mac, v.name);
    assert.ok(verifies(attrs, key, req), v.name);
    assert.ok(!verifies(attrs, key, { ...req, port: v.port + 1 }), 'port is covered');
    // Our client produces the documented header byte for byte.
    const ours = hawkHeader({
      id: v.credentials.id,
      key,
      method: v.method,
      url: v.url,
      ts: v.ts,
      nonce: v.nonce,
      ext: v.ext ?? undefined,
      payload: v.payload ?? undefined,
      contentType: v.content_type ?? undefined,
    });
    assert.equal(ours, v.authorization, v.name);
  }
});

test('hawk vector: the response MAC uses the same normalized string', () => {
  const v = vectors.find((x) => x.server_authorization)!;
  const sa = v.server_authorization!;
  const hash = payloadHash(sa.options.payload, sa.options.contentType);
  const normalized = normalizedString('response', {
    ts: v.ts,
    nonce: v.nonce,
    method: v.method,
    resource: v.request_target,
    host: v.host,
    port: v.port,
    hash,
    ext: sa.options.ext,
  });
  assert.equal(normalized, sa.normalized_string);
  assert.equal(sa.header, `Hawk mac="${hawkMac(v.credentials.key, normalized)}", hash="${hash}", ext="${sa.options.ext}"`);
});

test('normalized string escapes backslash and newline in ext and appends app and dlg', () => {
  const base = { ts: 1, nonce: 'n', method: 'get', resource: '/r', host: 'EXAMPLE.com', port: 80 };
  assert.equal(normalizedString('header', { ...base, ext: 'a\\b\nc' }), 'hawk.1.header\n1\nn\nGET\n/r\nexample.com\n80\n\na\\\\b\\nc\n');
  assert.equal(normalizedString('header', { ...base, app: 'A', dlg: 'D' }), 'hawk.1.header\n1\nn\nGET\n/r\nexample.com\n80\n\n\nA\nD\n');
  assert.equal(normalizedString('header', { ...base, app: 'A' }), 'hawk.1.header\n1\nn\nGET\n/r\nexample.com\n80\n\n\nA\n\n');
});

test('payload hash drops content-type parameters and case', () => {
  assert.equal(payloadHash('x', 'Text/Plain; charset=utf-8'), payloadHash('x', 'text/plain'));
  assert.equal(payloadHash(Buffer.from('x'), 'text/plain'), payloadHash('x', 'text/plain'));
  assert.notEqual(payloadHash('x', 'text/plain'), payloadHash('x', 'application/json'));
  assert.notEqual(payloadHash('x'), payloadHash('y'));
});

const key = 'Fbpsf7u5g-dExjsjpbtS6pk3VCJUXyT49NaEQU-WBtM=';
const credentials: HawkCredentials = { id: 'some-token-id', key, algorithm: 'sha256' };
const cases = [
  { method: 'GET', url: 'http://node.example/1.5/42/info/collections' },
  { method: 'GET', url: 'http://node.example:8080/1.5/42/storage/bookmarks?full=1&newer=10.5' },
  { method: 'GET', url: 'https://node.example/1.5/42/storage/x?a=1&a=2', ext: 'some ext data' },
  { method: 'POST', url: 'https://node.example:4443/1.5/42/storage/tabs', payload: '[{"id":"a"}]', contentType: 'application/json; charset=utf-8' },
  { method: 'PUT', url: 'http://127.0.0.1:3000/1.5/42/storage/meta/global', payload: '{"payload":"x"}', contentType: 'application/json' },
  { method: 'PUT', url: 'http://node.example/1.5/42/storage/meta/global' },
  { method: 'DELETE', url: 'http://node.example:81/1.5/42/storage?ids=a,b' },
  { method: 'DELETE', url: 'http://node.example/1.5/42', payload: '' },
  { method: 'GET', url: 'http://node.example/1.5/42/x', app: 'app-id', dlg: 'dlg-id' },
];

test('headers from the reference client are parsed and verified', () => {
  for (const c of cases) {
    const { header } = Hawk.client.header(c.url, c.method, { credentials, ...c });
    const attrs = parseHawkHeader(header);
    const u = new URL(c.url);
    const req = { method: c.method, resource: u.pathname + u.search, host: u.hostname, port: Number(u.port || (u.protocol === 'https:' ? 443 : 80)) };
    assert.ok(verifies(attrs, key, req), `${c.method} ${c.url}`);
    assert.equal(attrs.hash, c.payload === undefined ? undefined : payloadHash(c.payload, c.contentType));
    assert.ok(!verifies(attrs, key, { ...req, method: c.method === 'GET' ? 'HEAD' : 'GET' }), 'method is covered');
  }
});

test('our headers are accepted by the reference server', async () => {
  for (const c of cases) {
    const header = hawkHeader({ id: credentials.id, key, ...c });
    const u = new URL(c.url);
    const { artifacts } = await Hawk.server.authenticate(
      {
        method: c.method,
        url: u.pathname + u.search,
        host: u.hostname,
        port: Number(u.port || (u.protocol === 'https:' ? 443 : 80)),
        authorization: header,
        contentType: c.contentType,
      },
      async () => credentials,
      c.payload === undefined ? {} : { payload: c.payload },
    );
    assert.equal(artifacts.id, credentials.id, `${c.method} ${c.url}`);
    // And by our own parser and verifier.
    const attrs = parseHawkHeader(header);
    assert.ok(verifies(attrs, key, { method: c.method, resource: u.pathname + u.search, host: u.hostname, port: Number(artifacts.port) }));
  }
});

test('hawkHeader: fresh nonce and current time by default, bare trailing "?" kept', () => {
  const a = parseHawkHeader(hawkHeader({ id: 'i', key, method: 'GET', url: 'http://h/x' }));
  const b = parseHawkHeader(hawkHeader({ id: 'i', key, method: 'GET', url: 'http://h/x' }));
  assert.notEqual(a.nonce, b.nonce);
  assert.ok(Math.abs(Number(a.ts) - Date.now() / 1000) < 5);
  const q = parseHawkHeader(hawkHeader({ id: 'i', key, method: 'GET', url: 'http://h/x?', ts: 1, nonce: 'n' }));
  assert.ok(verifies(q, key, { method: 'GET', resource: '/x?', host: 'h', port: 80 }));
  assert.ok(verifies(parseHawkHeader(hawkHeader({ id: 'i', key, method: 'GET', url: new URL('http://h/x?a=1'), ts: 1, nonce: 'n' })), key, { method: 'GET', resource: '/x?a=1', host: 'h', port: 80 }));
});

test('hawkHeader refuses values a header cannot carry', () => {
  assert.throws(() => hawkHeader({ id: 'i', key, method: 'GET', url: 'http://h/', ext: 'say "hi"' }), TypeError);
  assert.throws(() => hawkHeader({ id: 'i', key, method: 'GET', url: 'http://h/', ext: 'a\\b' }), TypeError);
  assert.throws(() => hawkHeader({ id: 'i\n', key, method: 'GET', url: 'http://h/' }), TypeError);
  assert.throws(() => hawkHeader({ id: 'i', key, method: 'GET', url: 'http://h/', dlg: 'd' }), TypeError);
});

test('stale timestamp challenge carries a tsm the reference client verifies', () => {
  assert.equal(timestampMac(key, 1353832234), Hawk.crypto.calculateTsMac(1353832234, credentials));
  const challenge = staleTimestampChallenge(key, 1700000000);
  assert.match(challenge, /^Hawk ts="1700000000", tsm="[A-Za-z0-9+/=]{44}", error="Stale timestamp"$/);
  Hawk.client.authenticate({ headers: { 'www-authenticate': challenge } }, credentials, {});
  const forged = challenge.replace('1700000000', '1700000001');
  assert.throws(() => Hawk.client.authenticate({ headers: { 'www-authenticate': forged } }, credentials, {}));
});

test('safeEqual', () => {
  assert.ok(safeEqual('abc', 'abc'));
  assert.ok(!safeEqual('abc', 'abd'));
  assert.ok(!safeEqual('abc', 'ab'));
  assert.ok(safeEqual('', ''));
});

test('parser accepts optional whitespace, any case of the scheme, and optional attributes', () => {
  const a = parseHawkHeader('hawk id="a",ts="1",nonce="n" ,  mac="m", ext="e" ');
  assert.deepEqual({ ...a }, { id: 'a', ts: '1', nonce: 'n', mac: 'm', ext: 'e' });
  const b = parseHawkHeader('HAWK\tid="a b", ts="0001", nonce="~!#", mac="m", hash="h", app="x", dlg="y"');
  assert.deepEqual({ ...b }, { id: 'a b', ts: '0001', nonce: '~!#', mac: 'm', hash: 'h', app: 'x', dlg: 'y' });
});

function rejects(header: string | undefined, cls: typeof ProtocolError, pattern: RegExp): void {
  assert.throws(
    () => parseHawkHeader(header),
    (e: unknown) => {
      assert.ok(e instanceof cls, `${JSON.stringify(header)} → ${String(e)}`);
      assert.match((e as Error).message, pattern, JSON.stringify(header));
      return true;
    },
  );
}

test('parser: missing header or another scheme is 401 with a Hawk challenge', () => {
  for (const h of [undefined, '', 'Basic dXNlcjpwYXNz', 'Bearer x', '"Hawk" id="a"', 'Hawkish id="a"']) {
    rejects(h, Unauthorized, /missing|unsupported/);
  }
  try {
    parseHawkHeader('Bearer x');
  } catch (e) {
    assert.equal((e as ProtocolError).status, 401);
    assert.equal((e as ProtocolError).headers['WWW-Authenticate'], 'Hawk');
  }
});

test('parser: every malformed branch is a 400 with a clear description', () => {
  const ok = 'id="a", ts="1", nonce="n", mac="m"';
  const table: Array<[string, RegExp]> = [
    [`Hawk ${ok}, ext="${'x'.repeat(MAX_HEADER_LENGTH)}"`, /longer than 4096/],
    ['Hawk', /no attributes/],
    ['Hawk   ', /no attributes/],
    ['Hawk\t', /no attributes/],
    ['Hawk id=a, ts="1", nonce="n", mac="m"', /malformed Hawk attribute near "id=a/],
    ['Hawk id="a" ts="1", nonce="n", mac="m"', /malformed/],
    ['Hawk id="a", ts="1", nonce="n", mac="m";', /malformed/],
    ['Hawk id="a\\"b", ts="1", nonce="n", mac="m"', /malformed/],
    ['Hawk id ="a", ts="1", nonce="n", mac="m"', /malformed/],
    ['Hawk ="a", ts="1", nonce="n", mac="m"', /malformed/],
    ['Hawk id="a",, ts="1", nonce="n", mac="m"', /malformed/],
    [`Hawk ${ok},,`, /malformed/],
    [`Hawk ${ok}, ext=""`, /"ext" is empty/],
    ['Hawk id="a",\nts="1", nonce="n", mac="m"', /on one line/],
    [`Hawk ${ok}, foo="x"`, /unknown Hawk attribute "foo"/],
    [`Hawk ${ok}, tsm="x"`, /unknown Hawk attribute "tsm"/],
    [`Hawk ${ok}, ext="a\\b"`, /"ext" holds a character/],
    [`Hawk ${ok}, ext="caf\u00e9"`, /"ext" holds a character/],
    [`Hawk ${ok}, ext="a\u0001"`, /"ext" holds a character/],
    [`Hawk ${ok}, ext="a\tb"`, /"ext" holds a character/],
    [`Hawk ${ok}, nonce="n"`, /duplicate Hawk attribute "nonce"/],
    ['Hawk ts="1", nonce="n", mac="m"', /missing Hawk attribute "id"/],
    ['Hawk id="a", nonce="n", mac="m"', /missing Hawk attribute "ts"/],
    ['Hawk id="a", ts="1", mac="m"', /missing Hawk attribute "nonce"/],
    ['Hawk id="a", ts="1", nonce="n"', /missing Hawk attribute "mac"/],
    ['Hawk id="", ts="1", nonce="n", mac="m"', /Hawk attribute "id" is empty/],
    ['Hawk id="a", ts="12a", nonce="n", mac="m"', /"ts" must be whole seconds/],
    ['Hawk id="a", ts="-1", nonce="n", mac="m"', /"ts" must be whole seconds/],
    ['Hawk id="a", ts="1.5", nonce="n", mac="m"', /"ts" must be whole seconds/],
    ['Hawk id="a", ts=" 1", nonce="n", mac="m"', /"ts" must be whole seconds/],
    [`Hawk ${ok}, dlg="d"`, /"dlg" requires "app"/],
  ];
  for (const [header, pattern] of table) rejects(header, BadRequest, pattern);
  // As the reference parser (lib/hawk.differential.test.ts): a trailing comma, and `\s` around separators.
  assert.equal(parseHawkHeader(`Hawk ${ok}, `).mac, 'm');
  assert.equal(parseHawkHeader('Hawk\u00a0id="a" ,\vts="1",nonce="n",\tmac="m"').ts, '1');
  // Exactly at the cap is still read.
  const pad = MAX_HEADER_LENGTH - `Hawk ${ok}, ext=""`.length;
  assert.equal(parseHawkHeader(`Hawk ${ok}, ext="${'x'.repeat(pad)}"`).ext!.length, pad);
});

test('parser errors point at the Authorization header', () => {
  try {
    parseHawkHeader('Hawk x');
    assert.fail('accepted');
  } catch (e) {
    const err = e as ProtocolError;
    assert.equal(err.status, 400);
    assert.deepEqual(err.detail(), { location: 'header', name: 'Authorization', description: err.message });
  }
});

// Cases below were found missing by mutation testing (npm run mutation -- lib/hawk.ts).

test('parser: a missing or empty header says so, with the Hawk challenge', () => {
  for (const h of [undefined, '']) {
    rejects(h, Unauthorized, /^missing Authorization header$/);
    assert.throws(() => parseHawkHeader(h), (e: unknown) => (e as ProtocolError).headers['WWW-Authenticate'] === 'Hawk');
  }
});

test('parser: the scheme is followed by any amount of whitespace, and by nothing else', () => {
  assert.equal(parseHawkHeader('Hawk  \t id="a", ts="1", nonce="n", mac="m"').id, 'a');
  rejects('Hawk,id="a", ts="1", nonce="n", mac="m"', BadRequest, /no attributes/);
});

test('parser: a malformed attribute is quoted from where it starts, at most 20 characters', () => {
  rejects('Hawk id=a, ts="1", nonce="n", mac="m"', BadRequest, /^malformed Hawk attribute near "id=a, ts=\\"1\\", nonce=", expected name="value"$/);
  rejects('Hawk id="a", ts=1, nonce="n", mac="m"', BadRequest, /^malformed Hawk attribute near "ts=1, nonce=\\"n\\", mac", expected name="value"$/);
});

test('payload hash ignores spaces around the content type', () => {
  assert.equal(payloadHash('x', ' text/plain ; charset=utf-8'), payloadHash('x', 'text/plain'));
});

test('hawkHeader: the target keeps a query that ends in "?", and no "?" of the fragment', () => {
  const signed = (url: string) => parseHawkHeader(hawkHeader({ id: 'i', key, method: 'GET', url, ts: 1, nonce: 'n' }));
  assert.ok(verifies(signed('http://h/x?a=1?'), key, { method: 'GET', resource: '/x?a=1?', host: 'h', port: 80 }));
  assert.ok(verifies(signed('http://h/x#a?'), key, { method: 'GET', resource: '/x', host: 'h', port: 80 }));
});

test('hawkHeader: refusals name the value at fault', () => {
  assert.throws(() => hawkHeader({ id: 'i', key, method: 'GET', url: 'http://h/', ext: 'say "hi"' }), /^TypeError: Hawk ext holds characters a header cannot carry$/);
  assert.throws(() => hawkHeader({ id: 'i', key, method: 'GET', url: 'http://h/', dlg: 'd' }), /^TypeError: Hawk dlg requires app$/);
});

test('hawkHeader: app and dlg are sent and signed; dlg only with app, and an empty one is left out', () => {
  const req = { method: 'GET', resource: '/x', host: 'h', port: 80 };
  const both = parseHawkHeader(hawkHeader({ id: 'i', key, method: 'GET', url: 'http://h/x', app: 'A', dlg: 'D' }));
  assert.deepEqual([both.app, both.dlg], ['A', 'D']);
  assert.ok(verifies(both, key, req));
  assert.ok(!verifies({ ...both, dlg: 'E' }, key, req), 'dlg is covered');
  const appOnly = hawkHeader({ id: 'i', key, method: 'GET', url: 'http://h/x', app: 'A', dlg: '' });
  assert.match(appOnly, /, app="A"$/);
  const parsed = parseHawkHeader(appOnly);
  assert.deepEqual([parsed.app, parsed.dlg], ['A', undefined]);
  assert.ok(verifies(parsed, key, req));
});
