// Key sets from the provider (DESIGN §13.1): OAUTH_JWKS or WEBHOOK_JWKS as a
// URL, or the `jwks_uri` of OAUTH_ISSUER's discovery document. Fetched at
// start, then in the background every OAUTH_JWKS_REFRESH seconds; a token whose
// `kid` names no known key asks for one more fetch, shared by every request
// waiting and at most one per OAUTH_JWKS_MIN_INTERVAL. A failed fetch keeps the
// last good set; the last good set is kept on disk and read at start when the
// provider cannot be reached. The login path itself only reads `keys`.
//
// Not jose's createRemoteJWKSet: it has the cooldown and the shared fetch, but
// no disk copy, no background refresh and no per-key skipping (a set with one
// key it cannot use fails whole), and verifying through it would replace the
// node:crypto path of jwks.ts (jwtVerifier) that the login hot path keeps. What
// it would give us is a few lines here; the HTTP client is Node's own fetch.
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { discoveryUrl, remoteUrlProblem, type JwksConfig, type RemoteJwks } from '../../lib/config.js';
import type { Logger } from '../../lib/log.js';
import type { LoginMetrics } from '../../lib/metrics.js';
import { fixedKeySet, importJwks, importUsableJwks, type JwksKey, type JwtAlgorithm, type KeySet } from './jwks.js';

/** How a fetch ended: the `outcome` label of login_jwks_fetches_total. */
export type FetchOutcome = 'ok' | 'unreachable' | 'timeout' | 'status' | 'redirect' | 'too-large' | 'malformed' | 'issuer-mismatch' | 'no-usable-key';

/** A fetch that brought no usable set, and why (logged; never a key or a token). */
export class FetchFailure extends Error {
  constructor(
    readonly outcome: Exclude<FetchOutcome, 'ok'>,
    message: string,
  ) {
    super(message);
    this.name = 'FetchFailure';
  }
}

/** Same-origin redirects followed before giving up. */
const MAX_REDIRECTS = 3;

/** What a response body was, for a log line: its media type, or "no content type". */
function mediaType(contentType: string): string {
  return contentType.split(';')[0].trim().toLowerCase() || 'no content type';
}

/**
 * A JSON object from a response body, or FetchFailure('malformed') saying what
 * came instead (HTML, not JSON, not an object).
 */
