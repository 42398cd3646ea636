// Configuration from environment variables (DESIGN §7). Every default lives in
// DEFAULTS; every value is validated at start and a bad one stops the service
// with a ConfigError that names the variable.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { ANY_DOMAIN, emailDomain, normalizeDomain, normalizeEmail } from './email.js';
import { ConfigError } from './errors.js';
import { TOKEN_SECRETS_MODES, type TokenSecretsMode } from './token.js';

export type Env = Record<string, string | undefined>;

/** The most login workers (LOGIN_WORKERS) one login runs. */
export const MAX_LOGIN_WORKERS = 64;

export const DEFAULTS = {
  DATA_DIR: './data',
  APPLICATIONS: 'sync/1.5',
  TOKEN_DURATION: 3600,
  /** What tokens are signed with (lib/token.ts tokenSecrets): each node's derived secret, or the master secret itself. */
  TOKEN_SECRETS: 'derived' as TokenSecretsMode,
  ALLOW_NEW_USERS: true,
  DIRECTORY_ADDR: '127.0.0.1:50051',
  NODEASSIGN_ADDR: '127.0.0.1:50052',
  LOGIN_PORT: 8000,
  /**
   * Login's cluster workers: one per CPU this process may run on (its CPU
   * affinity, as os.availableParallelism() reports it), counted where it starts.
   * `npm start` runs one unless LOGIN_WORKERS says otherwise (scripts/stack.ts).
   */
  LOGIN_WORKERS: Math.min(availableParallelism(), MAX_LOGIN_WORKERS),
  GATEWAY_PORT: 8080,
  DIRECTORY_PORT: 50051,
  NODEASSIGN_PORT: 50052,
  /** Host the services listen on. */
  BIND_HOST: '127.0.0.1',
  /** Allowed clock skew for assertions, seconds. */
  ASSERTION_SKEW: 60,
  /** How far beyond now an assertion's / a certificate's `exp` may lie (plus the skew), seconds. */
  MAX_ASSERTION_LIFETIME: 600,
  MAX_CERTIFICATE_LIFETIME: 86_400,
  /** How far beyond now a Bearer access token's `exp` may lie (plus the skew), seconds. */
  MAX_ACCESS_TOKEN_LIFETIME: 86_400,
  /** How old (by `iat`) or how far from expiry (by `exp`) a security event token may be, seconds (DESIGN §10). */
  WEBHOOK_MAX_AGE: 3600,
  /** Certificate claim carrying the generation number. */
  GENERATION_CLAIM: 'fxa-generation',
  /** Deadline of each gRPC call from login, milliseconds. */
  GRPC_DEADLINE_MS: 2000,
  /** Retry-After on 503, seconds. */
  RETRY_AFTER: 10,
  /** Client-state changes one user may make in any 24 hours (DESIGN §10); beyond it 429. */
  CLIENT_STATE_CHANGES_PER_DAY: 10,
  /** `users purge`: replaced records younger than this are kept (the grace period), seconds. */
  PURGE_GRACE_SECONDS: 7 * 86_400,
  /** `users purge`: seen client states kept per user (newest first); rule 3 of DESIGN §3 holds for these. */
  PURGE_KEEP_CLIENT_STATES: 20,
  /** Share of a node's capacity released when no node has slots left. */
  RELEASE_RATE: 0.1,
  MAINTENANCE_MODE: false,
  /** Hawk timestamp skew, seconds. */
  HAWK_SKEW: 60,
  /** Largest number of nonces the gateway remembers; beyond it 503, never an early forget. */
  NONCE_CACHE_SIZE: 1_000_000,
  /** Largest number of nonces one token may have remembered at once (its requests within ~2 × HAWK_SKEW). */
  NONCE_PER_TOKEN: 1000,
  /** Where the gateway remembers nonces: `memory` (one gateway process per node) or a `redis://` / `rediss://` URL shared by a node's gateways. */
  NONCE_STORE: 'memory',
  /** Longest wait for the shared nonce store's answer, milliseconds; slower is 503 + Retry-After. */
  NONCE_STORE_TIMEOUT_MS: 500,
  /** Largest body the gateway buffers to check a Hawk payload hash, bytes. */
  HASH_BODY_LIMIT: 1_048_576,
  /** Gateway upstream timeouts, milliseconds. */
  UPSTREAM_CONNECT_TIMEOUT_MS: 2000,
  UPSTREAM_TIMEOUT_MS: 30_000,
  LOG_LEVEL: 'info',
  /** The FxA e-mail domain: there an e-mail's local part is the account id (DESIGN §9.3). */
  OAUTH_EMAIL_DOMAIN: 'api.accounts.firefox.com',
  /**
   * Where /metrics listens when LOGIN_METRICS_PORT / GATEWAY_METRICS_PORT / DIRECTORY_METRICS_PORT / NODEASSIGN_METRICS_PORT is set
   * (unset: no metrics listener, and /metrics is never on the public ports).
   */
  METRICS_HOST: '127.0.0.1',
  /** The directory's records-by-state gauge is counted at most this often, ms (a MongoDB count scans the collection). */
  RECORD_COUNTS_MAX_AGE_MS: 15_000,
  /** The scope a Bearer access token must carry (DESIGN §9.1). */
  OAUTH_SCOPE: 'https://identity.mozilla.com/apps/oldsync',
  /** A key set fetched from a URL (DESIGN §13.1; OAUTH_JWKS and WEBHOOK_JWKS alike) is fetched again this often, seconds. */
  OAUTH_JWKS_REFRESH: 3600,
  /** Fewest seconds between two fetches for an unknown `kid`; also how often a login without any set tries again. */
  OAUTH_JWKS_MIN_INTERVAL: 30,
  /** One fetch (discovery or the set) gives up after this long, ms. */
  OAUTH_JWKS_TIMEOUT_MS: 5000,
  /** Largest discovery document or key set read, bytes (Mozilla's set is about 1 KiB). */
  OAUTH_JWKS_MAX_BYTES: 262_144,
  /** Longest a token with an unknown `kid` waits for the shared fetch, ms. */
  OAUTH_JWKS_WAIT_MS: 5000,

  // ---- demo application (services/demo-app), the app behind the gateway in the dev stack and compose ----
  DEMO_APP_PORT: 8090,

  // ---- overload signal (lib/load.ts): X-Backoff before refusing, 503 beyond a hard cap ----
  /** X-Backoff value, seconds. */
  BACKOFF_SECONDS: 30,
  /** Token requests in flight above which answers carry X-Backoff. */
  BACKOFF_INFLIGHT: 100,
  /** Token requests in flight above which new ones get 503 + Retry-After. */
  MAX_INFLIGHT: 400,
  /** Mean event-loop delay (ms, over the last second) above which answers carry X-Backoff; 0 turns the check off. */
  BACKOFF_LOOP_DELAY_MS: 500,
} as const;

