// The demo application: what a real application node would be, behind the
// node-gateway. It echoes who the gateway says the caller is and what the
// request looked like, so a person (or a test) can see the whole path work.
import http from 'node:http';
import { listen, localUrl } from '../../lib/listen.js';

export interface EchoReply {
  uid: string | null;
  node: string | null;
  method: string;
  path: string;
  query: Record<string, string | string[]>;
  bodyBytes: number;
  forwardedFor: string | null;
}

function header(req: http.IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  if (v === undefined) return null;
  return Array.isArray(v) ? v.join(', ') : v;
}

/** Repeated query keys become arrays, single ones stay strings. */
export function queryObject(params: URLSearchParams): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of params) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

export function echoReply(req: http.IncomingMessage, bodyBytes: number): EchoReply {
  // The base only makes the request target parseable; its host is never reported.
  const url = new URL(req.url ?? '/', 'http://demo.invalid');
  return {
    uid: header(req, 'x-authenticated-uid'),
    node: header(req, 'x-authenticated-node'),
    method: req.method ?? 'GET',
    path: url.pathname,
    query: queryObject(url.searchParams),
    bodyBytes,
    forwardedFor: header(req, 'x-forwarded-for'),
  };
}

const HEARTBEATS = new Set(['/__heartbeat__', '/__lbheartbeat__']);

/**
 * `DELETE /<version>/<uid>`: the purge (cli users purge) deleting everything a
 * replaced uid had. The demo app stores nothing, so there is nothing to remove;
 * a real application deletes the uid's data here and answers 2xx.
 */
export function isUserDelete(method: string | undefined, pathname: string): boolean {
  return method === 'DELETE' && /^\/[A-Za-z0-9._-]+\/\d+\/?$/.test(pathname);
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function handle(req: http.IncomingMessage, res: http.ServerResponse): void {
  const pathname = (req.url ?? '/').split('?')[0];
  if (HEARTBEATS.has(pathname)) {
    req.resume();
    send(res, 200, { status: 'ok' });
    return;
  }
  if (isUserDelete(req.method, pathname)) {
    req.resume();
    res.writeHead(204).end();
    return;
  }
  // Count the body as it streams: the app never holds a whole upload in memory.
  let bodyBytes = 0;
  req.on('data', (chunk: Buffer) => {
    bodyBytes += chunk.length;
  });
  req.on('end', () => send(res, 200, echoReply(req, bodyBytes)));
  req.on('error', () => res.destroy());
}

export interface DemoApp {
  server: http.Server;
  port: number;
  url: string;
  close(): Promise<void>;
}

export async function startDemoApp(opts: { host?: string; port?: number } = {}): Promise<DemoApp> {
  const host = opts.host ?? '127.0.0.1';
  const server = http.createServer(handle);
  const port = await listen(server, opts.port ?? 0, host);
  return {
    server,
    port,
    url: localUrl(host, port),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
