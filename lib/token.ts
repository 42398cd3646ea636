// tokenlib v1 tokens (DESIGN §5), byte-compatible with Mozilla's token servers:
// id = urlsafe-b64(payload JSON || HMAC-SHA256(signing key, payload JSON)),
// key = urlsafe-b64(HKDF(node secret, salt, "…/derive/" + id)).
import { createHmac, randomFillSync, timingSafeEqual } from 'node:crypto';
import { InvalidCredentials, InvalidTimestamp } from './errors.js';

const NODE_SECRET_INFO = 'services.mozilla.com/mozsvc/v1/node_secret/';
const SIGNING_INFO = 'services.mozilla.com/tokenlib/v1/signing';
const DERIVE_INFO = 'services.mozilla.com/tokenlib/v1/derive/';
const SIG_LEN = 32;
/** Tokens are small; anything far larger is refused before decoding. */
export const MAX_TOKEN_LENGTH = 4096;

export interface TokenPayload {
  uid: number;
  node: string;
  expires: number;
  salt: string;
  [extra: string]: unknown;
}

/** A uid a token may name: a live record's. Uids start at 1; 0 marks a deleted account's record. */
export function isLiveUid(uid: number): boolean {
  return Number.isSafeInteger(uid) && uid > 0;
}

const HASH_LENGTH = 32;
const MAX_HKDF_LENGTH = 255 * HASH_LENGTH;
/** The one-byte block counters of HKDF-Expand. */
const COUNTERS = Array.from({ length: 256 }, (_, i) => Buffer.of(i));

/**
 * HKDF-SHA256 (RFC 5869) built from HMACs: node's hkdfSync costs about twice
 * what its two HMACs cost (a job and key checks on every call), and every
 * login derives a token's key. An empty salt is the RFC's default (HMAC pads the key with
 * zeros either way).
 */
export function hkdf(ikm: string | Buffer, salt: string, info: string, length: number): Buffer {
  if (!Number.isInteger(length) || length < 0 || length > MAX_HKDF_LENGTH) throw new RangeError(`HKDF-SHA256 length must be 0 to ${MAX_HKDF_LENGTH}`);
  const prk = createHmac('sha256', salt).update(ikm).digest();
  // T(i) = HMAC(PRK, T(i-1) | info | i), T(0) empty; the key is the first `length` bytes of T(1) | T(2) | …
  const blocks: Buffer[] = [];
  for (let i = 1; blocks.length * HASH_LENGTH < length; i++) {
    const t = createHmac('sha256', prk);
    if (i > 1) t.update(blocks[i - 2]);
    blocks.push(t.update(info).update(COUNTERS[i]).digest());
  }
  return Buffer.concat(blocks, length);
}

/** A node's secret: hex of HKDF(master, no salt, node_secret info + node URL, len(master)/2). */
export function deriveNodeSecret(master: string, nodeUrl: string): string {
  const length = Math.floor(Buffer.byteLength(master, 'utf8') / 2);
  return hkdf(master, '', NODE_SECRET_INFO + nodeUrl, length).toString('hex');
}

// Derivations are pure and hot; keep them per (master, node) and per secret.
const nodeSecretCache = new Map<string, string[]>();
const signingKeyCache = new Map<string, Buffer>();
const CACHE_LIMIT = 10_000;

function remember<V>(cache: Map<string, V>, key: string, make: () => V): V {
  let v = cache.get(key);
  if (v === undefined) {
    if (cache.size >= CACHE_LIMIT) cache.clear();
    v = make();
    cache.set(key, v);
  }
  return v;
}

/** The node's secrets for every master secret, newest first. */
export function nodeSecrets(masters: readonly string[], nodeUrl: string): string[] {
  return remember(nodeSecretCache, `${nodeUrl}\n${masters.join('\n')}`, () => masters.map((m) => deriveNodeSecret(m, nodeUrl)));
}

/**
 * TOKEN_SECRETS: what a node's tokens are signed with. `derived`: the node's
 * own secret (DESIGN §5), so a node knows only its own. `master`: the master
 * secret itself, as Mozilla's Rust tokenserver signs, for storage nodes that
 * share one SYNC_MASTER_SECRET with their tokenserver.
 */
export const TOKEN_SECRETS_MODES = ['derived', 'master'] as const;
export type TokenSecretsMode = (typeof TOKEN_SECRETS_MODES)[number];

/** The secrets tokens for `nodeUrl` are signed with, newest first: login signs with the first, a node accepts any. */
export function tokenSecrets(mode: TokenSecretsMode, masters: readonly string[], nodeUrl: string): readonly string[] {
  return mode === 'master' ? masters : nodeSecrets(masters, nodeUrl);
}

