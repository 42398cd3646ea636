// What the login benchmarks share: a trusted issuer, users each with its own
// key and one certificate (reused for the whole run, as a real identity
// provider's certificate is), fresh assertions made on demand, the login
// service's environment, and the node it hands out.
import { createPrivateKey, createPublicKey, generateKeyPair, randomBytes, sign, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Env, JsonWebKeyLike } from '../lib/config.js';
import { call, grpcClient } from '../lib/grpc.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { bundle, generateKey, signCertificate } from '../lib/idp.js';
import { ROOT } from './build.js';
import type { RequestSpec } from './load.js';
import { BENCH_AUTH } from './proc.js';

export const APP = 'sync';
export const VERSION = '1.5';
export const TOKEN_PATH = `/1.0/${APP}/${VERSION}`;
export const NODE_URL = 'http://bench-node.example';
const ISSUER = 'bench-idp.example';
const AUDIENCE = 'http://login.bench.example';
/** Certificates outlive any run (within MAX_CERTIFICATE_LIFETIME's default of a day). */
const CERT_TTL_SECONDS = 4 * 3600;
/** Each assertion is made just before the load that presents it, so the default MAX_ASSERTION_LIFETIME (600 s) holds. */
const ASSERTION_TTL_MS = 300_000;
/** RSA-2048 key generation costs ~50–350 ms a key here, so the RS256 users' keys are made once and kept (dist/ is ignored by git). */
const RSA_KEY_CACHE = path.join(ROOT, 'dist', 'bench-results', 'rs256-user-keys.json');

export type UserKeyAlg = 'ES256' | 'RS256';

/** Users by their index in the fixture: `from` up to, not including, `to`. */
export interface UserRange {
  from: number;
  to: number;
}

interface BenchUser {
  certificate: string;
  key: KeyObject;
  /** Assertions made for this user so far. */
  made: number;
}

export interface LoginFixture {
  /** The login service's environment (without the backend addresses). */
  env: Env;
  emails: string[];
  /**
   * `count` token requests, users in turn (those from `among.from` up to, not
   * including, `among.to`; all by default), each with an assertion made now
   * and never handed out before: no verified-assertion cache could help.
   * Written as a JSON file for bench/load.ts; returns its path.
   */
  freshRequests(count: number, among?: UserRange): string;
  /** Assertions made so far. */
  readonly made: number;
}

async function rsaUserKeys(count: number): Promise<KeyObject[]> {
  const cached: string[] = existsSync(RSA_KEY_CACHE) ? (JSON.parse(readFileSync(RSA_KEY_CACHE, 'utf8')) as string[]) : [];
  if (cached.length < count) {
    console.log(`[bench] making ${count - cached.length} RSA-2048 user keys once (kept in ${path.relative(ROOT, RSA_KEY_CACHE)})`);
    const made = await Promise.all(
      Array.from({ length: count - cached.length }, async () => {
        const { privateKey } = await promisify(generateKeyPair)('rsa', { modulusLength: 2048 });
        return privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
      }),
    );
    cached.push(...made);
    mkdirSync(path.dirname(RSA_KEY_CACHE), { recursive: true });
    writeFileSync(RSA_KEY_CACHE, JSON.stringify(cached));
  }
  return cached.slice(0, count).map((pem) => createPrivateKey(pem));
}

async function userKeys(alg: UserKeyAlg, count: number): Promise<KeyObject[]> {
  if (alg === 'RS256') return rsaUserKeys(count);
  return Promise.all(Array.from({ length: count }, async () => (await promisify(generateKeyPair)('ec', { namedCurve: 'P-256' })).privateKey));
}

