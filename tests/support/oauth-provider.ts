// A stand-in for Mozilla accounts' public side (DESIGN §13.1): a real HTTP
// server on loopback serving OpenID Connect discovery and a JWKS, as
// accounts.firefox.com does (its discovery document names the issuer and a
// jwks_uri on another path). Tests change what it serves and count what it is
// asked:
//
//   const provider = await startOAuthProvider({ keys: [key] });
//   // login: OAUTH_ISSUER=provider.issuer (discovery) or OAUTH_JWKS=provider.jwksUri
//   provider.setKeys([key, next]);   // rotate
//   provider.fail('down');           // or garbage, huge, html, redirect, wrong-issuer, ...
//   provider.fail(null);             // serve again
//   provider.fetchCount();           // JWKS requests so far
//   await provider.close();
import http from 'node:http';
import https from 'node:https';
import { readFileSync } from 'node:fs';
import type { AddressInfo, Socket } from 'node:net';
import { generateKeyPairSync } from 'node:crypto';
import type { JWK } from 'jose';
import type { SigningKey } from './oauth.js';

export const DISCOVERY_PATH = '/.well-known/openid-configuration';
export const JWKS_PATH = '/v1/jwks';

/**
 * How the provider misbehaves (null: it serves):
 * - `down`: every connection is cut before an answer (unreachable);
 * - `hang`: requests are never answered (a fetch times out);
 * - `status`: 500 on every request;
 * - `garbage`: 200 application/json that is not JSON;
 * - `huge`: 200 with a JSON set of several MiB;
 * - `html`: 200 text/html (a captive portal, an error page);
 * - `redirect`: 302 to `location` (another origin, given to fail());
 * - `moved`: 301 to the same path under /moved (same origin: to be followed);
 * - `wrong-issuer`: discovery names another issuer (the JWKS is still served);
 * - `weak-keys`: a set with only RSA-1024 keys;
 * - `symmetric-keys`: a set with only `oct` keys.
 */
export type ProviderFailure = 'down' | 'hang' | 'status' | 'garbage' | 'huge' | 'html' | 'redirect' | 'moved' | 'wrong-issuer' | 'weak-keys' | 'symmetric-keys';

export interface OAuthProvider {
  /** http://127.0.0.1:<port> (https://<tls.host>:<port> with `tls`): what OAUTH_ISSUER is set to, and what discovery answers. */
  issuer: string;
  /** The JWKS URL discovery names: what OAUTH_JWKS is set to for a URL without discovery. */
  jwksUri: string;
  /** Serves these keys from now on (public JWKs; a SigningKey's publicJwk). An empty list serves `{"keys": []}`. */
  setKeys(keys: ReadonlyArray<SigningKey | JWK>): void;
  /** Misbehaves as `mode` says until fail(null); `location` for `redirect`. */
  fail(mode: ProviderFailure | null, options?: { location?: string }): void;
  /** JWKS requests received (any answer, cut connections included). */
  fetchCount(): number;
  /** Discovery requests received. */
  discoveryCount(): number;
  close(): Promise<void>;
}

const publicJwkOf = (k: SigningKey | JWK): JWK => ('publicJwk' in k ? (k as SigningKey).publicJwk : (k as JWK));

/** An RSA-1024 public key, which no login may accept (made once: 1024-bit generation is quick but not free). */
let weakJwk: JWK | undefined;
function weakKey(): JWK {
  weakJwk ??= { ...(generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'jwk' }) as JWK), kid: 'weak-1024', alg: 'RS256', use: 'sig' };
  return weakJwk;
}

export interface OAuthProviderOptions {
  keys?: ReadonlyArray<SigningKey | JWK>;
  /** A fixed port (default: a free one). */
  port?: number;
  /**
   * Serve https with this certificate (PEM files, e.g. tests/support/tls.ts makePki), under
   * `host` (a name the certificate covers, default localhost). A login trusts its CA through
   * NODE_EXTRA_CA_CERTS.
   */
  tls?: { cert: string; key: string; host?: string };
}