// ---- parsers: each names its variable in the error ----

export function str(env: Env, name: string, fallback?: string): string {
  const v = env[name];
  if (v === undefined || v.trim() === '') {
    if (fallback === undefined) throw new ConfigError(name, 'is required');
    return fallback;
  }
  return v.trim();
}

export function int(env: Env, name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const v = env[name];
  if (v === undefined || v.trim() === '') return fallback;
  if (!/^\d+$/.test(v.trim())) throw new ConfigError(name, `must be a whole number, got ${JSON.stringify(v)}`);
  const n = Number(v); // Number() skips the same white space as trim()
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

export function num(env: Env, name: string, fallback: number, min: number, max: number): number {
  const v = env[name];
  if (v === undefined || v.trim() === '') return fallback;
  const n = Number(v); // Number() skips the same white space as trim()
  if (!Number.isFinite(n) || n < min || n > max) {
    throw new ConfigError(name, `must be a number between ${min} and ${max}, got ${JSON.stringify(v)}`);
  }
  return n;
}

export function bool(env: Env, name: string, fallback: boolean): boolean {
  const v = env[name];
  if (v === undefined || v.trim() === '') return fallback;
  const s = v.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(s)) return true;
  if (['0', 'false', 'no', 'off'].includes(s)) return false;
  throw new ConfigError(name, `must be true or false, got ${JSON.stringify(v)}`);
}

export function port(env: Env, name: string, fallback: number): number {
  return int(env, name, fallback, 0, 65535);
}

/** The gRPC target schemes address() accepts before host:port. */
const ADDRESS_SCHEMES = ['dns:///', 'ipv4:', 'ipv6:'] as const;

/** host:port of a gRPC service. */
const HOST_PORT = /^[A-Za-z0-9.\-_[\]:]+:\d{1,5}$/;

/**
 * A gRPC client target: `host:port`, `dns:///host:port` (every address the name resolves to, the
 * way replicas are reached), or a fixed list `ipv4:host:port,host:port` / `ipv6:[addr]:port,…`.
 */
export function address(env: Env, name: string, fallback: string): string {
  const v = str(env, name, fallback);
  // No pattern over the whole value: `.` stops at a line break, and a value may hold one.
  const scheme = ADDRESS_SCHEMES.find((s) => v.startsWith(s));
  const rest = scheme === undefined ? v : v.slice(scheme.length);
  const parts = scheme === 'ipv4:' || scheme === 'ipv6:' ? rest.split(',') : [rest];
  if (!parts.every((p) => HOST_PORT.test(p))) {
    throw new ConfigError(name, `must be host:port, dns:///host:port or ipv4:host:port,host:port, got ${JSON.stringify(v)}`);
  }
  return v;
}