/** A compact JWS signed with node:crypto, synchronously: the pools are large and jose's WebCrypto path is slower. */
function signCompact(alg: UserKeyAlg, key: KeyObject, header: string, payload: unknown): string {
  const input = `${header}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  const signature = sign('sha256', Buffer.from(input), alg === 'ES256' ? { key, dsaEncoding: 'ieee-p1363' } : key);
  return `${input}.${signature.toString('base64url')}`;
}

/** signCompact through libuv's thread pool, so that large pools of RS256 tokens are signed on every core. */
function signCompactAsync(key: KeyObject, header: string, payload: unknown): Promise<string> {
  const input = `${header}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  return new Promise((resolve, reject) =>
    sign('sha256', Buffer.from(input), key, (err, signature) => (err ? reject(err) : resolve(`${input}.${signature.toString('base64url')}`))),
  );
}

/**
 * `users` users, each with its own `alg` key (as real clients have) and one
 * certificate, so the verifier's certificate cache holds one entry per user
 * while every assertion is new.
 */
export async function loginFixture(dir: string, users: number, o: { alg?: UserKeyAlg; emailPrefix?: string } = {}): Promise<LoginFixture> {
  const alg = o.alg ?? 'ES256';
  const issuer = await generateKey('ES256');
  const trustedFile = path.join(dir, 'trusted-issuers.json');
  writeFileSync(trustedFile, JSON.stringify({ [ISSUER]: { keys: [issuer.publicJwk], domains: ['users.bench.example'] } }));
  const emails = Array.from({ length: users }, (_, i) => `${o.emailPrefix ?? 'bench'}${i}@users.bench.example`);
  const keys = await userKeys(alg, users);
  const pool: BenchUser[] = await Promise.all(
    emails.map(async (email, i) => {
      const publicKey = { ...(createPublicKey(keys[i]).export({ format: 'jwk' }) as JsonWebKeyLike), alg };
      return { key: keys[i], certificate: await signCertificate(issuer, { issuer: ISSUER, email, publicKey, ttlSeconds: CERT_TTL_SECONDS }), made: 0 };
    }),
  );
  const header = Buffer.from(JSON.stringify({ alg })).toString('base64url');
  let made = 0;
  return {
    env: {
      APPLICATIONS: `${APP}/${VERSION}`,
      AUDIENCES: AUDIENCE,
      TRUSTED_ISSUERS: trustedFile,
      MASTER_SECRETS: randomBytes(32).toString('hex'),
    },
    emails,
    get made() {
      return made;
    },
    freshRequests(count, among = { from: 0, to: users }) {
      if (!(among.from >= 0 && among.to <= users && among.from < among.to)) throw new Error(`no users ${among.from}..${among.to} among ${users}`);
      const expMs = Date.now() + ASSERTION_TTL_MS;
      const requests: RequestSpec[] = [];
      for (let i = 0; i < count; i++, made++) {
        const user = pool[among.from + (made % (among.to - among.from))];
        // ES256 signatures are randomised, RS256 ones are not: the distinct exp makes every assertion a distinct string.
        // It counts the user's own assertions, not the run's, so it stays within MAX_ASSERTION_LIFETIME however many
        // the run makes (counting the run's, a fast machine's run of ~400 000 assertions went past it).
        const assertion = signCompact(alg, user.key, header, { aud: AUDIENCE, exp: expMs + user.made++ });
        requests.push({ path: TOKEN_PATH, headers: { authorization: `Assertion ${bundle(user.certificate, assertion)}` } });
      }
      const file = path.join(dir, 'login-requests.json');
      writeFileSync(file, JSON.stringify(requests));
      return file;
    },
  };
}

const OAUTH_ISSUER = 'https://accounts.bench.example';
const OAUTH_KID = 'bench-oauth-1';
/**
 * The scope of Firefox's access tokens for Sync: that one scope alone (Firefox asks for a single scope
 * per token). Mozilla's Rust tokenserver splits the claim at commas, so it would refuse "profile <this>".
 */
const OLDSYNC_SCOPE = 'https://identity.mozilla.com/apps/oldsync';
/** Tokens signed at once on the thread pool while a pool is made. */
const SIGN_BATCH = 512;
/** keys_changed_at and the generation of every Bearer user, ms (as FxA sends them). */
const KEYS_CHANGED_AT = 1_700_000_000_000;
/** Access tokens live 5 minutes here, well within MAX_ACCESS_TOKEN_LIFETIME. */
const ACCESS_TOKEN_TTL_SECONDS = 300;

