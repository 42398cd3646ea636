import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { answerClientErrors, clientErrorResponse } from './client-error.js';
import { logger } from './log.js';

test('clientErrorResponse: status by parser code, JSON body, X-Timestamp, nosniff', () => {
  assert.match(clientErrorResponse('HPE_HEADER_OVERFLOW', 100), /^HTTP\/1\.1 431 /);
  assert.match(clientErrorResponse('ERR_HTTP_REQUEST_TIMEOUT', 100), /^HTTP\/1\.1 408 /);
  const r = clientErrorResponse('HPE_INVALID_METHOD', 1234.7);
  assert.match(r, /^HTTP\/1\.1 400 /);
  assert.match(r, /\r\nX-Timestamp: 1234\r\n/);
  assert.match(r, /\r\nX-Content-Type-Options: nosniff\r\n/);
  const body = JSON.parse(r.split('\r\n\r\n')[1]);
  assert.equal(body.status, 'error');
  assert.equal(Buffer.byteLength(r.split('\r\n\r\n')[1]), Number(/Content-Length: (\d+)/.exec(r)![1]));
});

async function raw(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.end(request));
    let out = '';
    s.on('data', (d) => (out += d));
    s.on('end', () => resolve(out));
    s.on('error', reject);
  });
}

test('a real server answers a broken request line and oversized headers with JSON', async () => {
  const server = createServer({ maxHeaderSize: 1024 }, (_req, res) => res.end('ok'));
  answerClientErrors(server, logger('test'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  try {
    const broken = await raw(port, 'GET ! HTTP/1.1\r\n\r\n');
    assert.match(broken, /^HTTP\/1\.1 400 /);
    assert.equal(JSON.parse(broken.split('\r\n\r\n')[1]).status, 'error');
    const big = await raw(port, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(4096)}\r\n\r\n`);
    assert.match(big, /^HTTP\/1\.1 431 /);
    assert.match(big, /Content-Type: application\/json/);
  } finally {
    await new Promise((r) => server.close(r));
  }
});
