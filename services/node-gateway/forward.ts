// Forwarding to the application node: streams both ways over a keep-alive
// agent, rewrites the headers the gateway owns, and maps an unreachable or slow
// upstream to 502/504 instead of hanging.
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { BadGateway, GatewayTimeout } from '../../lib/errors.js';

/** Connection-scoped headers (RFC 9110 §7.6.1), never passed through a proxy. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Headers only the gateway may set towards the application; a client's copy is dropped. */
const GATEWAY_OWNED = /^(authorization|forwarded|x-forwarded-.*|x-authenticated-.*|expect)$/;
const REQUEST_ID = 'x-request-id';

/** Hop-by-hop headers plus the ones a `Connection` header names. */
function connectionScoped(rawHeaders: readonly string[]): ReadonlySet<string> {
  let names: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i].toLowerCase() === 'connection') {
      names ??= new Set(HOP_BY_HOP);
      for (const token of rawHeaders[i + 1].split(',')) names.add(token.trim().toLowerCase());
    }
  }
  return names ?? HOP_BY_HOP;
}

export interface ForwardIdentity {
  uid: number;
  node: string;
  /** The client's socket address. */
  clientAddress: string;
  /** The public node URL (NODE_URL), for X-Forwarded-Proto/-Host. */
  publicUrl: URL;
  /** Set when the body was buffered: its exact length replaces the client's framing. */
  bodyLength?: number;
  /** The gateway's request id (X-Request-Id): replaces the client's, so the application logs the same id. */
  requestId?: string;
}

/**
 * Request headers for the application, as a raw [name, value, …] list so
 * repeated headers survive. X-Forwarded-* are overwritten, never appended: the
 * gateway is the first proxy the application trusts.
 */
export function upstreamRequestHeaders(rawHeaders: readonly string[], who: ForwardIdentity): string[] {
  const drop = connectionScoped(rawHeaders);
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    if (drop.has(name) || GATEWAY_OWNED.test(name)) continue;
    if (who.bodyLength !== undefined && name === 'content-length') continue;
    if (who.requestId !== undefined && name === REQUEST_ID) continue;
    out.push(rawHeaders[i], rawHeaders[i + 1]);
  }
  if (who.bodyLength !== undefined) out.push('Content-Length', String(who.bodyLength));
  if (who.requestId !== undefined) out.push('X-Request-Id', who.requestId);
  out.push(
    'X-Forwarded-For', who.clientAddress,
    'X-Forwarded-Proto', who.publicUrl.protocol.slice(0, -1),
    'X-Forwarded-Host', who.publicUrl.host,
    'X-Authenticated-Uid', String(who.uid),
    'X-Authenticated-Node', who.node,
  );
  return out;
}

/**
 * Response headers for the client: the upstream's, minus its connection-scoped
 * ones; then the gateway's own (`own`, a raw list), which replace the upstream's of the same name.
 */
export function clientResponseHeaders(rawHeaders: readonly string[], own: readonly string[] = []): string[] {
  const drop = connectionScoped(rawHeaders);
  const ownNames = own.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    if (!drop.has(name) && !ownNames.includes(name)) out.push(rawHeaders[i], rawHeaders[i + 1]);
  }
  out.push(...own);
  return out;
}

/** Whether the request announces a body (HTTP/1.1 message framing). */
export function hasBody(req: http.IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');
}

export interface Upstream {
  protocol: 'http:' | 'https:';
  hostname: string;
  port: number;
  /** Path prefix of UPSTREAM_URL, prepended to every request target. */
  basePath: string;
  agent: http.Agent;
  connectTimeoutMs: number;
  /** Longest silence from the application, before or during its response. */
  timeoutMs: number;
}

export function upstream(upstreamUrl: string, timeouts: { connectTimeoutMs: number; timeoutMs: number }): Upstream {
  const u = new URL(upstreamUrl);
  const protocol = u.protocol === 'https:' ? 'https:' : 'http:';
  const agentOptions = { keepAlive: true, maxSockets: 512, maxFreeSockets: 64, scheduling: 'lifo' as const };
  return {
    protocol,
    hostname: u.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: Number(u.port || (protocol === 'https:' ? 443 : 80)),
    basePath: u.pathname.replace(/\/+$/, ''),
    agent: protocol === 'https:' ? new https.Agent(agentOptions) : new http.Agent(agentOptions),
    ...timeouts,
  };
}

