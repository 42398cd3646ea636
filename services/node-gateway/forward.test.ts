import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { clientResponseHeaders, hasBody, openUpstream, upstream, upstreamRequestHeaders } from './forward.js';

const who = { uid: 7, node: 'https://n.example', clientAddress: '::1', publicUrl: new URL('https://n.example') };

test('upstreamRequestHeaders: keeps end-to-end headers, replaces framing only for a buffered body', () => {
  const raw = ['Host', 'h', 'Content-Length', '5', 'Content-Type', 'text/plain', 'Transfer-Encoding', 'chunked', 'Expect', '100-continue'];
  const streamed = upstreamRequestHeaders(raw, who);
  assert.deepEqual(streamed.slice(0, 6), ['Host', 'h', 'Content-Length', '5', 'Content-Type', 'text/plain']);
  assert.deepEqual(streamed.slice(6), [
    'X-Forwarded-For', '::1',
    'X-Forwarded-Proto', 'https',
    'X-Forwarded-Host', 'n.example',
    'X-Authenticated-Uid', '7',
    'X-Authenticated-Node', 'https://n.example',
  ]);
  const buffered = upstreamRequestHeaders(raw, { ...who, bodyLength: 3 });
  assert.deepEqual(buffered.slice(0, 6), ['Host', 'h', 'Content-Type', 'text/plain', 'Content-Length', '3']);
});

test('clientResponseHeaders drops hop-by-hop headers and those named by Connection', () => {
  const raw = ['Connection', 'close, X-Private', 'X-Private', '1', 'Keep-Alive', 'timeout=5', 'Transfer-Encoding', 'chunked', 'Set-Cookie', 'a', 'Set-Cookie', 'b'];
  assert.deepEqual(clientResponseHeaders(raw), ['Set-Cookie', 'a', 'Set-Cookie', 'b']);
});

test('hasBody follows HTTP/1.1 framing', () => {
  const msg = (headers: http.IncomingHttpHeaders) => ({ headers }) as http.IncomingMessage;
  assert.equal(hasBody(msg({})), false);
  assert.equal(hasBody(msg({ 'content-length': '0' })), false);
  assert.equal(hasBody(msg({ 'content-length': '3' })), true);
  assert.equal(hasBody(msg({ 'transfer-encoding': 'chunked' })), true);
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