export interface BearerFixture {
  /** OAUTH_JWKS (one RSA-2048 key, RS256 as FxA signs), OAUTH_ISSUER and METRICS_HASH_SECRET. */
  env: Env;
  /** The OAuth server's public key, as a JWK with its kid (what another token server is configured with). */
  publicJwk: JsonWebKeyLike & { kid: string; n: string; e: string };
  /**
   * `count` Bearer token requests, users in turn, each with an access token
   * made now and never handed out before (its own jti), and the user's
   * X-KeyID. Written as a JSON file for bench/load.ts; resolves to its path.
   */
  freshRequests(count: number): Promise<string>;
  /** Access tokens made so far. */
  readonly made: number;
}

/**
 * `users` OAuth accounts (`sub` bearer<i>, each with its own client state)
 * and the OAuth server's signing key, for the Bearer scheme (DESIGN §9.1).
 * An RS256 token costs ~1 ms to sign here, so pools are made before each window.
 */
export async function bearerFixture(dir: string, users: number): Promise<BearerFixture> {
  const { privateKey, publicKey } = await promisify(generateKeyPair)('rsa', { modulusLength: 2048 });
  const publicJwk = { ...(publicKey.export({ format: 'jwk' }) as JsonWebKeyLike & { n: string; e: string }), kid: OAUTH_KID, use: 'sig', alg: 'RS256' };
  const jwksFile = path.join(dir, 'oauth-jwks.json');
  writeFileSync(jwksFile, JSON.stringify({ keys: [publicJwk] }));
  const accounts = Array.from({ length: users }, (_, i) => ({
    sub: `bearer${i}`,
    keyId: `${KEYS_CHANGED_AT}-${randomBytes(16).toString('base64url')}`,
  }));
  // The header of FxA's access tokens.
  const header = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'at+JWT', kid: OAUTH_KID })).toString('base64url');
  let made = 0;
  return {
    env: { OAUTH_JWKS: jwksFile, OAUTH_ISSUER, METRICS_HASH_SECRET: randomBytes(16).toString('hex') },
    publicJwk,
    get made() {
      return made;
    },
    async freshRequests(count) {
      const iat = Math.floor(Date.now() / 1000);
      const requests: RequestSpec[] = [];
      for (let from = 0; from < count; from += SIGN_BATCH) {
        const batch = Array.from({ length: Math.min(SIGN_BATCH, count - from) }, () => {
          const { sub, keyId } = accounts[made % users];
          // The claims of an FxA access token; the jti makes every token a distinct string.
          const claims = { aud: 'https://token.bench.example', client_id: '5882386c6d801776', exp: iat + ACCESS_TOKEN_TTL_SECONDS, iat, iss: OAUTH_ISSUER, jti: `${made++}`, scope: OLDSYNC_SCOPE, sub, 'fxa-generation': KEYS_CHANGED_AT };
          return signCompactAsync(privateKey, header, claims).then((token) => ({ path: TOKEN_PATH, headers: { authorization: `Bearer ${token}`, 'x-keyid': keyId } }));
        });
        requests.push(...(await Promise.all(batch)));
      }
      const file = path.join(dir, 'bearer-requests.json');
      writeFileSync(file, JSON.stringify(requests));
      return file;
    },
  };
}

/** Registers nodes with a nodeassign service over gRPC. */
export async function addNodes(nodeAssignPort: number, nodes: Array<{ url: string; capacity: number }>, service = APP): Promise<void> {
  const client = grpcClient(NodeAssignClient, `127.0.0.1:${nodeAssignPort}`, BENCH_AUTH);
  try {
    for (const n of nodes) await call(client, client.addNode, { service, url: n.url, capacity: n.capacity }, { deadlineMs: 10_000, retryAfter: 1 });
  } finally {
    client.close();
  }
}
