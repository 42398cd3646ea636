// The node-gateway (DESIGN §6): plain node:http, since every request to an
// application node passes through here. Checks the token and the Hawk
// signature, then streams the request to the application. Every request gets
// a request id (X-Request-Id, passed on to the application), one access line
// and its metrics (served on GATEWAY_METRICS_PORT, never on this port).
import http from 'node:http';
import { answerClientErrors } from '../../lib/client-error.js';
import type { GatewayConfig } from '../../lib/config.js';
import { BadGateway, ConfigError, GatewayTimeout, PayloadTooLarge, ProtocolError } from '../../lib/errors.js';
import { listen, localUrl } from '../../lib/listen.js';
import { accessLog, logger } from '../../lib/log.js';
import { GatewayMetrics, statusClass, statusStringOf } from '../../lib/metrics.js';
import { serveMetrics, type RunningMetrics } from '../../lib/metrics-server.js';
import { REQUEST_ID_HEADER, requestIdFrom } from '../../lib/request-id.js';
import { VERSION_INFO } from '../../lib/version.js';
import { authenticate, checkPayloadHash, guardedNode, rememberNonce, tokenCache, type Caller } from './auth.js';
import { clientFraming, forward, probe, refuseRepeatedSingletons, upstream, upstreamRequestHeaders, type Framing } from './forward.js';
import { openNonceStore } from './nonce-store.js';
import { sendError, sendJson } from './respond.js';

/** Hawk's header is at most 4 KiB; this leaves room for ordinary headers. */
const MAX_HEADER_SIZE = 16 * 1024;
/** A client gets this long to send its headers, and its whole request. */
const HEADERS_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 120_000;
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** Methods whose requests carry no body unless they say so; others get an explicit empty one. */
const BODYLESS_METHODS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE']);
/** Paths are what clients sent: the access line keeps this much. */
const MAX_LOGGED_PATH = 200;
const CLIENT_GONE = 499;

export interface Gateway {
  port: number;
  url: string;
  /** Where /metrics is served (GATEWAY_METRICS_PORT), if anywhere. */
  metricsPort?: number;
  /** The public node URL it guards (tokens name it). */
  nodeUrl: string;
  close(): Promise<void>;
}

/** What the access line and the metrics learn about one request as it goes. */
interface Exchange {
  requestId: string;
  route: string;
  started: number;
  uid?: number;
  /** When forwarding began (performance.now()). */
  upstreamStarted?: number;
  error?: unknown;
}

/** Routes the gateway answers itself; everything else is proxied. */
const OWN_ROUTES = new Set(['/__lbheartbeat__', '/__heartbeat__', '/__version__']);

/** Reads a body up to `limit` bytes; more is 413 (the Content-Length is trusted to refuse early). */
function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer> {
  const tooLarge = (): PayloadTooLarge => new PayloadTooLarge(`a signed body is limited to ${limit} bytes`);
  if (Number(req.headers['content-length'] ?? 0) > limit) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        req.off('data', onData);
        req.pause();
        reject(tooLarge());
      } else chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks, size)));
    req.once('error', reject);
  });
}

/**
 * `nodeUrlFor`, when given, makes the public node URL from the port bound
 * (the embedded stack with GATEWAY_PORT=0 and no NODE_URL); otherwise it is config.nodeUrl.
 */
