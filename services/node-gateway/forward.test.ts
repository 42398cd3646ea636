import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { BadRequest } from '../../lib/errors.js';
import { clientFraming, clientResponseHeaders, isClientClaim, openUpstream, refuseRepeatedSingletons, upstream, upstreamRequestHeaders } from './forward.js';

const who = { uid: 7, node: 'https://n.example', clientAddress: '::1', publicUrl: new URL('https://n.example'), framing: { kind: 'none' as const } };

test('upstreamRequestHeaders: keeps end-to-end headers; framing is always the gateway\'s, exactly one header', () => {
  const raw = ['Host', 'h', 'Content-Length', '5', 'Content-Type', 'text/plain', 'Transfer-Encoding', 'chunked', 'Expect', '100-continue'];
  const none = upstreamRequestHeaders(raw, who);
  assert.deepEqual(none.slice(0, 4), ['Host', 'h', 'Content-Type', 'text/plain']);
  assert.deepEqual(none.slice(4), [
    'X-Forwarded-For', '::1',
    'X-Forwarded-Proto', 'https',
    'X-Forwarded-Host', 'n.example',
    'X-Authenticated-Uid', '7',
    'X-Authenticated-Node', 'https://n.example',
  ]);
  const framingOf = (out: string[]) => out.filter((_, i) => i % 2 === 0 && /^(content-length|transfer-encoding)$/i.test(out[i])).map((n) => `${n}: ${out[out.indexOf(n) + 1]}`);
  assert.deepEqual(framingOf(none), []);
  assert.deepEqual(framingOf(upstreamRequestHeaders(raw, { ...who, explicitEmpty: true })), ['Content-Length: 0']);
  assert.deepEqual(framingOf(upstreamRequestHeaders(raw, { ...who, framing: { kind: 'length', length: 3 } })), ['Content-Length: 3']);
  assert.deepEqual(framingOf(upstreamRequestHeaders(raw, { ...who, framing: { kind: 'chunked' }, explicitEmpty: true })), ['Transfer-Encoding: chunked']);
});

test('a client\'s Connection header removes hop-by-hop headers, never framing, Host or the gateway\'s', () => {
  const raw = ['Host', 'h', 'Connection', 'close, Content-Length, transfer-encoding', 'Connection', 'HOST, X-Authenticated-Uid, X-Request-Id, X-Hop', 'X-Hop', '1', 'X-Keep', '2'];
  const out = upstreamRequestHeaders(raw, { ...who, framing: { kind: 'length', length: 9 }, requestId: 'r1' });
  const names = out.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
  for (const kept of ['host', 'content-length', 'x-keep', 'x-request-id', 'x-authenticated-uid']) assert.equal(names.filter((n) => n === kept).length, 1, kept);
  for (const gone of ['connection', 'x-hop']) assert.ok(!names.includes(gone), gone);
});

test('client claims: any name with "_", identity, address and routing headers', () => {
  for (const name of ['x_authenticated_uid', 'x-authenticated_uid', '_', 'content_type', 'x-real-ip', 'true-client-ip', 'x-client-ip', 'client-ip',
    'x-cluster-client-ip', 'cf-connecting-ip', 'cf-connecting-ipv6', 'fastly-client-ip', 'akamai-client-ip', 'x-originating-ip', 'x-original-forwarded-for',
    'x-proxyuser-ip', 'x-remote-ip', 'x-remote-addr', 'x-remote-user', 'remote-addr', 'remote-user', 'x-original-url', 'x-original-uri', 'x-original-host',
    'x-original-method', 'x-rewrite-url', 'x-http-method', 'x-http-method-override', 'x-method-override']) {
    assert.equal(isClientClaim(name), true, name);
  }
  for (const name of ['content-type', 'x-if-unmodified-since', 'x-weave-records', 'x-real-ipx', 'user-agent', 'x-client-state']) assert.equal(isClientClaim(name), false, name);
  const out = upstreamRequestHeaders(['X_Authenticated_Uid', '2', 'X-Real-IP', '1.2.3.4', 'X-Keep', 'k'], who);
  assert.deepEqual(out.slice(0, 2), ['X-Keep', 'k']);
  assert.ok(!out.includes('2') && !out.includes('1.2.3.4'));
});

test('refuseRepeatedSingletons: Host, Content-Type, Content-Length, Authorization at most once', () => {
  refuseRepeatedSingletons(['Host', 'h', 'Content-Type', 'a', 'Accept', 'x', 'Accept', 'y', 'Authorization', 'z']);
  for (const name of ['Host', 'content-type', 'Content-Length', 'AUTHORIZATION']) {
    assert.throws(() => refuseRepeatedSingletons([name, '1', 'X-Other', '', name.toLowerCase(), '1']), (e: unknown) => e instanceof BadRequest && e.field.toLowerCase() === name.toLowerCase(), name);
  }
});