// Not a tokenlib derivation: ours, so its info string names this service.
const ACCOUNT_ID_INFO = 'tokenserver/v1/account-id';
const METRICS_HASH_INFO = 'tokenserver/v1/metrics-hash';

/** The HMAC key of opaque account ids (fxa_uid of non-FxA e-mails): HKDF(master, no salt, fixed info, 32). */
export function accountIdKey(master: string): Buffer {
  return hkdf(master, '', ACCOUNT_ID_INFO, 32);
}

/** The key of `hashed_fxa_uid` when METRICS_HASH_SECRET is unset (no Bearer): HKDF of the newest master secret. */
export function metricsHashKey(master: string): Buffer {
  return hkdf(master, '', METRICS_HASH_INFO, 32);
}

export function signingKey(secret: string): Buffer {
  return remember(signingKeyCache, secret, () => hkdf(secret, '', SIGNING_INFO, 32));
}

function b64(buf: Buffer): string {
  // tokenlib's urlsafe base64 keeps the padding that base64url drops.
  return buf.toString('base64url') + '='.repeat((3 - (buf.length % 3)) % 3);
}

/** Strict urlsafe base64, padding optional; null when it is not. */
function unb64(s: string): Buffer | null {
  if (!/^[A-Za-z0-9_-]*={0,2}$/.test(s)) return null;
  const bare = s.replace(/=+$/, '');
  if (bare.length % 4 === 1) return null;
  if (s.length !== bare.length && s.length % 4 !== 0) return null;
  const buf = Buffer.from(bare, 'base64url');
  // Reject non-canonical trailing bits so one token has one spelling.
  if (buf.toString('base64url') !== bare) return null;
  return buf;
}

/** Signs exact payload bytes; the tokenlib id. */
export function encodeToken(payloadJson: string, secret: string): string {
  const body = Buffer.from(payloadJson, 'utf8');
  const sig = createHmac('sha256', signingKey(secret)).update(body).digest();
  return b64(Buffer.concat([body, sig]));
}

/** The Hawk key for a token id. */
export function derivedSecret(id: string, salt: string, secret: string): string {
  return b64(hkdf(secret, salt, DERIVE_INFO + id, 32));
}

// One randomFillSync() per 1024 salts: a call per salt cost ~2.5 µs, most of it the call itself.
const SALT_BYTES = 3;
const saltPool = Buffer.alloc(SALT_BYTES * 1024);
let saltOffset = saltPool.length;

/** tokenlib's salt: 6 hex characters. */
export function newSalt(): string {
  if (saltOffset === saltPool.length) {
    randomFillSync(saltPool);
    saltOffset = 0;
  }
  const salt = saltPool.toString('hex', saltOffset, saltOffset + SALT_BYTES);
  saltOffset += SALT_BYTES;
  return salt;
}

/** Mints a token for a node secret: returns the id and the derived Hawk key. */
export function makeToken(payload: TokenPayload, secret: string): { id: string; key: string } {
  const id = encodeToken(JSON.stringify(payload), secret);
  return { id, key: derivedSecret(id, payload.salt, secret) };
}

function isPayload(p: unknown): p is TokenPayload {
  if (typeof p !== 'object' || p === null || Array.isArray(p)) return false;
  const o = p as Record<string, unknown>;
  return (
    Number.isSafeInteger(o.uid) &&
    (o.uid as number) >= 0 &&
    typeof o.node === 'string' &&
    typeof o.expires === 'number' &&
    Number.isFinite(o.expires) &&
    typeof o.salt === 'string'
  );
}

/**
 * Checks a token against the given secrets (any may have signed it) and its
 * expiry. Throws InvalidCredentials for anything malformed or badly signed,
 * InvalidTimestamp once it has expired.
 */
export function parseToken(id: string, secrets: readonly string[], nowSeconds = Date.now() / 1000): { payload: TokenPayload; secret: string } {
  if (id.length === 0 || id.length > MAX_TOKEN_LENGTH) throw new InvalidCredentials('malformed token');
  const raw = unb64(id);
  if (!raw || raw.length <= SIG_LEN) throw new InvalidCredentials('malformed token');
  const body = raw.subarray(0, raw.length - SIG_LEN);
  const sig = raw.subarray(raw.length - SIG_LEN);
  const secret = secrets.find((s) => timingSafeEqual(createHmac('sha256', signingKey(s)).update(body).digest(), sig));
  if (secret === undefined) throw new InvalidCredentials('token signature does not match');
  let payload: unknown;
  try {
    payload = JSON.parse(body.toString('utf8'));
  } catch {
    throw new InvalidCredentials('malformed token payload');
  }
  if (!isPayload(payload)) throw new InvalidCredentials('malformed token payload');
  if (payload.expires <= nowSeconds) throw new InvalidTimestamp('token expired');
  return { payload, secret };
}
