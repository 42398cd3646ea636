// Mozilla's own Firefox Sync server (syncstorage-rs's `syncserver`, built, at
// SYNCSERVER_BIN) for tests that hold our login against the real thing: as a
// storage node that checks our tokens itself, or as Mozilla's combined server
// (its Rust tokenserver on PostgreSQL beside storage on MariaDB). Databases
// come from sql-servers.ts. Requests to a node are Hawk-signed by lib/hawk.ts,
// as the SDK signs them; a small proxy stands for a site's front door.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { JWK } from 'jose';
import { hawkHeader } from '../../lib/hawk.js';
import type { TokenPayload } from '../../lib/token.js';
import { jsonOrUndefined } from '../../services/login/testkit.js';
import { stopOnExit } from './children.js';
import { freePort } from './services.js';
import { startMariadb, startPostgres, type SqlServer } from './sql-servers.js';

/** The binary's path, or why tests that need it skip. */
export function syncserverBinary(): { bin: string } | { skip: string } {
  const bin = process.env.SYNCSERVER_BIN;
  if (!bin) return { skip: "SYNCSERVER_BIN is not set (Mozilla's syncserver, built; .ci/run sets it to ../shared/tools/syncstorage-rs/syncserver where that exists)" };
  try {
    accessSync(bin, constants.X_OK);
  } catch {
    return { skip: `SYNCSERVER_BIN=${bin} is not an executable file` };
  }
  return { bin };
}

/** The databases of Mozilla's combined server: MariaDB for storage, PostgreSQL for its tokenserver. */
export interface MozillaDatabases {
  storageDb: SqlServer;
  tokenDb: SqlServer;
  stop(): Promise<void>;
}

/** Both started, or why not (one that did start is stopped again). */
export async function startMozillaDatabases(): Promise<MozillaDatabases | { skip: string }> {
  const [my, pg] = await Promise.all([startMariadb(), startPostgres()]);
  if ('server' in my && 'server' in pg) {
    const [storageDb, tokenDb] = [my.server, pg.server];
    return { storageDb, tokenDb, stop: async () => void (await Promise.all([storageDb.stop(), tokenDb.stop()])) };
  }
  await Promise.all(['server' in my ? my.server.stop() : undefined, 'server' in pg ? pg.server.stop() : undefined]);
  return { skip: 'skip' in my ? my.skip : (pg as { skip: string }).skip };
}

/** Mozilla's tokenserver settings (combined mode), as its README configures them. */
export interface TokenserverSettings {
  /** postgres://… of its own database (its migrations create the tables). */
  databaseUrl: string;
  /** The storage node it registers at start (INIT_NODE_URL); default: its own URL (the combined setup). */
  nodeUrl?: string;
  nodeType: string;
  fxaEmailDomain: string;
  fxaMetricsHashSecret: string;
  /** The RSA public key it verifies access tokens with (FXA_OAUTH_PRIMARY_JWK). */
  jwk: JWK;
}

export interface SyncServerSettings {
  bin: string;
  /** SYNC_MASTER_SECRET: what the node's tokens are signed with (and, combined, what its tokenserver signs with). */
  masterSecret: string;
  /** mysql://… of the storage database (it creates its tables at start). */
  storageDbUrl: string;
  /** Listening port on 127.0.0.1; default a free one. Give the same one to come back at the same URL. */
  port?: number;
  /** Set: Mozilla's combined server (tokenserver + storage); unset: storage only. */
  tokenserver?: TokenserverSettings;
  /** RUST_LOG (default warn). */
  rustLog?: string;
}

export interface SyncServer {
  /** http://127.0.0.1:<port>, the URL it is reached at. */
  url: string;
  port: number;
  /** What it was started with: start again with these (changed) to restart on the same databases. */
  settings: SyncServerSettings & { port: number };
  /** Its output so far (the last 20 kB). */
  log(): string;
  stop(): Promise<void>;
}

const START_MS = 90_000;

