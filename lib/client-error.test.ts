import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Duplex } from 'node:stream';
import { answerClientErrors, clientErrorResponse } from './client-error.js';
import { logger } from './log.js';
import { rawExchange } from '../tests/support/services.js';

test('clientErrorResponse: status by parser code, JSON body, X-Timestamp, nosniff', () => {
  const expected = (status: string, description: string, now: number) => {
    const body = JSON.stringify({ status: 'error', errors: [{ location: 'header', name: '', description }] });
    return (
      `HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Timestamp: ${now}\r\nConnection: close\r\n\r\n${body}`
    );
  };
  assert.equal(clientErrorResponse('HPE_HEADER_OVERFLOW', 100), expected('431 Request Header Fields Too Large', 'request headers are too large', 100));
  assert.equal(clientErrorResponse('ERR_HTTP_REQUEST_TIMEOUT', 100), expected('408 Request Timeout', 'the request took too long to arrive', 100));
  assert.equal(clientErrorResponse('HPE_INVALID_METHOD', 1234.7), expected('400 Bad Request', 'malformed HTTP request', 1234), 'X-Timestamp in whole seconds');
  assert.equal(clientErrorResponse(undefined, 5), expected('400 Bad Request', 'malformed HTTP request', 5), 'an error without a code');
});

/** A real stream standing for the client's socket: what is written to it, and whether it was destroyed. */
function socketLike(o: { writable?: boolean } = {}): { socket: Duplex; written: () => string; destroyed: () => boolean } {
  let out = '';
  const socket = new Duplex({
    read() {},
    write(chunk, _enc, done) {
      out += chunk;
      done();
    },
  });
  if (o.writable === false) socket.end();
  return { socket, written: () => out, destroyed: () => socket.destroyed };
}

test('answerClientErrors: answers a parser error with the JSON response; a reset or unwritable socket is destroyed unanswered', async () => {
  const server = createServer();
  answerClientErrors(server, logger('test'));
  const parserError = Object.assign(new Error('Parse Error'), { code: 'HPE_INVALID_METHOD' });

  const open = socketLike();
  const before = Math.floor(Date.now() / 1000);
  server.emit('clientError', parserError, open.socket);
  await new Promise((r) => setImmediate(r));
  const answer = open.written();
  assert.match(answer, /^HTTP\/1\.1 400 Bad Request\r\n/);
  const stamp = Number(/\r\nX-Timestamp: (\d+)\r\n/.exec(answer)?.[1]);
  assert.ok(stamp >= before && stamp <= before + 5, `X-Timestamp is the time in seconds (${stamp})`);
  assert.equal(open.socket.writableEnded, true, 'the connection is ended after the answer');

  const reset = socketLike();
  server.emit('clientError', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), reset.socket);
  assert.equal(reset.written(), '');
  assert.equal(reset.destroyed(), true, 'a reset socket is destroyed');

  const ended = socketLike({ writable: false });
  server.emit('clientError', parserError, ended.socket);
  assert.equal(ended.written(), '');
  assert.equal(ended.destroyed(), true, 'a socket that cannot be written is destroyed');
});

const raw = async (port: number, request: string) => (await rawExchange(port, request, { end: true })).text;

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