test('clientFraming: none, a length or chunked; anything ambiguous is 400', () => {
  assert.deepEqual(clientFraming([], '1.1'), { kind: 'none' });
  assert.deepEqual(clientFraming(['Content-Length', '0'], '1.1'), { kind: 'none' });
  assert.deepEqual(clientFraming(['content-length', ' 12 '], '1.0'), { kind: 'length', length: 12 });
  assert.deepEqual(clientFraming(['Transfer-Encoding', 'Chunked'], '1.1'), { kind: 'chunked' });
  const refused: Array<[string[], string, RegExp]> = [
    [['Transfer-Encoding', 'chunked', 'Content-Length', '3'], '1.1', /not both/],
    [['Transfer-Encoding', 'chunked', 'Transfer-Encoding', 'chunked'], '1.1', /not both/],
    [['Transfer-Encoding', 'gzip, chunked'], '1.1', /alone/],
    [['Transfer-Encoding', 'identity'], '1.1', /alone/],
    [['Transfer-Encoding', 'chunked'], '1.0', /HTTP\/1\.1/],
    [['Content-Length', '3', 'Content-Length', '3'], '1.1', /one valid/],
    [['Content-Length', '-1'], '1.1', /one valid/],
    [['Content-Length', '1'.repeat(16)], '1.1', /one valid/],
  ];
  for (const [raw, version, message] of refused) {
    assert.throws(() => clientFraming(raw, version), (e: unknown) => e instanceof BadRequest && message.test(e.message), raw.join(' '));
  }
});

test('clientResponseHeaders drops hop-by-hop headers and those named by Connection', () => {
  const raw = ['Connection', 'close, X-Private', 'X-Private', '1', 'Keep-Alive', 'timeout=5', 'Transfer-Encoding', 'chunked', 'Set-Cookie', 'a', 'Set-Cookie', 'b'];
  assert.deepEqual(clientResponseHeaders(raw), ['Set-Cookie', 'a', 'Set-Cookie', 'b']);
});

test('upstream: host, port, path prefix of UPSTREAM_URL', () => {
  const timeouts = { connectTimeoutMs: 10, timeoutMs: 10 };
  const a = upstream('https://app.example/prefix/', timeouts);
  assert.deepEqual([a.protocol, a.hostname, a.port, a.basePath], ['https:', 'app.example', 443, '/prefix']);
  const b = upstream('http://[::1]:8081', timeouts);
  assert.deepEqual([b.protocol, b.hostname, b.port, b.basePath], ['http:', '::1', 8081, '']);
  a.agent.destroy();
  b.agent.destroy();
});

test('openUpstream adds a Host when the client sent none, and prefixes the path', async () => {
  let got: { host?: string; url?: string } = {};
  const server = http.createServer((req, res) => {
    got = { host: req.headers.host, url: req.url };
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  const up = upstream(`http://127.0.0.1:${port}/base`, { connectTimeoutMs: 1000, timeoutMs: 1000 });
  const { request } = openUpstream(up, { method: 'GET', target: '/x?y=1', headers: [] });
  await new Promise<void>((resolve, reject) => {
    request.on('response', (res) => res.resume().on('end', resolve));
    request.on('error', reject);
    request.end();
  });
  assert.deepEqual(got, { host: `127.0.0.1:${port}`, url: '/base/x?y=1' });
  up.agent.destroy();
  await new Promise((r) => server.close(r));
});

test('request id: the gateway’s replaces the client’s towards the application, and the application’s towards the client', () => {
  const raw = ['Host', 'h', 'X-Request-Id', 'client-says', 'x-request-id', 'again'];
  const out = upstreamRequestHeaders(raw, { ...who, requestId: 'gw-1' });
  assert.deepEqual(out.filter((h, i) => i % 2 === 1 && out[i - 1].toLowerCase() === 'x-request-id'), ['gw-1']);
  assert.deepEqual(upstreamRequestHeaders(raw, who).slice(0, 6), raw, 'without a request id the client’s pass through');
  const res = ['Content-Type', 'text/plain', 'x-request-id', 'app-id', 'Set-Cookie', 'a', 'Set-Cookie', 'b'];
  assert.deepEqual(clientResponseHeaders(res, ['X-Request-Id', 'gw-1']), ['Content-Type', 'text/plain', 'Set-Cookie', 'a', 'Set-Cookie', 'b', 'X-Request-Id', 'gw-1']);
});