export interface UpstreamRequest {
  method: string;
  target: string;
  headers: string[];
}

function hostHeader(up: Upstream): string {
  const host = up.hostname.includes(':') ? `[${up.hostname}]` : up.hostname;
  return up.port === (up.protocol === 'https:' ? 443 : 80) ? host : `${host}:${up.port}`;
}

export interface OpenedRequest {
  request: http.ClientRequest;
  /** The protocol error to answer with once `request` has emitted 'error'. */
  failure(): BadGateway | GatewayTimeout;
}

/** Opens a request to the application with the connect and idle timeouts applied. */
export function openUpstream(up: Upstream, r: UpstreamRequest): OpenedRequest {
  const send = up.protocol === 'https:' ? https.request : http.request;
  // Node adds no Host to a raw header list; an HTTP/1.0 client may have sent none.
  const headers = r.headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === 'host') ? r.headers : [...r.headers, 'Host', hostHeader(up)];
  const request = send({
    agent: up.agent,
    hostname: up.hostname,
    port: up.port,
    // The client's Host is passed through, so name the TLS server explicitly.
    ...(up.protocol === 'https:' ? { servername: up.hostname } : {}),
    method: r.method,
    path: up.basePath + r.target,
    headers,
    timeout: up.timeoutMs,
  });
  let failure: BadGateway | GatewayTimeout | undefined;
  const fail = (err: GatewayTimeout): void => {
    failure ??= err;
    request.destroy(err);
  };
  request.on('socket', (socket: Socket) => {
    if (!socket.connecting) return;
    const timer = setTimeout(() => fail(new GatewayTimeout('could not connect to the application in time')), up.connectTimeoutMs);
    socket.once('connect', () => clearTimeout(timer));
    socket.once('close', () => clearTimeout(timer));
  });
  request.on('timeout', () => fail(new GatewayTimeout('the application did not answer in time')));
  request.on('error', (err) => {
    failure ??= new BadGateway(`application unreachable: ${err.message}`);
  });
  return { request, failure: () => failure ?? new BadGateway('application unreachable') };
}

/** Methods that may be sent again when a kept-alive connection turns out to be closed. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

/**
 * Sends the request (the buffered body, or the client's stream) and pipes the
 * response back. Resolves when the exchange is over; rejects with 502/504 only
 * while nothing has been sent to the client yet.
 */
export function forward(
  client: { req: http.IncomingMessage; res: http.ServerResponse },
  up: Upstream,
  r: UpstreamRequest & { body?: Buffer; responseHeaders?: readonly string[] },
): Promise<void> {
  const { req, res } = client;
  const streamed = r.body === undefined && hasBody(req);
  return new Promise((resolve, reject) => {
    let upstreamReq: http.ClientRequest;
    // A client that goes away takes its upstream request with it.
    res.once('close', () => {
      if (!res.writableFinished) upstreamReq.destroy();
      resolve();
    });
    const attempt = (retry: boolean): void => {
      const { request, failure } = openUpstream(up, r);
      upstreamReq = request;
      request.on('error', (err: NodeJS.ErrnoException) => {
        if (res.headersSent) {
          res.destroy();
        } else if (retry && request.reusedSocket && err.code === 'ECONNRESET' && !streamed && IDEMPOTENT.has(r.method)) {
          // The application closed an idle kept-alive connection just as we reused
          // it: the request never reached it, so an idempotent one goes once more.
          attempt(false);
        } else {
          reject(failure());
        }
      });
      request.on('response', (upstreamRes) => {
        res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.statusMessage, clientResponseHeaders(upstreamRes.rawHeaders, r.responseHeaders));
        upstreamRes.pipe(res);
        upstreamRes.once('close', () => {
          // The application cut its reply short: so must we.
          if (!upstreamRes.complete) res.destroy();
        });
      });
      if (r.body !== undefined) request.end(r.body);
      else if (streamed) {
        req.pipe(request);
        req.once('error', () => request.destroy());
      } else request.end();
    };
    attempt(true);
  });
}

/** Whether the application answers at all (any HTTP status counts). */
export function probe(up: Upstream): Promise<boolean> {
  return new Promise((resolve) => {
    const { request: req } = openUpstream({ ...up, timeoutMs: up.connectTimeoutMs }, { method: 'HEAD', target: '/', headers: [] });
    req.on('response', (res) => {
      res.resume();
      resolve(true);
    });
    req.on('error', () => resolve(false));
    req.end();
  });
}
