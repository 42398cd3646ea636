// Requests node's HTTP parser rejects before any handler runs (a broken
// request line, headers beyond maxHeaderSize) still get the protocol's JSON
// error body, X-Timestamp and X-Content-Type-Options instead of node's bare
// default answer.
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from './log.js';

const REASONS: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };

/** The raw HTTP response for a parser error code; pure, for tests. */
export function clientErrorResponse(code: string | undefined, nowSeconds: number): string {
  const status = code === 'HPE_HEADER_OVERFLOW' ? 431 : code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const description =
    status === 431 ? 'request headers are too large' : status === 408 ? 'the request took too long to arrive' : 'malformed HTTP request';
  const body = JSON.stringify({ status: 'error', errors: [{ location: 'header', name: '', description }] });
  return (
    `HTTP/1.1 ${status} ${REASONS[status]}\r\n` +
    'Content-Type: application/json\r\n' +
    'X-Content-Type-Options: nosniff\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    `X-Timestamp: ${Math.floor(nowSeconds)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

export function answerClientErrors(server: Server, log: Logger): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A reset or already-answered socket cannot take a response.
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    log.debug({ code: err.code }, 'malformed request refused by the HTTP parser');
    socket.end(clientErrorResponse(err.code, Date.now() / 1000));
  });
}