function environment(s: SyncServerSettings & { port: number }): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    RUST_LOG: s.rustLog ?? 'warn',
    SYNC_HUMAN_LOGS: 'true',
    // An empty statsd host crashes it at start; nothing listens there.
    SYNC_STATSD_HOST: '127.0.0.1',
    SYNC_HOST: '127.0.0.1',
    SYNC_PORT: String(s.port),
    SYNC_MASTER_SECRET: s.masterSecret,
    SYNC_SYNCSTORAGE__ENABLED: 'true',
    SYNC_SYNCSTORAGE__DATABASE_URL: s.storageDbUrl,
    SYNC_TOKENSERVER__ENABLED: s.tokenserver ? 'true' : 'false',
  };
  const t = s.tokenserver;
  if (t) {
    Object.assign(env, {
      SYNC_TOKENSERVER__DATABASE_URL: t.databaseUrl,
      SYNC_TOKENSERVER__RUN_MIGRATIONS: 'true',
      SYNC_TOKENSERVER__NODE_TYPE: t.nodeType,
      SYNC_TOKENSERVER__INIT_NODE_URL: t.nodeUrl ?? `http://127.0.0.1:${s.port}`,
      SYNC_TOKENSERVER__FXA_EMAIL_DOMAIN: t.fxaEmailDomain,
      SYNC_TOKENSERVER__FXA_METRICS_HASH_SECRET: t.fxaMetricsHashSecret,
      // Never called: a key is configured, and every token here is a JWT it can decode.
      SYNC_TOKENSERVER__FXA_OAUTH_SERVER_URL: 'http://127.0.0.1:9',
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__KTY: 'RSA',
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__ALG: 'RS256',
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__KID: String(t.jwk.kid),
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__USE: 'sig',
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__FXA_CREATED_AT: '1564502400',
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__N: String(t.jwk.n),
      SYNC_TOKENSERVER__FXA_OAUTH_PRIMARY_JWK__E: String(t.jwk.e),
    });
  }
  return env;
}

function exitOf(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Starts syncserver and waits until `/__heartbeat__` answers 200. */
export async function startSyncServer(settings: SyncServerSettings): Promise<SyncServer> {
  const s = { ...settings, port: settings.port ?? (await freePort()) };
  const child = spawn(s.bin, [], { env: environment(s), stdio: ['ignore', 'pipe', 'pipe'] });
  stopOnExit(child);
  let out = '';
  const keep = (d: Buffer) => (out = (out + d.toString()).slice(-20_000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = exitOf(child);
  const url = `http://127.0.0.1:${s.port}`;
  const stop = async () => {
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  };
  const deadline = Date.now() + START_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`syncserver exited at start (${child.exitCode ?? child.signalCode}):\n${out}`);
    try {
      const res = await fetch(`${url}/__heartbeat__`, { signal: AbortSignal.timeout(5000) });
      await res.body?.cancel();
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`syncserver did not answer /__heartbeat__ with 200 within ${START_MS / 1000} s:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { url, port: s.port, settings: s, log: () => out, stop };
}

// ---- Talking to a storage node, as Firefox does ----

/** What a token server answers with that a client needs for the node. */
export interface NodeToken {
  id: string;
  key: string;
  api_endpoint: string;
}

/** A token payload's ids of its user, as a storage node reads them (Mozilla's Spanner nodes key users by fxa_uid and fxa_kid). */
export function userIds(payload: TokenPayload): Pick<TokenPayload, 'fxa_uid' | 'fxa_kid' | 'hashed_fxa_uid' | 'hashed_device_id'> {
  return { fxa_uid: payload.fxa_uid, fxa_kid: payload.fxa_kid, hashed_fxa_uid: payload.hashed_fxa_uid, hashed_device_id: payload.hashed_device_id };
}

export interface NodeResponse {
  status: number;
  text: string;
  json: any;
}

/**
 * A Hawk-signed request to `<api_endpoint>/<path>` (e.g. `info/collections`,
 * `storage/bookmarks/x`); a body is sent as JSON with its payload hash signed.
 * `sign` overrides the credentials the header is made with (tampering tests).
 */
export async function nodeRequest(token: NodeToken, method: string, path: string, body?: unknown, sign: Partial<Pick<NodeToken, 'id' | 'key'>> = {}): Promise<NodeResponse> {
  const url = `${token.api_endpoint}/${path}`;
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const contentType = payload === undefined ? undefined : 'application/json';
  const authorization = hawkHeader({ id: sign.id ?? token.id, key: sign.key ?? token.key, method, url, payload, contentType });
  const res = await fetch(url, {
    method,
    headers: { Authorization: authorization, ...(contentType ? { 'Content-Type': contentType } : {}) },
    body: payload,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  return { status: res.status, text, json: jsonOrUndefined(text) };
}

// ---- A site's front door ----

export interface SiteProxy {
  /** The site's one public URL: http://127.0.0.1:<port>. */
  url: string;
  port: number;
  /** Where each request goes: the origin (http://host:port) for its path; changed at any time. */
  route: (path: string) => string;
  close(): Promise<void>;
}

/**
 * A reverse proxy on one loopback port that sends each request to the origin
 * `route` picks by path, passing every header on unchanged (Host included, so
 * a node checks the Hawk MAC against the site's host and port): a site's TLS
 * proxy without the TLS.
 */
export async function startSiteProxy(route: (path: string) => string): Promise<SiteProxy> {
  const proxy: Partial<SiteProxy> = { route };
  const server = http.createServer((req, res) => {
    const origin = new URL(proxy.route!(req.url ?? '/'));
    const upstream = http.request(
      { host: origin.hostname, port: origin.port, method: req.method, path: req.url, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(proxy, {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  }) as SiteProxy;
}
