// Hawk request authentication (https://github.com/mozilla/hawk, protocol
// version 1, sha256 only), both sides: the strict header parser and MAC
// check used by the node-gateway, and the header builder used by our SDK and
// CLI. One normalized-string function serves both, so they cannot drift.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { BadRequest, Unauthorized } from './errors.js';

/** Longest Authorization header we read, as the reference implementation. */
export const MAX_HEADER_LENGTH = 4096;

const ATTRIBUTE_NAMES = ['id', 'ts', 'nonce', 'hash', 'ext', 'mac', 'app', 'dlg'] as const;
/** Each name's slot while parsing: a Map, so that a client's "__proto__" is merely unknown. */
const ATTRIBUTE_SLOT = new Map<string, number>(ATTRIBUTE_NAMES.map((name, slot) => [name, slot]));
const [ID, TS, NONCE, HASH, EXT, MAC, APP, DLG] = ATTRIBUTE_NAMES.map((name) => ATTRIBUTE_SLOT.get(name)!);
/** The attributes every header must carry, with their slots. */
const REQUIRED = (['id', 'ts', 'nonce', 'mac'] as const).map((name) => [name, ATTRIBUTE_SLOT.get(name)!] as const);

/** The protocol's attribute value alphabet: printable ASCII without `"` and `\`. */
const VALUE_CHARS = /^[ !#-[\]-~]*$/;
// The header's grammar, compiled once (a literal in the function would make a new object per request).
const SCHEME = /^[A-Za-z]+/;
/** Whitespace is JavaScript's `\s`, as in the reference (the hawk package's parser). */
const LEAD = /^\s*/;
const LINE_BREAK = /[\n\r\u2028\u2029]/;
/** name="value" pairs separated by commas; a trailing comma is allowed, as the reference allows it. Sticky: matched at lastIndex. */
const PAIR = /(\w+)="([^"]*)"\s*(?:,\s*|$)/y;
const DIGITS = /^\d+$/;

export interface HawkAttributes {
  id: string;
  ts: string;
  nonce: string;
  mac: string;
  hash?: string;
  ext?: string;
  app?: string;
  dlg?: string;
}

/** What the MAC covers (the protocol's "artifacts"). */
export interface HawkArtifacts {
  ts: string | number;
  nonce: string;
  method: string;
  /** Request target: path and query exactly as sent. */
  resource: string;
  host: string;
  port: string | number;
  hash?: string;
  ext?: string;
  app?: string;
  dlg?: string;
}

function malformed(description: string): BadRequest {
  return new BadRequest(description, { location: 'header', field: 'Authorization' });
}

/**
 * Parses `Hawk id="…", ts="…", …`. A missing header or another scheme is 401
 * (the caller may try Hawk); anything else that is not exactly the grammar is
 * 400 with a description of the first fault.
 */
export function parseHawkHeader(header: string | undefined): HawkAttributes {
  if (header === undefined || header === '') {
    throw new Unauthorized('missing Authorization header', { headers: { 'WWW-Authenticate': 'Hawk' } });
  }
  if (header.length > MAX_HEADER_LENGTH) throw malformed(`Authorization header longer than ${MAX_HEADER_LENGTH} bytes`);
  const scheme = SCHEME.exec(header)?.[0] ?? '';
  if (scheme.toLowerCase() !== 'hawk') {
    throw new Unauthorized('unsupported authorization scheme, expected Hawk', { headers: { 'WWW-Authenticate': 'Hawk' } });
  }
  const rest = header.slice(scheme.length);
  // After the scheme, whitespace may span lines; the attributes may not. Tests in lib/hawk.differential.test.ts.
  const lead = LEAD.exec(rest)![0];
  const attributes = rest.slice(lead.length);
  if (lead === '' || attributes === '') throw malformed('Hawk header has no attributes');
  if (LINE_BREAK.test(attributes)) throw malformed('Hawk attributes must be on one line');

  // By slot (ATTRIBUTE_SLOT): one small array instead of an object grown by client-chosen keys.
  const found: Array<string | undefined> = [undefined, undefined, undefined, undefined, undefined, undefined, undefined, undefined];
  let pos = 0;
  while (pos < attributes.length) {
    PAIR.lastIndex = pos;
    const m = PAIR.exec(attributes);
    if (!m) throw malformed(`malformed Hawk attribute near ${JSON.stringify(attributes.slice(pos, pos + 20).trim())}, expected name="value"`);
    const name = m[1];
    const value = m[2];
    const slot = ATTRIBUTE_SLOT.get(name);
    if (slot === undefined) throw malformed(`unknown Hawk attribute "${name}"`);
    if (value === '') throw malformed(`Hawk attribute "${name}" is empty`);
    if (!VALUE_CHARS.test(value)) throw malformed(`Hawk attribute "${name}" holds a character outside printable ASCII or a backslash`);
    if (found[slot] !== undefined) throw malformed(`duplicate Hawk attribute "${name}"`);
    found[slot] = value;
    pos = PAIR.lastIndex;
  }
  for (const [name, slot] of REQUIRED) {
    if (found[slot] === undefined) throw malformed(`missing Hawk attribute "${name}"`);
  }
  const attrs: HawkAttributes = { id: found[ID]!, ts: found[TS]!, nonce: found[NONCE]!, mac: found[MAC]! };
  if (!DIGITS.test(attrs.ts)) throw malformed('Hawk attribute "ts" must be whole seconds (digits only)');
  // dlg is only covered by the MAC together with app; alone it would ride along unsigned.
  if (found[DLG] !== undefined && found[APP] === undefined) throw malformed('Hawk attribute "dlg" requires "app"');
  // The optional ones only when present, as the header gave them.
  if (found[HASH] !== undefined) attrs.hash = found[HASH];
  if (found[EXT] !== undefined) attrs.ext = found[EXT];
  if (found[APP] !== undefined) attrs.app = found[APP];
  if (found[DLG] !== undefined) attrs.dlg = found[DLG];
  return attrs;
}

