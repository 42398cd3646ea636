// Forwarding to the application node: streams both ways over a keep-alive
// agent, rewrites the headers the gateway owns, and maps an unreachable or slow
// upstream to 502/504 instead of hanging.
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { BadGateway, BadRequest, GatewayTimeout } from '../../lib/errors.js';

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

/** Headers only the gateway may set towards the application (`name` lowercased); a client's copy is dropped. */
function gatewayOwned(name: string): boolean {
  return name === 'authorization' || name === 'forwarded' || name === 'expect' || name.startsWith('x-forwarded-') || name.startsWith('x-authenticated-');
}
const REQUEST_ID = 'x-request-id';
/**
 * Client-supplied identity, address and routing headers that proxies and
 * frameworks trust elsewhere (an application honouring X-Original-URL would
 * route to a path the gateway did not check). A set, not a pattern: one
 * lookup per header of every request.
 */
const CLIENT_CLAIMS = new Set([
  'x-real-ip',
  'true-client-ip',
  'x-client-ip',
  'client-ip',
  'x-cluster-client-ip',
  'cf-connecting-ip',
  'cf-connecting-ipv6',
  'fastly-client-ip',
  'akamai-client-ip',
  'x-originating-ip',
  'x-original-forwarded-for',
  'x-proxyuser-ip',
  'x-remote-ip',
  'x-remote-addr',
  'x-remote-user',
  'remote-addr',
  'remote-user',
  'x-original-url',
  'x-original-uri',
  'x-original-host',
  'x-original-method',
  'x-rewrite-url',
  'x-http-method',
  'x-http-method-override',
  'x-method-override',
]);
/** Headers a request may carry once: a second copy would let the gateway and the application read different values. */
const SINGLETONS = new Set(['host', 'content-type', 'content-length', 'authorization']);
/** The client's framing is never passed on: the gateway frames every forwarded body itself. */
const FRAMING = new Set(['content-length', 'transfer-encoding']);
/** Headers a client's `Connection` may not remove (the gateway's own are added after filtering). */
const NOT_REMOVABLE = new Set(['content-length', 'transfer-encoding', 'host']);

/**
 * Whether a client's header goes no further: a name with "_" (CGI/WSGI turn
 * "X_Authenticated_Uid" into the same variable as "X-Authenticated-Uid"), or a
 * claim about who or where the client is.
 */
export function isClientClaim(lowerName: string): boolean {
  return lowerName.includes('_') || CLIENT_CLAIMS.has(lowerName);
}

/** Refuses a request that repeats a header it may carry once (400). */
export function refuseRepeatedSingletons(rawHeaders: readonly string[]): void {
  const seen = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    if (!SINGLETONS.has(name)) continue;
    if (seen.has(name)) throw new BadRequest(`the ${rawHeaders[i]} header must appear once`, { location: 'header', field: rawHeaders[i] });
    seen.add(name);
  }
}

/** Hop-by-hop headers plus the ones a `Connection` header names (never NOT_REMOVABLE ones). */
function connectionScoped(rawHeaders: readonly string[]): ReadonlySet<string> {
  let names: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    // The length first: lowercasing every name of every request adds up.
    if (rawHeaders[i].length === 10 && rawHeaders[i].toLowerCase() === 'connection') {
      for (const token of rawHeaders[i + 1].split(',')) {
        const name = token.trim().toLowerCase();
        // A copy of the set only for names beyond it ("Connection: keep-alive" needs none).
        if (!NOT_REMOVABLE.has(name) && !HOP_BY_HOP.has(name)) (names ??= new Set(HOP_BY_HOP)).add(name);
      }
    }
  }
  return names ?? HOP_BY_HOP;
}

/**
 * How a request's body is delimited: none, a known length, or chunked (length
 * unknown). The client's framing as node's parser read it, or the buffered
 * body's length; what goes to the application is always exactly one of these.
 */
export type Framing = { kind: 'none' } | { kind: 'length'; length: number } | { kind: 'chunked' };

function framingError(description: string): BadRequest {
  return new BadRequest(description, { location: 'header', field: 'Transfer-Encoding' });
}

/**
 * The client's framing. node's parser already refuses Content-Length with
 * Transfer-Encoding and repeated framing headers; this refuses what it lets
 * through but we would have to guess at: a coding besides "chunked", or
 * Transfer-Encoding in HTTP/1.0 (RFC 9112 §6.1).
 */