export function list(env: Env, name: string, fallback: string): string[] {
  return str(env, name, fallback)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** A DNS domain name, lowercased. */
export function domain(env: Env, name: string, fallback: string): string {
  const v = str(env, name, fallback).toLowerCase();
  if (v.length > 253 || !/^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/.test(v)) {
    throw new ConfigError(name, `must be a domain name, got ${JSON.stringify(v)}`);
  }
  return v;
}

/** An absolute http(s) URL without a trailing slash, query or fragment. */
export function url(env: Env, name: string, fallback?: string): string {
  const v = str(env, name, fallback);
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(name, `must be an absolute URL, got ${JSON.stringify(v)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(name, 'must be an http or https URL');
  if (u.search || u.hash) throw new ConfigError(name, 'must not carry a query or fragment');
  return v.replace(/\/+$/, '');
}

/** The bytes of the file a setting names; unreadable, a ConfigError naming the setting and why (ENOENT, EACCES, …). */
function settingFile(variable: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new ConfigError(variable, `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/** The JSON document in the file a setting names. */
function settingJson(variable: string, file: string): unknown {
  const text = settingFile(variable, file).toString();
  try {
    return JSON.parse(text);
  } catch {
    throw new ConfigError(variable, `${file} is not valid JSON`);
  }
}

/**
 * A secret from NAME, or from the file NAME_FILE names (the Docker secrets
 * convention); undefined when neither is set.
 */
export function secretValue(env: Env, name: string): string | undefined {
  const fileVar = `${name}_FILE`;
  const direct = env[name]?.trim() ? env[name] : undefined;
  const file = env[fileVar]?.trim();
  if (direct !== undefined && file) throw new ConfigError(name, `set either ${name} or ${fileVar}, not both`);
  if (!file) return direct?.trim();
  const text = settingFile(fileVar, file).toString();
  if (text.trim() === '') throw new ConfigError(fileVar, `${file} is empty`);
  return text.trim();
}

/** Node secrets are half a master's length: 64 characters give 128-bit node secrets (DESIGN §10). */
export const MIN_MASTER_SECRET_LENGTH = 64;
/** Bytes of INTERNAL_SECRET (DESIGN §10). */
export const MIN_INTERNAL_SECRET_BYTES = 32;

/** Secrets that were published in examples, docs or tests: anyone can read them, so none is accepted. */
export const SAMPLE_SECRETS: ReadonlySet<string> = new Set([
  'dev-only-not-secret-0123456789abcdef',
  'entry-point-master-secret-0123456789',
  'suite-master-secret-newest-0001',
  'suite-master-secret-older-00002',
  'fault-master-secret-0123456789abcdef',
  'outage-master-secret-00000001',
  'cli-test-master-secret-0123456789',
  'bench-master-secret-0123456789abcdef',
]);

/** Why `secrets` cannot be MASTER_SECRETS, or undefined when they can. */
export function masterSecretsProblem(secrets: readonly string[]): string | undefined {
  if (secrets.length === 0) return 'must hold at least one secret';
  for (const s of secrets) {
    if (SAMPLE_SECRETS.has(s)) return 'holds a published sample value; generate one with `openssl rand -hex 32`';
    if (s.length < MIN_MASTER_SECRET_LENGTH) {
      return `each secret must be at least ${MIN_MASTER_SECRET_LENGTH} characters (\`openssl rand -hex 32\`)`;
    }
  }
  return undefined;
}

/** MASTER_SECRETS (or MASTER_SECRETS_FILE): comma-separated, newest first. */
export function masterSecrets(env: Env, fallback?: string[]): string[] {
  const v = secretValue(env, 'MASTER_SECRETS');
  if (v === undefined) {
    if (fallback && fallback.length > 0) return fallback;
    throw new ConfigError('MASTER_SECRETS', 'is required (comma-separated secrets, newest first)');
  }
  const secrets = list({ MASTER_SECRETS: v }, 'MASTER_SECRETS', '');
  const problem = masterSecretsProblem(secrets);
  if (problem) throw new ConfigError('MASTER_SECRETS', problem);
  return secrets;
}

/**
 * Why `secrets` cannot be NODE_SECRETS, or undefined when they can: each is what
 * `cli nodes secret` prints, the hex of a node secret derived from a master
 * secret of at least MIN_MASTER_SECRET_LENGTH characters (DESIGN §5: half its
 * bytes), so lowercase hex of an even length, at least that long.
 */
export function nodeSecretsProblem(secrets: readonly string[]): string | undefined {
  if (secrets.length === 0) return 'must hold at least one secret';
  const bad = secrets.findIndex((s) => !/^(?:[0-9a-f]{2})+$/.test(s) || s.length < MIN_MASTER_SECRET_LENGTH);
  if (bad === -1) return undefined;
  // Never the value itself: it is a secret, and may be a master secret put in the wrong place.
  return (
    `secret ${bad + 1} of ${secrets.length} is not a node secret: each must be what \`cli nodes secret <app> <NODE_URL>\` prints, ` +
    `${MIN_MASTER_SECRET_LENGTH} or more lowercase hex digits, an even number of them`
  );
}

/**
 * NODE_SECRETS (or NODE_SECRETS_FILE): a gateway's own node's secrets, newest
 * first, separated by commas or line breaks (so the file may be exactly what
 * `cli nodes secret` prints); undefined when neither is set.
 */
export function nodeSecrets(env: Env): string[] | undefined {
  const v = secretValue(env, 'NODE_SECRETS');
  if (v === undefined) return undefined;
  const secrets = v
    .split(/[,\r\n]/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const problem = nodeSecretsProblem(secrets);
  if (problem) throw new ConfigError('NODE_SECRETS', problem);
  return secrets;
}

/** TOKEN_SECRETS: `derived` or `master` (lib/token.ts tokenSecrets); login, the gateway and the CLI must agree. */
export function tokenSecretsMode(env: Env): TokenSecretsMode {
  const v = str(env, 'TOKEN_SECRETS', DEFAULTS.TOKEN_SECRETS);
  const mode = TOKEN_SECRETS_MODES.find((m) => m === v);
  if (mode === undefined) throw new ConfigError('TOKEN_SECRETS', `must be ${TOKEN_SECRETS_MODES.join(' or ')}, got ${JSON.stringify(v)}`);
  return mode;
}

/** INTERNAL_SECRET (or INTERNAL_SECRET_FILE): what every internal gRPC call carries. */
export function internalSecret(env: Env, fallback?: string): string {
  const v = secretValue(env, 'INTERNAL_SECRET') ?? fallback;
  if (v === undefined) throw new ConfigError('INTERNAL_SECRET', 'is required (shared by login, directory, nodeassign and the CLI; `openssl rand -hex 32`)');
  const problem = internalSecretProblem(v);
  if (problem) throw new ConfigError('INTERNAL_SECRET', problem);
  return v;
}

/** Why `secret` cannot be INTERNAL_SECRET, or undefined when it can. */
export function internalSecretProblem(secret: string): string | undefined {
  if (SAMPLE_SECRETS.has(secret)) return 'is a published sample value';
  if (Buffer.byteLength(secret) < MIN_INTERNAL_SECRET_BYTES) return `must be at least ${MIN_INTERNAL_SECRET_BYTES} bytes (\`openssl rand -hex 32\`)`;
  return undefined;
}

/** PEM files for mutual TLS on internal gRPC. */
export interface GrpcTls {
  cert: Buffer;
  key: Buffer;
  ca: Buffer;
}

/** GRPC_TLS_CERT, GRPC_TLS_KEY, GRPC_TLS_CA: all three (mutual TLS) or none (plaintext). */
export function grpcTls(env: Env): GrpcTls | undefined {
  const names = ['GRPC_TLS_CERT', 'GRPC_TLS_KEY', 'GRPC_TLS_CA'] as const;
  const set = names.filter((n) => env[n]?.trim());
  if (set.length === 0) return undefined;
  const unset = names.filter((n) => !set.includes(n));
  if (unset.length > 0) throw new ConfigError(unset[0], `must be set with ${set.join(' and ')} (all three or none)`);
  const [cert, key, ca] = names.map((n) => settingFile(n, str(env, n)));
  return { cert, key, ca };
}

/** How a gRPC server or client authenticates internal calls (DESIGN §10). */
export interface GrpcAuth {
  internalSecret: string;
  tls?: GrpcTls;
}

export function grpcAuth(env: Env, fallbackSecret?: string): GrpcAuth {
  return { internalSecret: internalSecret(env, fallbackSecret), tls: grpcTls(env) };
}

/** APPLICATIONS: `name/version,...` → name → versions. */
export function applications(env: Env): Map<string, Set<string>> {
  const apps = new Map<string, Set<string>>();
  for (const item of list(env, 'APPLICATIONS', DEFAULTS.APPLICATIONS)) {
    const m = /^([A-Za-z0-9_-]+)\/([A-Za-z0-9._-]+)$/.exec(item);
    if (!m) throw new ConfigError('APPLICATIONS', `expected name/version, got ${JSON.stringify(item)}`);
    const versions = apps.get(m[1]) ?? new Set<string>();
    versions.add(m[2]);
    apps.set(m[1], versions);
  }
  if (apps.size === 0) throw new ConfigError('APPLICATIONS', 'must name at least one application');
  return apps;
}

/** STORE_URL: `mongodb://…`, `mongodb+srv://…` or `sqlite:<path>`; default SQLite under DATA_DIR. */
export function storeUrl(env: Env): string {
  const dataDir = str(env, 'DATA_DIR', DEFAULTS.DATA_DIR);
  const v = str(env, 'STORE_URL', `sqlite:${path.join(dataDir, 'tokenserver.db')}`);
  if (/^mongodb(\+srv)?:\/\//.test(v)) return v;
  if (/^sqlite:.+/.test(v)) return v;
  throw new ConfigError('STORE_URL', `must start with mongodb:// or sqlite:, got ${JSON.stringify(v.split('@').pop())}`);
}

export interface JsonWebKeyLike {
  kty: string;
  [k: string]: unknown;
}
/** A key as BrowserID support documents publish it: `{"algorithm": "RS", "n", "e"}` (decimal) or `{"algorithm": "DS", "p", "q", "g", "y"}` (hex). */
export interface BrowserIdKeyLike {
  kty?: undefined;
  algorithm: string;
  [k: string]: unknown;
}
export type TrustedKeyLike = JsonWebKeyLike | BrowserIdKeyLike;
export interface TrustedIssuer {
  keys: TrustedKeyLike[];
  /** E-mail domains it may certify, normalised (lib/email.ts); `*` for any. */
  domains: string[];
}
export type TrustedIssuers = Map<string, TrustedIssuer>;

/**
 * The domain an issuer certifies when its entry lists none: its host name
 * (`idp.example` for `idp.example`, `https://idp.example/` or `idp.example:8443`);
 * null when the issuer name is not a host name or a URL.
 */
export function issuerHostName(issuer: string): string | null {
  let u: URL;
  try {
    u = new URL(issuer.includes('://') ? issuer : `https://${issuer}`);
  } catch {
    return null;
  }
  // A bare name must be exactly a host (and port): "idp.example/x" is not one.
  if (!issuer.includes('://') && u.host !== issuer.toLowerCase()) return null;
  return u.hostname === '' ? null : normalizeDomain(u.hostname);
}

function issuerDomains(issuer: string, raw: unknown, variable: string): string[] {
  if (raw === undefined) {
    const host = issuerHostName(issuer);
    if (!host) throw new ConfigError(variable, `issuer ${issuer}: not a host name, so "domains" must list what it may certify`);
    return [host];
  }
  if (!Array.isArray(raw) || raw.length === 0) throw new ConfigError(variable, `issuer ${issuer}: "domains" must be a non-empty array (["*"] for any domain)`);
  return raw.map((d) => {
    if (typeof d !== 'string' || d === '' || d.length > 255 || /[\s@]/.test(d) || (d.includes('*') && d !== ANY_DOMAIN)) {
      throw new ConfigError(variable, `issuer ${issuer}: every domain must be a domain name or "*" (subdomains are not matched: list each), got ${JSON.stringify(d)}`);
    }
    return normalizeDomain(d);
  });
}

/**
 * Parses the TRUSTED_ISSUERS document `{"<issuer>": {"keys": [key, …], "domains": ["corp.example", …]}}`,
 * each key a JWK or a BrowserID support-document key; login imports (and so fully checks) them at start.
 */
export function parseTrustedIssuers(doc: unknown, variable = 'TRUSTED_ISSUERS'): TrustedIssuers {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new ConfigError(variable, 'must be a JSON object {"<issuer>": {"keys": [JWK, …], "domains": ["<e-mail domain>", …]}}');
  }
  const out: TrustedIssuers = new Map();
  for (const [issuer, entry] of Object.entries(doc)) {
    const keys = (entry as { keys?: unknown })?.keys;
    if (!Array.isArray(keys) || keys.length === 0) throw new ConfigError(variable, `issuer ${issuer}: "keys" must be a non-empty array`);
    for (const k of keys) {
      const { kty, algorithm } = (typeof k === 'object' && k !== null ? k : {}) as { kty?: unknown; algorithm?: unknown };
      if (!(typeof kty === 'string' || (kty === undefined && typeof algorithm === 'string'))) {
        throw new ConfigError(variable, `issuer ${issuer}: every key must be a JWK with "kty" or a BrowserID key with "algorithm"`);
      }
    }
    out.set(issuer, { keys: keys as TrustedKeyLike[], domains: issuerDomains(issuer, (entry as { domains?: unknown }).domains, variable) });
  }
  return out;
}

export function trustedIssuersFile(env: Env): TrustedIssuers {
  return parseTrustedIssuers(settingJson('TRUSTED_ISSUERS', str(env, 'TRUSTED_ISSUERS')));
}

/** Where a service serves /metrics, when it does. */
export interface MetricsListener {
  host: string;
  port: number;
}

/** `<portVariable>` unset: no metrics listener. */
export function metricsListener(env: Env, portVariable: string): MetricsListener | undefined {
  if (env[portVariable] === undefined || env[portVariable].trim() === '') return undefined;
  return { host: str(env, 'METRICS_HOST', DEFAULTS.METRICS_HOST), port: port(env, portVariable, 0) };
}

/** A JWKS file `{"keys": [JWK, …]}` (OAUTH_JWKS, WEBHOOK_JWKS); every key needs `kty`. */
export function jwksFile(env: Env, name: string): JsonWebKeyLike[] {
  const file = str(env, name);
  const keys = (settingJson(name, file) as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0) throw new ConfigError(name, `${file} must be {"keys": [JWK, …]} with at least one key`);
  for (const k of keys) {
    if (typeof (k as { kty?: unknown } | null)?.kty !== 'string') throw new ConfigError(name, 'every key must be a JWK with "kty"');
  }
  return keys as JsonWebKeyLike[];
}

/** Hosts plain http:// may reach (DESIGN §13.1): this machine only. */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.toLowerCase();
  return h === 'localhost' || h.endsWith('.localhost') || h === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * Why `value` may not be fetched keys from (DESIGN §13.1), or undefined when it
 * may: an absolute https:// URL, or http:// to a loopback host. No user or
 * password in it (URLs are logged).
 */
export function remoteUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `is not a URL: ${JSON.stringify(value.slice(0, 200))}`;
  }
  if (url.username !== '' || url.password !== '') return 'must not carry a user or password';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:') return isLoopbackHost(url.hostname) ? undefined : `http:// is accepted only to a loopback host (use https://), got ${url.host}`;
  return `must be an https:// URL, got ${url.protocol}`;
}

/** `value` is a URL (any scheme) rather than a file path. */
const URL_FORM = /^[a-z][a-z0-9+.-]*:\/\//i;

/** The OpenID Connect discovery document of `issuer` (OpenID Connect Discovery 1.0 §4). */
export function discoveryUrl(issuer: string): string {
  return `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
}

/**
 * A key set fetched from the provider (DESIGN §13.1): from a JWKS URL, or from
 * the `jwks_uri` of the issuer's discovery document, kept on disk at `cache`.
 */
export interface RemoteJwks {
  /** The variable the set comes from (OAUTH_JWKS or WEBHOOK_JWKS, or OAUTH_ISSUER for discovery): logs and errors name it. */
  variable: string;
  /** Exactly one of: the JWKS URL, or the issuer whose discovery document names it. */
  jwksUrl?: string;
  discoveryIssuer?: string;
  /** Where the last good set is kept; unset: nowhere. */
  cache?: string;
  refreshSeconds: number;
  minIntervalSeconds: number;
  timeoutMs: number;
  maxBytes: number;
  waitMs: number;
}

/** A key set: read from a file at start, or fetched (RemoteJwks). */
export type JwksConfig = { file: string; keys: JsonWebKeyLike[] } | { remote: RemoteJwks };

/** What OAUTH_JWKS and WEBHOOK_JWKS share: how often a fetched set is fetched again. */
function remoteJwks(env: Env, variable: string, where: { jwksUrl: string } | { discoveryIssuer: string }, cacheVariable: string): RemoteJwks {
  const cache = env[cacheVariable]?.trim();
  return {
    variable,
    ...where,
    ...(cache ? { cache: path.resolve(cache) } : {}),
    refreshSeconds: int(env, 'OAUTH_JWKS_REFRESH', DEFAULTS.OAUTH_JWKS_REFRESH, 1, 86_400 * 7),
    minIntervalSeconds: int(env, 'OAUTH_JWKS_MIN_INTERVAL', DEFAULTS.OAUTH_JWKS_MIN_INTERVAL, 1, 3600),
    timeoutMs: DEFAULTS.OAUTH_JWKS_TIMEOUT_MS,
    maxBytes: DEFAULTS.OAUTH_JWKS_MAX_BYTES,
    waitMs: DEFAULTS.OAUTH_JWKS_WAIT_MS,
  };
}

/** `name` as a file path (read now) or a URL (fetched by login); undefined when unset. */
export function jwksConfig(env: Env, name: string, cacheVariable: string): JwksConfig | undefined {
  const value = env[name]?.trim();
  if (!value) return undefined;
  if (!URL_FORM.test(value)) return { file: value, keys: jwksFile(env, name) };
  const problem = remoteUrlProblem(value);
  if (problem) throw new ConfigError(name, problem);
  return { remote: remoteJwks(env, name, { jwksUrl: value }, cacheVariable) };
}

/** OAUTH_ISSUER, when set: an exact string (discovery compares it byte for byte). */
function oauthIssuer(env: Env): string | undefined {
  return env.OAUTH_ISSUER?.trim() || undefined;
}

/** The Bearer scheme (DESIGN §9.1, §13.1): on when OAUTH_JWKS is set, or OAUTH_ISSUER alone (keys by discovery). */
export interface BearerConfig {
  jwks: JwksConfig;
  /** OAUTH_ISSUER: the `iss` required, when set. */
  issuer?: string;
  scope: string;
  /** MAX_ACCESS_TOKEN_LIFETIME, seconds: how far beyond now `exp` may lie. */
  maxLifetime: number;
}

export function bearerConfig(env: Env): BearerConfig | undefined {
  const issuer = oauthIssuer(env);
  let jwks = jwksConfig(env, 'OAUTH_JWKS', 'OAUTH_JWKS_CACHE');
  if (!jwks && issuer) {
    const problem = remoteUrlProblem(issuer);
    if (problem) throw new ConfigError('OAUTH_ISSUER', `${problem} (with OAUTH_JWKS unset, its discovery document names the keys)`);
    jwks = { remote: remoteJwks(env, 'OAUTH_ISSUER', { discoveryIssuer: issuer }, 'OAUTH_JWKS_CACHE') };
  }
  if (!jwks) return undefined;
  return {
    jwks,
    issuer,
    scope: str(env, 'OAUTH_SCOPE', DEFAULTS.OAUTH_SCOPE),
    maxLifetime: int(env, 'MAX_ACCESS_TOKEN_LIFETIME', DEFAULTS.MAX_ACCESS_TOKEN_LIFETIME, 1, 86_400 * 365),
  };
}

/** The account events webhook (DESIGN §9.4): on when WEBHOOK_JWKS (a file or a URL) is set. */
export interface WebhookConfig {
  jwks: JwksConfig;
  audience: string;
  /** OAUTH_ISSUER, when set. */
  issuer?: string;
  /** WEBHOOK_MAX_AGE, seconds: a token is accepted, once, only within this window. */
  maxAge: number;
}

export function webhookConfig(env: Env): WebhookConfig | undefined {
  const jwks = jwksConfig(env, 'WEBHOOK_JWKS', 'WEBHOOK_JWKS_CACHE');
  if (!jwks) return undefined;
  return {
    jwks,
    audience: str(env, 'WEBHOOK_AUDIENCE'),
    issuer: oauthIssuer(env),
    // The directory keeps a claim for at most a day (ClaimEventToken): the window plus twice the largest skew fits.
    maxAge: int(env, 'WEBHOOK_MAX_AGE', DEFAULTS.WEBHOOK_MAX_AGE, 1, 79_200),
  };
}

/**
 * METRICS_HASH_SECRET (or _FILE): the key of `hashed_fxa_uid` (DESIGN §9.3).
 * Required with Bearer, where other FxA services compute the same hash. An
 * empty value is refused: HMAC with an empty key is a public function, so the
 * hash would link straight back to the account id. Without Bearer it may be
 * unset (login then derives a key from the newest master secret).
 */
export function metricsHashSecret(env: Env, bearer: boolean): string | undefined {
  const v = secretValue(env, 'METRICS_HASH_SECRET');
  if (v === undefined && bearer) throw new ConfigError('METRICS_HASH_SECRET', 'is required when OAUTH_JWKS or OAUTH_ISSUER enables Bearer (the key of hashed_fxa_uid; empty is not accepted)');
  return v;
}

/**
 * NODE_TYPE: the `node_type` of the 200 body (DESIGN §11.4), Mozilla's name for
 * the kind of database its storage nodes use (`mysql`, `postgres`, `spanner`).
 * Unset (the default): the body has no `node_type`.
 */
export function nodeType(env: Env): string | undefined {
  const v = env.NODE_TYPE?.trim();
  if (!v) return undefined;
  if (!/^[a-z][a-z0-9_-]{0,31}$/.test(v)) throw new ConfigError('NODE_TYPE', `must be a lowercase word such as mysql, postgres or spanner, got ${JSON.stringify(v)}`);
  return v;
}

// ---- per-service configuration ----

export interface DirectoryConfig {
  storeUrl: string;
  port: number;
  host: string;
  clientStateChangesPerDay: number;
  auth: GrpcAuth;
  /** DIRECTORY_METRICS_PORT: unset, no /metrics at all. */
  metrics?: MetricsListener;
}

export function clientStateChangesPerDay(env: Env): number {
  return int(env, 'CLIENT_STATE_CHANGES_PER_DAY', DEFAULTS.CLIENT_STATE_CHANGES_PER_DAY, 1, 10_000);
}

export function directoryConfig(env: Env): DirectoryConfig {
  return {
    storeUrl: storeUrl(env),
    port: port(env, 'DIRECTORY_PORT', DEFAULTS.DIRECTORY_PORT),
    host: str(env, 'BIND_HOST', DEFAULTS.BIND_HOST),
    clientStateChangesPerDay: clientStateChangesPerDay(env),
    auth: grpcAuth(env),
    metrics: metricsListener(env, 'DIRECTORY_METRICS_PORT'),
  };
}

export interface NodeAssignConfig {
  storeUrl: string;
  port: number;
  host: string;
  releaseRate: number;
  auth: GrpcAuth;
  /** NODEASSIGN_METRICS_PORT: unset, no /metrics at all. */
  metrics?: MetricsListener;
}

export function nodeAssignConfig(env: Env): NodeAssignConfig {
  return {
    storeUrl: storeUrl(env),
    port: port(env, 'NODEASSIGN_PORT', DEFAULTS.NODEASSIGN_PORT),
    host: str(env, 'BIND_HOST', DEFAULTS.BIND_HOST),
    releaseRate: num(env, 'RELEASE_RATE', DEFAULTS.RELEASE_RATE, 0.0001, 1),
    auth: grpcAuth(env),
    metrics: metricsListener(env, 'NODEASSIGN_METRICS_PORT'),
  };
}

export interface LoginConfig {
  port: number;
  host: string;
  masterSecrets: string[];
  tokenSecrets: TokenSecretsMode;
  applications: Map<string, Set<string>>;
  audiences: string[];
  trustedIssuers: TrustedIssuers;
  tokenDuration: number;
  allowNewUsers: boolean;
  directoryAddr: string;
  nodeAssignAddr: string;
  /** How login authenticates to directory and nodeassign. */
  auth: GrpcAuth;
  assertionSkew: number;
  maxAssertionLifetime: number;
  maxCertificateLifetime: number;
  generationClaim: string;
  grpcDeadlineMs: number;
  retryAfter: number;
  maintenanceMode: boolean;
  overload: OverloadConfig;
  /** Lowercase. */
  oauthEmailDomain: string;
  /** LOGIN_METRICS_PORT: unset, no /metrics at all. */
  metrics?: MetricsListener;
  /** ALLOWED_USERS: unset, everyone the other rules accept. */
  allowedUsers?: AllowedUsersSource;
  /** Set when OAUTH_JWKS or OAUTH_ISSUER enables Bearer. */
  bearer?: BearerConfig;
  /** Set when WEBHOOK_JWKS enables the account events webhook. */
  webhook?: WebhookConfig;
  metricsHashSecret?: string;
  /** NODE_TYPE: unset, the 200 body has no node_type. */
  nodeType?: string;
}

/**
 * `overrides` lets the embedded stack supply what it generates (secrets, the
 * development issuer) where the environment leaves them unset. A
 * TRUSTED_ISSUERS file replaces the development issuer rather than joining it:
 * an operator who lists issuers means exactly those.
 */
export function loginConfig(
  env: Env,
  overrides: { masterSecrets?: string[]; internalSecret?: string; trustedIssuers?: TrustedIssuers; audiences?: string[] } = {},
): LoginConfig {
  // TRUSTED_ISSUERS enables the assertion schemes, OAUTH_JWKS or OAUTH_ISSUER Bearer (DESIGN §9.3, §13.1); an empty map: assertions off.
  const bearer = bearerConfig(env);
  let trustedIssuers: TrustedIssuers = new Map();
  if (env.TRUSTED_ISSUERS?.trim()) {
    trustedIssuers = trustedIssuersFile(env);
  } else if (overrides.trustedIssuers) {
    trustedIssuers = overrides.trustedIssuers;
  } else if (!bearer) {
    throw new ConfigError('TRUSTED_ISSUERS', 'or OAUTH_JWKS or OAUTH_ISSUER is required: at least one login scheme must be on (TRUSTED_ISSUERS: a JSON file of trusted issuers and their keys, for Assertion/BrowserID; OAUTH_JWKS: a JWKS file or URL, or OAUTH_ISSUER: a provider found by discovery, for Bearer)');
  }
  const audiences = env.AUDIENCES?.trim() ? list(env, 'AUDIENCES', '') : (overrides.audiences ?? []);
  // Audiences are what assertions are made for; Bearer tokens carry a scope instead.
  if (trustedIssuers.size > 0 && audiences.length === 0) throw new ConfigError('AUDIENCES', 'is required (accepted "aud" values)');
  return {
    port: port(env, 'LOGIN_PORT', DEFAULTS.LOGIN_PORT),
    host: str(env, 'BIND_HOST', DEFAULTS.BIND_HOST),
    masterSecrets: masterSecrets(env, overrides.masterSecrets),
    tokenSecrets: tokenSecretsMode(env),
    applications: applications(env),
    audiences,
    trustedIssuers,
    tokenDuration: int(env, 'TOKEN_DURATION', DEFAULTS.TOKEN_DURATION, 1, 86_400 * 30),
    allowNewUsers: bool(env, 'ALLOW_NEW_USERS', DEFAULTS.ALLOW_NEW_USERS),
    directoryAddr: address(env, 'DIRECTORY_ADDR', DEFAULTS.DIRECTORY_ADDR),
    nodeAssignAddr: address(env, 'NODEASSIGN_ADDR', DEFAULTS.NODEASSIGN_ADDR),
    auth: grpcAuth(env, overrides.internalSecret),
    assertionSkew: int(env, 'ASSERTION_SKEW', DEFAULTS.ASSERTION_SKEW, 0, 3600),
    maxAssertionLifetime: int(env, 'MAX_ASSERTION_LIFETIME', DEFAULTS.MAX_ASSERTION_LIFETIME, 1, 86_400 * 365),
    maxCertificateLifetime: int(env, 'MAX_CERTIFICATE_LIFETIME', DEFAULTS.MAX_CERTIFICATE_LIFETIME, 1, 86_400 * 365),
    generationClaim: str(env, 'GENERATION_CLAIM', DEFAULTS.GENERATION_CLAIM),
    grpcDeadlineMs: int(env, 'GRPC_DEADLINE_MS', DEFAULTS.GRPC_DEADLINE_MS, 50, 60_000),
    retryAfter: int(env, 'RETRY_AFTER', DEFAULTS.RETRY_AFTER, 1, 86_400),
    maintenanceMode: bool(env, 'MAINTENANCE_MODE', DEFAULTS.MAINTENANCE_MODE),
    overload: overloadConfig(env),
    oauthEmailDomain: domain(env, 'OAUTH_EMAIL_DOMAIN', DEFAULTS.OAUTH_EMAIL_DOMAIN),
    metrics: metricsListener(env, 'LOGIN_METRICS_PORT'),
    allowedUsers: allowedUsers(env),
    bearer,
    webhook: webhookConfig(env),
    metricsHashSecret: metricsHashSecret(env, bearer !== undefined),
    nodeType: nodeType(env),
  };
}

/** LOGIN_WORKERS: how many processes serve login's port (1: one process, no cluster). */
export function loginWorkers(env: Env, fallback: number = DEFAULTS.LOGIN_WORKERS): number {
  return int(env, 'LOGIN_WORKERS', fallback, 1, MAX_LOGIN_WORKERS);
}

// ---- allow-list (login) ----

/** Who may log in: whole addresses (normalised as lib/email.ts does) and whole domains (lowercase). */
export interface AllowList {
  emails: ReadonlySet<string>;
  domains: ReadonlySet<string>;
}

export interface AllowedUsersSource {
  /** Set when ALLOWED_USERS is `@<file>`: login reads it again on SIGHUP. */
  file?: string;
  /** Replaced (not mutated) by a reload, so a request sees one whole list. */
  list: AllowList;
}

/**
 * Entries separated by commas, whitespace or newlines; `#` starts a comment.
 * `name@domain` allows one address, `@domain` everyone at that domain.
 */
export function parseAllowList(text: string, variable = 'ALLOWED_USERS'): AllowList {
  const emails = new Set<string>();
  const domains = new Set<string>();
  for (const line of text.split('\n')) {
    for (const entry of line.replace(/#.*/, '').split(/[\s,]+/).filter((e) => e !== '')) {
      const at = entry.lastIndexOf('@');
      if (at === 0 && entry.length > 1) domains.add(normalizeDomain(entry.slice(1)));
      else if (at > 0 && at < entry.length - 1 && !entry.startsWith('@')) emails.add(normalizeEmail(entry));
      else throw new ConfigError(variable, `expected name@domain or @domain, got ${JSON.stringify(entry)}`);
    }
  }
  return { emails, domains };
}

/** An already normalised e-mail against the list. */
export function isAllowedUser(list: AllowList, email: string): boolean {
  return list.emails.has(email) || list.domains.has(emailDomain(email));
}

/** ALLOWED_USERS's file form: `@` and a path with a `/` in it (`@./allowed.txt`), so it never reads as a domain. */
export function allowListFile(value: string): string | undefined {
  return /^@[^,\s]*\//.test(value) ? value.slice(1) : undefined;
}

export function readAllowListFile(file: string): AllowList {
  return parseAllowList(settingFile('ALLOWED_USERS', file).toString(), `ALLOWED_USERS (${file})`);
}

export function allowedUsers(env: Env): AllowedUsersSource | undefined {
  const v = env.ALLOWED_USERS?.trim();
  if (!v) return undefined;
  const file = allowListFile(v);
  return file ? { file, list: readAllowListFile(file) } : { list: parseAllowList(v) };
}

// ---- overload signal (login) ----

export interface OverloadConfig {
  backoffSeconds: number;
  backoffInFlight: number;
  maxInFlight: number;
  backoffLoopDelayMs: number;
  /** Retry-After of the 503 beyond the cap (RETRY_AFTER). */
  retryAfter: number;
}

export function overloadConfig(env: Env): OverloadConfig {
  const backoffInFlight = int(env, 'BACKOFF_INFLIGHT', DEFAULTS.BACKOFF_INFLIGHT, 1, 1_000_000);
  const maxInFlight = int(env, 'MAX_INFLIGHT', Math.max(DEFAULTS.MAX_INFLIGHT, backoffInFlight), 1, 1_000_000);
  // The cap must leave room for the signal, or clients would be refused without warning.
  if (maxInFlight < backoffInFlight) {
    throw new ConfigError('MAX_INFLIGHT', `must be at least BACKOFF_INFLIGHT (${backoffInFlight}), got ${maxInFlight}`);
  }
  return {
    backoffSeconds: int(env, 'BACKOFF_SECONDS', DEFAULTS.BACKOFF_SECONDS, 1, 86_400),
    backoffInFlight,
    maxInFlight,
    backoffLoopDelayMs: int(env, 'BACKOFF_LOOP_DELAY_MS', DEFAULTS.BACKOFF_LOOP_DELAY_MS, 0, 60_000),
    retryAfter: int(env, 'RETRY_AFTER', DEFAULTS.RETRY_AFTER, 1, 86_400),
  };
}

/** Where the gateway remembers nonces (NONCE_STORE). */
export type NonceStoreConfig = { kind: 'memory' } | { kind: 'redis'; url: string; timeoutMs: number };

/**
 * NONCE_STORE: `memory`, or `redis://[user:password@]host[:port][/db]` (`rediss://` for TLS).
 * Messages never repeat the URL, which may carry a password.
 */
export function nonceStore(env: Env): NonceStoreConfig {
  const v = str(env, 'NONCE_STORE', DEFAULTS.NONCE_STORE);
  if (v === 'memory') return { kind: 'memory' };
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError('NONCE_STORE', 'must be memory or a redis:// or rediss:// URL');
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    throw new ConfigError('NONCE_STORE', `must be memory or a redis:// or rediss:// URL, got a ${u.protocol} URL`);
  }
  if (u.hostname === '') throw new ConfigError('NONCE_STORE', 'the Redis URL must name a host');
  if (!/^\/?(\d{1,5})?$/.test(u.pathname)) throw new ConfigError('NONCE_STORE', 'the Redis URL path must be empty or a database number (/0)');
  if (u.search || u.hash) throw new ConfigError('NONCE_STORE', 'the Redis URL must not carry a query or fragment');
  return { kind: 'redis', url: v, timeoutMs: int(env, 'NONCE_STORE_TIMEOUT_MS', DEFAULTS.NONCE_STORE_TIMEOUT_MS, 10, 60_000) };
}

/**
 * What a gateway checks tokens with: the master secrets, from which it derives
 * its node's (they also sign for every other node), or its node's secrets
 * alone (NODE_SECRETS), which sign for nothing else. Exactly one is set.
 */
export type GatewaySecrets = { masterSecrets: string[]; nodeSecrets?: undefined } | { nodeSecrets: string[]; masterSecrets?: undefined };

export type GatewayConfig = GatewaySecrets & {
  port: number;
  host: string;
  tokenSecrets: TokenSecretsMode;
  nodeUrl: string;
  upstreamUrl: string;
  hawkSkew: number;
  /** NONCE_CACHE_SIZE: the memory store's bound (a shared store is bounded by its own maxmemory). */
  nonceCacheSize: number;
  noncePerToken: number;
  nonceStore: NonceStoreConfig;
  /** Retry-After of a 503 while the nonce store cannot answer, seconds (RETRY_AFTER). */
  retryAfter: number;
  hashBodyLimit: number;
  upstreamConnectTimeoutMs: number;
  upstreamTimeoutMs: number;
  /** GATEWAY_METRICS_PORT: unset, no /metrics at all. */
  metrics?: MetricsListener;
};

/** The variables of a secret that are set, in both forms (NAME, NAME_FILE). */
function setForms(env: Env, name: string): string[] {
  return [name, `${name}_FILE`].filter((n) => env[n]?.trim());
}

/**
 * NODE_SECRETS (or _FILE), or else MASTER_SECRETS (or _FILE, or the embedded
 * stack's `fallback`). Both set is an error: which one the gateway trusts must
 * not depend on a rule of precedence.
 */
export function gatewaySecrets(env: Env, mode: TokenSecretsMode, fallback?: string[]): GatewaySecrets {
  const node = setForms(env, 'NODE_SECRETS');
  if (node.length === 0) return { masterSecrets: masterSecrets(env, fallback) };
  const master = setForms(env, 'MASTER_SECRETS');
  if (master.length > 0) {
    throw new ConfigError('NODE_SECRETS', `${node[0]} and ${master[0]} are both set: a gateway holds either its node's secrets (NODE_SECRETS) or the master secrets (MASTER_SECRETS), not both`);
  }
  if (mode === 'master') {
    throw new ConfigError(
      'NODE_SECRETS',
      'cannot be used with TOKEN_SECRETS=master: tokens are then signed with the master secrets themselves, so every node holds them and there is no secret of its own to give a gateway; set MASTER_SECRETS',
    );
  }
  return { nodeSecrets: nodeSecrets(env)! };
}

export function gatewayConfig(env: Env, overrides: { masterSecrets?: string[] } = {}): GatewayConfig {
  const nonceCacheSize = int(env, 'NONCE_CACHE_SIZE', DEFAULTS.NONCE_CACHE_SIZE, 100, 10_000_000);
  const tokenSecrets = tokenSecretsMode(env);
  return {
    ...gatewaySecrets(env, tokenSecrets, overrides.masterSecrets),
    port: port(env, 'GATEWAY_PORT', DEFAULTS.GATEWAY_PORT),
    host: str(env, 'BIND_HOST', DEFAULTS.BIND_HOST),
    tokenSecrets,
    nodeUrl: url(env, 'NODE_URL'),
    upstreamUrl: url(env, 'UPSTREAM_URL'),
    hawkSkew: int(env, 'HAWK_SKEW', DEFAULTS.HAWK_SKEW, 1, 86_400),
    nonceCacheSize,
    // A share larger than the whole cache would let one token fill it.
    noncePerToken: int(env, 'NONCE_PER_TOKEN', Math.min(DEFAULTS.NONCE_PER_TOKEN, nonceCacheSize), 1, nonceCacheSize),
    nonceStore: nonceStore(env),
    retryAfter: int(env, 'RETRY_AFTER', DEFAULTS.RETRY_AFTER, 1, 86_400),
    hashBodyLimit: int(env, 'HASH_BODY_LIMIT', DEFAULTS.HASH_BODY_LIMIT, 1, 1 << 30),
    upstreamConnectTimeoutMs: int(env, 'UPSTREAM_CONNECT_TIMEOUT_MS', DEFAULTS.UPSTREAM_CONNECT_TIMEOUT_MS, 10, 600_000),
    upstreamTimeoutMs: int(env, 'UPSTREAM_TIMEOUT_MS', DEFAULTS.UPSTREAM_TIMEOUT_MS, 10, 3_600_000),
    metrics: metricsListener(env, 'GATEWAY_METRICS_PORT'),
  };
}

// ---- demo application (services/demo-app) ----

export interface DemoAppConfig {
  port: number;
  host: string;
}

export function demoAppConfig(env: Env): DemoAppConfig {
  return {
    port: port(env, 'DEMO_APP_PORT', DEFAULTS.DEMO_APP_PORT),
    host: str(env, 'BIND_HOST', DEFAULTS.BIND_HOST),
  };
}

// ---- demo client (scripts/demo.ts, `npm run demo`) ----

export interface DemoClientConfig {
  /** The login service of a running `npm start`. */
  loginUrl: string;
  /** Where the development IdP key lives. */
  dataDir: string;
  /** The first APPLICATIONS entry. */
  app: string;
  version: string;
}

export function demoClientConfig(env: Env): DemoClientConfig {
  const [app, versions] = [...applications(env)][0];
  return {
    loginUrl: url(env, 'LOGIN_URL', `http://127.0.0.1:${DEFAULTS.LOGIN_PORT}`),
    dataDir: str(env, 'DATA_DIR', DEFAULTS.DATA_DIR),
    app,
    version: [...versions][0],
  };
}