/** The string the MAC covers, exactly as the protocol defines it. */
export function normalizedString(type: 'header' | 'response', a: HawkArtifacts): string {
  let s =
    `hawk.1.${type}\n${a.ts}\n${a.nonce}\n${a.method.toUpperCase()}\n${a.resource}\n` +
    `${a.host.toLowerCase()}\n${a.port}\n${a.hash ?? ''}\n`;
  if (a.ext) s += a.ext.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
  s += '\n';
  if (a.app) s += `${a.app}\n${a.dlg ?? ''}\n`;
  return s;
}

/** Base64 HMAC-SHA256 of a normalized string with the Hawk key. */
export function hawkMac(key: string, normalized: string): string {
  return createHmac('sha256', key).update(normalized).digest('base64');
}

/** The payload hash: content type without parameters, lowercased. */
export function payloadHash(payload: string | Buffer, contentType = ''): string {
  const type = contentType.split(';')[0].trim().toLowerCase();
  return createHash('sha256').update(`hawk.1.payload\n${type}\n`).update(payload).update('\n').digest('base64');
}

/** The MAC of a server timestamp, sent with a stale-timestamp error so the client can trust it. */
export function timestampMac(key: string, ts: number): string {
  return createHmac('sha256', key).update(`hawk.1.ts\n${ts}\n`).digest('base64');
}

/** The WWW-Authenticate value for a stale timestamp. */
export function staleTimestampChallenge(key: string, nowSeconds: number): string {
  return `Hawk ts="${nowSeconds}", tsm="${timestampMac(key, nowSeconds)}", error="Stale timestamp"`;
}

/** Constant-time string comparison (lengths of MACs and hashes are public). */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export interface HawkHeaderOptions {
  id: string;
  key: string;
  method: string;
  url: string | URL;
  ts?: number;
  nonce?: string;
  ext?: string;
  /** When given (even empty), its hash is signed. */
  payload?: string | Buffer;
  contentType?: string;
  app?: string;
  dlg?: string;
}

/** Request target as an HTTP client sends it, keeping a bare trailing '?' (which `search` hides and `href` keeps). */
function requestTarget(u: URL): string {
  const bareQuery = u.search === '' && /^[^#]*\?(#|$)/.test(u.href);
  return u.pathname + (bareQuery ? '?' : u.search);
}

/** Builds the Authorization header for a request (client side: SDK, CLI, tests). */
export function hawkHeader(o: HawkHeaderOptions): string {
  const u = typeof o.url === 'string' ? new URL(o.url) : o.url;
  const attrs: Record<string, string | undefined> = { id: o.id, nonce: o.nonce, ext: o.ext, app: o.app, dlg: o.dlg };
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && !VALUE_CHARS.test(value)) throw new TypeError(`Hawk ${name} holds characters a header cannot carry`);
  }
  if (o.dlg !== undefined && o.app === undefined) throw new TypeError('Hawk dlg requires app');
  const artifacts: HawkArtifacts = {
    ts: o.ts ?? Math.floor(Date.now() / 1000),
    nonce: o.nonce ?? randomBytes(9).toString('base64url'),
    method: o.method,
    resource: requestTarget(u),
    host: u.hostname,
    port: u.port || (u.protocol === 'https:' ? 443 : 80),
    hash: o.payload === undefined ? undefined : payloadHash(o.payload, o.contentType),
    ext: o.ext || undefined,
    app: o.app || undefined,
    dlg: o.app ? o.dlg || undefined : undefined,
  };
  const mac = hawkMac(o.key, normalizedString('header', artifacts));
  let header = `Hawk id="${o.id}", ts="${artifacts.ts}", nonce="${artifacts.nonce}"`;
  if (artifacts.hash) header += `, hash="${artifacts.hash}"`;
  if (artifacts.ext) header += `, ext="${artifacts.ext}"`;
  header += `, mac="${mac}"`;
  if (artifacts.app) header += `, app="${artifacts.app}"` + (artifacts.dlg ? `, dlg="${artifacts.dlg}"` : '');
  return header;
}