/** Starts the stand-in on 127.0.0.1 (a free port unless `port` is given). */
export async function startOAuthProvider(options: OAuthProviderOptions = {}): Promise<OAuthProvider> {
  let keys: JWK[] = (options.keys ?? []).map(publicJwkOf);
  let failure: ProviderFailure | null = null;
  let location = 'https://accounts.attacker.example/v1/jwks';
  let jwksRequests = 0;
  let discoveryRequests = 0;
  const sockets = new Set<Socket>();
  let issuer = '';

  const json = (res: http.ServerResponse, body: unknown, type = 'application/json') => {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(200, { 'content-type': type, 'content-length': Buffer.byteLength(text), 'cache-control': 'public, max-age=10' });
    res.end(text);
  };

  const serveJwks = (res: http.ServerResponse) => {
    if (failure === 'weak-keys') return json(res, { keys: [weakKey()] });
    if (failure === 'symmetric-keys') return json(res, { keys: [{ kty: 'oct', kid: 'hmac-1', k: 'c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0', alg: 'HS256' }] });
    json(res, { keys });
  };

  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = new URL(req.url ?? '/', issuer);
    const isJwks = url.pathname === JWKS_PATH || url.pathname === `/moved${JWKS_PATH}`;
    if (isJwks) jwksRequests++;
    if (url.pathname === DISCOVERY_PATH) discoveryRequests++;
    switch (failure) {
      case 'down':
        req.socket.destroy();
        return;
      case 'hang':
        return;
      case 'status':
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{"code":500,"errno":999,"error":"Internal Server Error"}');
        return;
      case 'garbage':
        return json(res, '{"keys": [ {"kty": "RSA", "n": ');
      case 'huge': {
        // Streamed, so the whole body is never held here either.
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = `"${'A'.repeat(65_536)}",`;
        res.write('{"padding": [');
        for (let i = 0; i < 80; i++) res.write(chunk);
        res.end(`"end"], "keys": ${JSON.stringify(keys)}}`);
        return;
      }
      case 'html':
        return json(res, '<!doctype html><html><body><h1>Sign in to the Wi-Fi</h1></body></html>', 'text/html; charset=utf-8');
      case 'redirect':
        res.writeHead(302, { location });
        res.end();
        return;
      case 'moved':
        if (!url.pathname.startsWith('/moved')) {
          res.writeHead(301, { location: `/moved${url.pathname}` });
          res.end();
          return;
        }
        break;
      default:
        break;
    }
    const path = url.pathname.replace(/^\/moved/, '');
    if (path === DISCOVERY_PATH) {
      // Mozilla's discovery document names more; these are what a relying party reads.
      return json(res, {
        issuer: failure === 'wrong-issuer' ? 'https://accounts.attacker.example' : issuer,
        authorization_endpoint: `${issuer}/authorization`,
        token_endpoint: `${issuer}/v1/token`,
        jwks_uri: `${issuer}${JWKS_PATH}`,
        response_types_supported: ['code', 'token'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
      });
    }
    if (path === JWKS_PATH) return serveJwks(res);
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('{"code":404,"errno":999,"error":"Not Found"}');
  };
  const tls = options.tls;
  const server = tls ? https.createServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, handler) : http.createServer(handler);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  issuer = tls ? `https://${tls.host ?? 'localhost'}:${port}` : `http://127.0.0.1:${port}`;
  return {
    issuer,
    jwksUri: `${issuer}${JWKS_PATH}`,
    setKeys: (next) => {
      keys = next.map(publicJwkOf);
    },
    fail: (mode, o = {}) => {
      failure = mode;
      location = o.location ?? 'https://accounts.attacker.example/v1/jwks';
    },
    fetchCount: () => jwksRequests,
    discoveryCount: () => discoveryRequests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