export function parseJsonObject(text: string, contentType: string, what: string): Record<string, unknown> {
  const type = mediaType(contentType);
  if (type.includes('html')) throw new FetchFailure('malformed', `${what} is ${type}, not JSON`);
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new FetchFailure('malformed', `${what} is not JSON (${type})`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new FetchFailure('malformed', `${what} is not a JSON object`);
  return doc as Record<string, unknown>;
}

/** The `keys` of a JWKS document (RFC 7517 §5): an array, else FetchFailure('malformed'). */
export function jwksKeys(doc: Record<string, unknown>): unknown[] {
  if (!Array.isArray(doc.keys)) throw new FetchFailure('malformed', 'the key set has no "keys" array');
  return doc.keys;
}

/**
 * The JWKS URL of a discovery document (OpenID Connect Discovery 1.0 §4.3):
 * its `issuer` must be `issuer` exactly, its `jwks_uri` a URL keys may be
 * fetched from (remoteUrlProblem).
 */
export function discoveredJwksUri(doc: Record<string, unknown>, issuer: string): string {
  if (doc.issuer !== issuer) {
    const named = typeof doc.issuer === 'string' ? JSON.stringify(doc.issuer.slice(0, 200)) : 'none';
    throw new FetchFailure('issuer-mismatch', `the discovery document names issuer ${named}, not ${JSON.stringify(issuer)}`);
  }
  if (typeof doc.jwks_uri !== 'string') throw new FetchFailure('malformed', 'the discovery document has no "jwks_uri"');
  const problem = remoteUrlProblem(doc.jwks_uri);
  if (problem) throw new FetchFailure('malformed', `the discovery document's jwks_uri ${problem}`);
  return doc.jwks_uri;
}

export interface FetchLimits {
  timeoutMs: number;
  maxBytes: number;
}

/**
 * GET `url`: 200 and at most `maxBytes`, within `timeoutMs` in all, following
 * redirects only within the same origin. The body as text and its content type.
 */
export async function fetchLimited(url: string, limits: FetchLimits): Promise<{ text: string; contentType: string }> {
  const signal = AbortSignal.timeout(limits.timeoutMs);
  const failed = (err: unknown, where: URL): FetchFailure => {
    if (err instanceof FetchFailure) return err;
    if (signal.aborted) return new FetchFailure('timeout', `${where.origin} did not answer within ${limits.timeoutMs} ms`);
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return new FetchFailure('unreachable', `${where.origin}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
  };
  let current = new URL(url);
  for (let hop = 0; ; hop++) {
    let res: Response;
    try {
      res = await fetch(current, { redirect: 'manual', signal, headers: { accept: 'application/json' } });
    } catch (err) {
      throw failed(err, current);
    }
    try {
      if (res.status >= 300 && res.status < 400) {
        const location = res.headers.get('location');
        let next: URL | undefined;
        try {
          next = location === null ? undefined : new URL(location, current);
        } catch {
          next = undefined;
        }
        if (next === undefined || next.origin !== current.origin) {
          throw new FetchFailure('redirect', `${current.origin} redirected to ${next ? `another origin (${next.origin})` : 'nowhere usable'}`);
        }
        if (hop >= MAX_REDIRECTS) throw new FetchFailure('redirect', `more than ${MAX_REDIRECTS} redirects`);
        await res.body?.cancel();
        current = next;
        continue;
      }
      if (res.status !== 200) throw new FetchFailure('status', `${current.href} answered HTTP ${res.status}`);
      const declared = Number(res.headers.get('content-length') ?? '0');
      if (declared > limits.maxBytes) throw new FetchFailure('too-large', `${current.href} sent ${declared} bytes, more than ${limits.maxBytes}`);
      const chunks: Uint8Array[] = [];
      let size = 0;
      for await (const chunk of res.body ?? []) {
        size += (chunk as Uint8Array).length;
        if (size > limits.maxBytes) throw new FetchFailure('too-large', `${current.href} sent more than ${limits.maxBytes} bytes`);
        chunks.push(chunk as Uint8Array);
      }
      return { text: Buffer.concat(chunks).toString('utf8'), contentType: res.headers.get('content-type') ?? '' };
    } catch (err) {
      await res.body?.cancel().catch(() => undefined);
      throw failed(err, current);
    }
  }
}

/** The usable keys of one fetch, the JWKs they came from, what was skipped and where from. */
export interface FetchedSet {
  url: string;
  keys: JwksKey[];
  usable: unknown[];
  skipped: Array<{ index: number; kid?: string; reason: string }>;
}

/** One fetch of `remote`'s set: discovery first when it names an issuer. FetchFailure when no usable key came. */
export async function fetchKeySet(remote: RemoteJwks, algorithms: readonly JwtAlgorithm[]): Promise<FetchedSet> {
  let url = remote.jwksUrl;
  if (url === undefined) {
    const issuer = remote.discoveryIssuer!;
    const doc = await fetchLimited(discoveryUrl(issuer), remote);
    url = discoveredJwksUri(parseJsonObject(doc.text, doc.contentType, 'the discovery document'), issuer);
  }
  const body = await fetchLimited(url, remote);
  const { keys, usable, skipped } = importUsableJwks(jwksKeys(parseJsonObject(body.text, body.contentType, 'the key set')), algorithms);
  if (keys.length === 0) {
    throw new FetchFailure('no-usable-key', `${url} holds no usable key (${skipped.length} skipped: ${skipped.map((s) => s.reason).join('; ').slice(0, 500) || 'none there'})`);
  }
  return { url, keys, usable, skipped };
}

/** What the disk copy holds: still a JWKS document (extra members are allowed), so a file source can read it too. */
interface CacheDocument {
  /** The configured source (the JWKS URL, or the issuer found by discovery): a copy of another provider's set is never used. */
  source: string;
  /** When it was fetched, ms since the epoch. */
  fetched_at: number;
  keys: unknown[];
}

/** Writes `doc` to `file` atomically, 0600 from the first byte, never through a link (DESIGN §10). */
export function writeCacheFile(file: string, doc: CacheDocument): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  // O_EXCL: a link (or anything) already at the temporary name is refused, not followed.
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    writeSync(fd, JSON.stringify(doc) + '\n');
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    // rename replaces a link at `file`; it never writes through it.
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/** The disk copy of `source`'s set, when there is one (never through a link). Throws with the reason otherwise. */
export function readCacheFile(file: string, source: string): CacheDocument {
  const fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  let text: string;
  try {
    text = readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
  const doc = JSON.parse(text) as Partial<CacheDocument> | null;
  if (typeof doc !== 'object' || doc === null || !Array.isArray(doc.keys) || typeof doc.fetched_at !== 'number') throw new Error('not a key set copy');
  if (doc.source !== source) throw new Error(`it holds the keys of ${JSON.stringify(String(doc.source).slice(0, 200))}, not of ${JSON.stringify(source)}`);
  return doc as CacheDocument;
}

/** A key set and its upkeep; close() stops the background fetches. */
export interface KeySource extends KeySet {
  /** When the set in use was fetched from the provider (ms); undefined for a file, or while there is none. */
  readonly fetchedAtMs: number | undefined;
  /** Whether it is fetched (a URL or discovery) rather than read from a file. */
  readonly remote: boolean;
  /** Where the keys come from, for logs and the heartbeat. */
  readonly variable: string;
  close(): void;
}

/** Which set: a label in metrics and logs. */
export type SetName = 'oauth' | 'webhook';

export interface KeySourceOptions {
  set: SetName;
  algorithms: readonly JwtAlgorithm[];
  log: Logger;
  metrics: LoginMetrics;
}

/** A file's set: read and imported at start (ConfigError on a bad key), never changed. */
function fileKeySource(keys: JwksKey[], variable: string): KeySource {
  return { ...fixedKeySet(keys), fetchedAtMs: undefined, remote: false, variable, close: () => undefined };
}

/** A set fetched from the provider (module comment). */
class RemoteKeySource implements KeySource {
  keys: readonly JwksKey[] | undefined;
  fetchedAtMs: number | undefined;
  readonly remote = true;
  readonly variable: string;
  readonly retryAfterSeconds: number;
  private readonly source: string;
  private inflight: Promise<boolean> | undefined;
  private lastAttemptMs = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly settings: RemoteJwks,
    private readonly o: KeySourceOptions,
  ) {
    this.variable = settings.variable;
    this.source = settings.jwksUrl ?? settings.discoveryIssuer!;
    this.retryAfterSeconds = settings.minIntervalSeconds;
  }

  async start(): Promise<void> {
    this.readCache();
    // A start that found the provider down, even with the disk copy in use, tries again soon.
    this.schedule(await this.refresh('start'));
  }

  /** The disk copy, when it is of this source and holds a usable key: the set until a fetch succeeds. */
  private readCache(): void {
    const file = this.settings.cache;
    if (!file) return;
    const where = { set: this.o.set, variable: this.variable, file };
    let doc: CacheDocument;
    try {
      doc = readCacheFile(file, this.source);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') this.o.log.info(where, 'no cached key set yet');
      else this.o.log.warn({ ...where, err: code ?? (err as Error).message }, 'cached key set not used');
      return;
    }
    const { keys } = importUsableJwks(doc.keys, this.o.algorithms);
    if (keys.length === 0) {
      this.o.log.warn(where, 'cached key set not used: no usable key in it');
      return;
    }
    this.keys = keys;
    this.fetchedAtMs = doc.fetched_at;
    this.o.log.info({ ...where, keys: keys.length, fetchedAt: new Date(doc.fetched_at).toISOString() }, 'cached key set read');
  }

  /** One fetch at a time: a caller while one runs shares it. */
  private refresh(reason: 'start' | 'refresh' | 'retry' | 'unknown-kid'): Promise<boolean> {
    this.inflight ??= this.fetchOnce(reason).finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  private async fetchOnce(reason: string): Promise<boolean> {
    this.lastAttemptMs = Date.now();
    const { set, log, metrics } = this.o;
    try {
      const got = await fetchKeySet(this.settings, this.o.algorithms);
      if (this.closed) return false;
      for (const s of got.skipped) log.warn({ set, variable: this.variable, url: got.url, key: s.index, kid: s.kid, reason: s.reason }, 'key of the fetched set skipped');
      this.keys = got.keys;
      const fetchedAt = Date.now();
      this.fetchedAtMs = fetchedAt;
      metrics.jwksFetches.inc({ set, outcome: 'ok' });
      log.info({ set, variable: this.variable, url: got.url, reason, keys: got.keys.length, kids: got.keys.map((k) => (typeof k.kid === 'string' ? k.kid.slice(0, 100) : null)) }, 'key set fetched');
      this.writeCache(got.usable, fetchedAt);
      return true;
    } catch (err) {
      const failure = err instanceof FetchFailure ? err : new FetchFailure('unreachable', (err as Error).message);
      metrics.jwksFetches.inc({ set, outcome: failure.outcome });
      if (this.closed) return false;
      const kept = this.fetchedAtMs === undefined ? undefined : Math.round((Date.now() - this.fetchedAtMs) / 1000);
      log.warn(
        { set, variable: this.variable, reason, outcome: failure.outcome, err: failure.message, keptSetAgeSeconds: kept },
        this.keys ? 'key set fetch failed; the last good set stays' : `key set fetch failed; no key set yet (answering 503), trying again within ${this.settings.minIntervalSeconds} s`,
      );
      return false;
    }
  }

  private writeCache(usable: unknown[], fetchedAt: number): void {
    const file = this.settings.cache;
    if (!file) return;
    try {
      writeCacheFile(file, { source: this.source, fetched_at: fetchedAt, keys: usable });
    } catch (err) {
      this.o.log.warn({ set: this.o.set, file, err: (err as NodeJS.ErrnoException).code ?? (err as Error).message }, 'key set not written to its cache file');
    }
  }

  /** The next background fetch: after OAUTH_JWKS_REFRESH with a fresh set, within OAUTH_JWKS_MIN_INTERVAL without one or after a failure. */
  private schedule(lastOk: boolean): void {
    if (this.closed) return;
    const seconds = lastOk ? this.settings.refreshSeconds : this.settings.minIntervalSeconds;
    this.timer = setTimeout(() => {
      void this.refresh(this.keys ? 'refresh' : 'retry').then((ok) => this.schedule(ok));
    }, seconds * 1000);
    // The background fetch never keeps a stopping process alive.
    this.timer.unref();
  }

  async refreshForUnknownKid(): Promise<readonly JwksKey[] | undefined> {
    if (this.inflight === undefined && Date.now() - this.lastAttemptMs < this.settings.minIntervalSeconds * 1000) return this.keys;
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.settings.waitMs);
    });
    await Promise.race([this.refresh('unknown-kid'), waited]);
    clearTimeout(timer);
    return this.keys;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }
}

/**
 * The key set `config` names, ready to verify with: a file's, or the
 * provider's after the first fetch at start (or its disk copy, or none yet:
 * KeySet.keys undefined, and fetches go on in the background).
 */
export async function startKeySource(config: JwksConfig, variable: string, o: KeySourceOptions): Promise<KeySource> {
  if ('file' in config) return fileKeySource(importJwks(config.keys, variable, o.algorithms), variable);
  const source = new RemoteKeySource(config.remote, o);
  o.metrics.watchJwksAge(o.set, () => source.fetchedAtMs);
  await source.start();
  return source;
}
