// The one place the gateway turns an error into a response: the DESIGN §3
// error body, X-Timestamp, a Hawk challenge on every 401, nothing internal on 5xx.
import type http from 'node:http';
import { InternalError, ProtocolError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import { clientFraming } from './forward.js';

export function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(text)),
    'Cache-Control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/** `extra`: headers the gateway sends on every answer (X-Request-Id). */
export function sendError(res: http.ServerResponse, err: unknown, log: Logger, extra: Record<string, string> = {}): void {
  // A pipelined request's response has no socket until the ones before it are done, so ask the request's.
  if (res.writableEnded || res.destroyed || res.req.socket.destroyed) {
    log.debug({ reason: (err as Error)?.message }, 'client went away');
    return;
  }
  const e = err instanceof ProtocolError ? err : new InternalError('unexpected failure');
  if (!(err instanceof ProtocolError)) log.error({ err }, 'request failed unexpectedly');
  else if (!e.expose) log.warn({ status: e.status, reason: e.message }, 'request failed');
  else log.debug({ status: e.status, reason: e.message }, 'request refused');
  if (res.headersSent) {
    // Mid-response: all we can do is cut the connection so the client sees a truncated reply.
    res.destroy();
    return;
  }
  const headers: Record<string, string> = { 'X-Timestamp': String(Math.floor(Date.now() / 1000)), ...e.headers, ...extra };
  if (e.status === 401 && headers['WWW-Authenticate'] === undefined) headers['WWW-Authenticate'] = 'Hawk';
  // An unread request body would otherwise be drained (or block) before the next request.
  if (hasUnreadBody(res.req)) headers.Connection = 'close';
  sendJson(res, e.status, { status: e.statusString, errors: [e.detail()] }, headers);
}

/**
 * Body bytes of this request may still be on the connection. A request refused as it arrives is not
 * `complete` yet even when it has no body (node marks it so after the 'request' event), and such a
 * refusal keeps the connection.
 */
export function hasUnreadBody(req: http.IncomingMessage): boolean {
  if (req.complete) return false;
  try {
    return clientFraming(req.rawHeaders, req.httpVersion).kind !== 'none';
  } catch {
    // Framing the gateway refuses: where the next request starts is not known.
    return true;
  }
}
