// The node-gateway (DESIGN §6): plain node:http, since every request to an
// application node passes through here. Checks the token and the Hawk
// signature, then streams the request to the application.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GatewayConfig } from '../../lib/config.js';
import { PayloadTooLarge, ServiceUnavailable } from '../../lib/errors.js';
import { logger } from '../../lib/log.js';
import { authenticate, checkPayloadHash, guardedNode, tokenCache } from './auth.js';
import { forward, hasBody, probe, upstream, upstreamRequestHeaders } from './forward.js';
import { NonceCache } from './nonces.js';
import { sendError, sendJson } from './respond.js';

/** Hawk's header is at most 4 KiB; this leaves room for ordinary headers. */
const MAX_HEADER_SIZE = 16 * 1024;
/** A client gets this long to send its headers, and its whole request. */
const HEADERS_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 120_000;
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** Methods whose requests carry no body unless they say so; others get an explicit empty one. */
const BODYLESS_METHODS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE']);

export interface Gateway {
  port: number;
  url: string;
  close(): Promise<void>;
}

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

export async function startGateway(config: GatewayConfig): Promise<Gateway> {
  const log = logger('node-gateway');
  const node = guardedNode(config.nodeUrl, config.masterSecrets);
  const publicUrl = new URL(config.nodeUrl);
  const nonces = new NonceCache(config.nonceCacheSize, 2 * config.hawkSkew * 1000);
  const tokens = tokenCache();
  const app = upstream(config.upstreamUrl, { connectTimeoutMs: config.upstreamConnectTimeoutMs, timeoutMs: config.upstreamTimeoutMs });

  async function heartbeat(res: http.ServerResponse): Promise<void> {
    if (!(await probe(app))) throw new ServiceUnavailable('the application node is unreachable');
    sendJson(res, 200, { status: 'ok' });
  }

  async function proxy(req: http.IncomingMessage, res: http.ServerResponse, expectsContinue: boolean): Promise<void> {
    const method = req.method ?? 'GET';
    const target = req.url ?? '/';
    const caller = authenticate({ method, target, authorization: req.headers.authorization }, node, {
      skewSeconds: config.hawkSkew,
      nonces,
      tokens,
    });
    // Only now is the client told to send its body (Expect: 100-continue).
    if (expectsContinue) res.writeContinue();
    let body: Buffer | undefined;
    if (caller.hawk.hash !== undefined) {
      body = await readBody(req, config.hashBodyLimit);
      checkPayloadHash(body, req.headers['content-type'], caller.hawk.hash);
    }
    const bodyless = body === undefined && !hasBody(req);
    const headers = upstreamRequestHeaders(req.rawHeaders, {
      uid: caller.uid,
      node: caller.node,
      clientAddress: req.socket.remoteAddress ?? '',
      publicUrl,
      bodyLength: body?.length ?? (bodyless && !BODYLESS_METHODS.has(method) ? 0 : undefined),
    });
    await forward({ req, res }, app, { method, target, headers, body });
  }

  function handle(req: http.IncomingMessage, res: http.ServerResponse, expectsContinue = false): void {
    const path = (req.url ?? '/').split('?', 1)[0];
    let work: Promise<void>;
    if (path === '/__lbheartbeat__') {
      req.resume();
      sendJson(res, 200, {});
      return;
    } else if (path === '/__heartbeat__') {
      req.resume();
      work = heartbeat(res);
    } else {
      work = proxy(req, res, expectsContinue);
    }
    work.catch((err: unknown) => sendError(res, err, log));
  }

  const server = http.createServer({
    maxHeaderSize: MAX_HEADER_SIZE,
    headersTimeout: HEADERS_TIMEOUT_MS,
    requestTimeout: REQUEST_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
  });
  server.on('request', (req, res) => handle(req, res));
  server.on('checkContinue', (req, res) => handle(req, res, true));

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${shownHost}:${port}`;
  log.info({ port, url, nodeUrl: config.nodeUrl, upstream: config.upstreamUrl }, 'node-gateway listening');

  return {
    port,
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        app.agent.destroy();
      }),
  };
}