export function clientFraming(rawHeaders: readonly string[], httpVersion: string): Framing {
  const te: string[] = [];
  const cl: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    if (name === 'transfer-encoding') te.push(rawHeaders[i + 1]);
    else if (name === 'content-length') cl.push(rawHeaders[i + 1]);
  }
  if (te.length > 0) {
    if (te.length > 1 || cl.length > 0) throw framingError('a request must carry one Transfer-Encoding or one Content-Length, not both');
    if (te[0].trim().toLowerCase() !== 'chunked') throw framingError('Transfer-Encoding must be "chunked" alone');
    if (httpVersion !== '1.1') throw framingError('Transfer-Encoding needs HTTP/1.1');
    return { kind: 'chunked' };
  }
  if (cl.length === 0) return { kind: 'none' };
  if (cl.length > 1 || !/^\d{1,15}$/.test(cl[0].trim())) throw framingError('a request must carry one valid Content-Length');
  const length = Number(cl[0].trim());
  return length === 0 ? { kind: 'none' } : { kind: 'length', length };
}

/** The framing header for the application: exactly one for a body, or `Content-Length: 0` where the method expects one. */
function framingHeader(framing: Framing, explicitEmpty: boolean): string[] {
  if (framing.kind === 'chunked') return ['Transfer-Encoding', 'chunked'];
  if (framing.kind === 'length') return ['Content-Length', String(framing.length)];
  return explicitEmpty ? ['Content-Length', '0'] : [];
}

export interface ForwardIdentity {
  uid: number;
  node: string;
  /** The client's socket address. */
  clientAddress: string;
  /** The public node URL (NODE_URL), for X-Forwarded-Proto/-Host. */
  publicUrl: URL;
  /** The body as it will be sent: the client's framing, or the buffered body's length. */
  framing: Framing;
  /** Whether a request without a body says so with `Content-Length: 0` (methods that normally have one). */
  explicitEmpty?: boolean;
  /** The gateway's request id (X-Request-Id): replaces the client's, so the application logs the same id. */
  requestId?: string;
}

/**
 * Request headers for the application, as a raw [name, value, …] list so
 * repeated headers survive. Framing and X-Forwarded-* are the gateway's,
 * never the client's: the gateway is the first proxy the application trusts.
 */
export function upstreamRequestHeaders(rawHeaders: readonly string[], who: ForwardIdentity): string[] {
  const drop = connectionScoped(rawHeaders);
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    if (drop.has(name) || FRAMING.has(name) || gatewayOwned(name) || isClientClaim(name)) continue;
    if (who.requestId !== undefined && name === REQUEST_ID) continue;
    out.push(rawHeaders[i], rawHeaders[i + 1]);
  }
  out.push(...framingHeader(who.framing, who.explicitEmpty ?? false));
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
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    if (!drop.has(name) && !isOwn(name, own)) out.push(rawHeaders[i], rawHeaders[i + 1]);
  }
  for (const h of own) out.push(h);
  return out;
}

/** Whether `name` (lowercased) is one of the names in the raw list `own`. */
function isOwn(name: string, own: readonly string[]): boolean {
  for (let i = 0; i < own.length; i += 2) if (own[i].length === name.length && own[i].toLowerCase() === name) return true;
  return false;
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

/** Whether a raw header list has a Host. */
function hasHost(rawHeaders: readonly string[]): boolean {
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i].length === 4 && rawHeaders[i].toLowerCase() === 'host') return true;
  return false;
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
  const headers = hasHost(r.headers) ? r.headers : [...r.headers, 'Host', hostHeader(up)];
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
 * response back. `onFailure` gets the 502/504 when the application fails while
 * nothing has been sent to the client yet; later failures cut the response.
 * A callback, not a promise: this runs for every request.
 */
export function forward(
  client: { req: http.IncomingMessage; res: http.ServerResponse },
  up: Upstream,
  r: UpstreamRequest & { body?: Buffer; framing: Framing; responseHeaders?: readonly string[] },
  onFailure: (err: BadGateway | GatewayTimeout) => void,
): void {
  const { req, res } = client;
  const streamed = r.body === undefined && r.framing.kind !== 'none';
  let upstreamReq: http.ClientRequest;
  // A client that goes away takes its upstream request with it.
  res.once('close', () => {
    if (!res.writableFinished) upstreamReq.destroy();
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
        onFailure(failure());
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