export async function startGateway(config: GatewayConfig, nodeUrlFor?: (port: number) => string): Promise<Gateway> {
  // NODE_SECRETS were derived for one exact URL: one made from the port later would match none of them.
  if (nodeUrlFor && config.nodeSecrets) throw new ConfigError('NODE_URL', "is required with NODE_SECRETS: the node's secrets are derived from its exact URL");
  const log = logger('node-gateway');
  const access = accessLog(log);
  // Set once listening, before the first request can arrive.
  let node = guardedNode(config.nodeUrl, config, config.tokenSecrets);
  let publicUrl = new URL(config.nodeUrl);
  const nonces = await openNonceStore(config, log);
  const tokens = tokenCache();
  const app = upstream(config.upstreamUrl, { connectTimeoutMs: config.upstreamConnectTimeoutMs, timeoutMs: config.upstreamTimeoutMs });
  const metrics = new GatewayMetrics();

  /** The application node and the nonce store, as login's heartbeat reports its backends. */
  async function heartbeat(res: http.ServerResponse, own: Record<string, string>): Promise<void> {
    const [application, nonceStore] = await Promise.all([probe(app), nonces.healthy()]);
    const checks = { application: application ? 'ok' : 'unavailable', nonces: nonceStore ? 'ok' : 'unavailable' };
    const down = Object.entries(checks).filter(([, state]) => state !== 'ok').map(([name]) => name);
    if (down.length === 0) {
      sendJson(res, 200, { status: 'ok', checks }, own);
      return;
    }
    const headers = { 'X-Timestamp': String(Math.floor(Date.now() / 1000)), 'Retry-After': String(config.retryAfter), ...own };
    const errors = down.map((name) => ({ location: 'internal', name, description: `${name === 'nonces' ? 'nonce store' : 'application node'} unavailable` }));
    sendJson(res, 503, { status: 'error', checks, errors }, headers);
  }

  /**
   * Checks the request and forwards it; failures go to `fail`, thrown or
   * called back. Synchronous unless a signed body must be read first: most
   * requests pay for no promise.
   */
  function proxy(req: http.IncomingMessage, res: http.ServerResponse, expectsContinue: boolean, exchange: Exchange, fail: (err: unknown) => void): void {
    refuseRepeatedSingletons(req.rawHeaders);
    const framing = clientFraming(req.rawHeaders, req.httpVersion);
    const caller = authenticate({ method: req.method ?? 'GET', target: req.url ?? '/', authorization: req.headers.authorization }, node, {
      skewSeconds: config.hawkSkew,
      tokens,
    });
    exchange.uid = caller.uid;
    // Only now is the client told to send its body (Expect: 100-continue).
    if (expectsContinue) res.writeContinue();
    const signedHash = caller.hawk.hash;
    if (signedHash === undefined) {
      send(req, res, caller, exchange, framing, undefined, fail);
      return;
    }
    readBody(req, config.hashBodyLimit)
      .then((body) => {
        checkPayloadHash(body, req.headers['content-type'], signedHash);
        send(req, res, caller, exchange, framing, body, fail);
      })
      .catch(fail);
  }

  /**
   * The last check (the nonce), then the request to the application: with a
   * buffered body, or streaming the client's. The memory store answers at
   * once; a shared one answers later, by when the client may have gone.
   */
  function send(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    caller: Caller,
    exchange: Exchange,
    framing: Framing,
    body: Buffer | undefined,
    fail: (err: unknown) => void,
  ): void {
    const remembered = rememberNonce(caller.hawk, nonces);
    if (remembered === undefined) forwardRequest();
    else
      remembered.then(() => {
        if (!res.destroyed) forwardRequest();
      }, fail);

    function forwardRequest(): void {
      const method = req.method ?? 'GET';
      const target = req.url ?? '/';
      // A buffered body is sent with its exact length; a streamed one keeps the client's kind of framing.
      const sent: Framing = body === undefined ? framing : body.length === 0 ? { kind: 'none' } : { kind: 'length', length: body.length };
      const headers = upstreamRequestHeaders(req.rawHeaders, {
        uid: caller.uid,
        node: caller.node,
        clientAddress: req.socket.remoteAddress ?? '',
        publicUrl,
        framing: sent,
        explicitEmpty: !BODYLESS_METHODS.has(method),
        requestId: exchange.requestId,
      });
      exchange.upstreamStarted = performance.now();
      forward({ req, res }, app, { method, target, headers, body, framing: sent, responseHeaders: [REQUEST_ID_HEADER, exchange.requestId] }, fail);
    }
  }

  /** Once the response is over (or the client gone): the access line and the metrics. */
  function finish(req: http.IncomingMessage, res: http.ServerResponse, path: string, x: Exchange): void {
    const now = performance.now();
    // 499 (as nginx logs it): the client went away before any answer.
    const status = res.headersSent ? res.statusCode : CLIENT_GONE;
    const statusString = statusStringOf(status, x.error);
    const method = req.method ?? 'GET';
    metrics.observeRequest({ route: x.route, method, status, statusString, seconds: (now - x.started) / 1000 });
    let upstreamMs: number | undefined;
    if (x.upstreamStarted !== undefined) {
      upstreamMs = Math.round(now - x.upstreamStarted);
      const outcome =
        x.error instanceof BadGateway || x.error instanceof GatewayTimeout ? x.error.name : res.writableFinished ? statusClass(status) : 'aborted';
      metrics.upstream.observe({ outcome }, (now - x.upstreamStarted) / 1000);
    } else if (x.route === 'proxy' && x.error instanceof ProtocolError && x.error.expose) {
      metrics.rejections.inc({ reason: x.error.name });
    }
    // The fields that are undefined are left out.
    access.write({
      requestId: x.requestId,
      method,
      // Never the query: it is the application's, and may carry anything.
      path: path.slice(0, MAX_LOGGED_PATH),
      status,
      statusString,
      ms: Math.round(now - x.started),
      upstreamMs,
      uid: x.uid,
    });
  }

  function handle(req: http.IncomingMessage, res: http.ServerResponse, expectsContinue = false): void {
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    const exchange: Exchange = {
      requestId: requestIdFrom(req.headers['x-request-id']),
      route: OWN_ROUTES.has(path) ? path : 'proxy',
      started: performance.now(),
    };
    // Passed explicitly, not with setHeader: Node 20's writeHead would then collapse repeated upstream headers.
    const own = { [REQUEST_ID_HEADER]: exchange.requestId };
    res.once('close', () => finish(req, res, path, exchange));
    const fail = (err: unknown): void => {
      exchange.error = err;
      sendError(res, err, log.child({ requestId: exchange.requestId }), own);
    };
    if (path === '/__lbheartbeat__') {
      req.resume();
      sendJson(res, 200, {}, own);
      return;
    } else if (path === '/__version__') {
      req.resume();
      sendJson(res, 200, VERSION_INFO, own);
      return;
    } else if (path === '/__heartbeat__') {
      req.resume();
      heartbeat(res, own).catch(fail);
    } else {
      try {
        proxy(req, res, expectsContinue, exchange, fail);
      } catch (err) {
        fail(err);
      }
    }
  }

  const server = http.createServer({
    maxHeaderSize: MAX_HEADER_SIZE,
    headersTimeout: HEADERS_TIMEOUT_MS,
    requestTimeout: REQUEST_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
  });
  // What node's parser refuses (conflicting framing among others) gets the same JSON 400 as login's.
  answerClientErrors(server, log);
  server.on('request', (req, res) => handle(req, res));
  server.on('checkContinue', (req, res) => handle(req, res, true));

  let port: number;
  try {
    port = await listen(server, config.port, config.host);
  } catch (err) {
    await nonces.close();
    throw err;
  }
  const nodeUrl = nodeUrlFor ? nodeUrlFor(port) : config.nodeUrl;
  if (nodeUrl !== config.nodeUrl) {
    node = guardedNode(nodeUrl, config, config.tokenSecrets);
    publicUrl = new URL(nodeUrl);
  }
  const url = localUrl(config.host, port);
  let exposed: RunningMetrics | undefined;
  try {
    exposed = config.metrics && (await serveMetrics(metrics, config.metrics, log));
  } catch (err) {
    server.close();
    app.agent.destroy();
    await nonces.close();
    throw err;
  }
  // Which kind of secret it holds, never a secret: master secrets sign for every node.
  const holds = config.nodeSecrets ? 'node secrets' : 'master secrets';
  log.info({ port, url, nodeUrl, upstream: config.upstreamUrl, nonceStore: nonces.kind, holds }, 'node-gateway listening');

  return {
    port,
    url,
    nodeUrl,
    metricsPort: exposed?.port,
    close: async () => {
      await exposed?.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        app.agent.destroy();
      });
      await nonces.close();
    },
  };
}
