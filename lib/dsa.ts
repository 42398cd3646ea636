// BrowserID's DSA keys (DESIGN §9.5): `{"algorithm": "DS", "p", "q", "g", "y"}`
// in hex, signing `DS128` (1024-bit p, 160-bit q, SHA-1) or `DS256` (2048/256,
// SHA-256), signatures r || s as fixed-width big-endian bytes (PyBrowserID's
// browserid/crypto). node:crypto cannot import a DSA JWK, so the key goes in
// as a SubjectPublicKeyInfo built here with a few lines of DER.
import { checkPrimeSync, createPublicKey, type KeyObject } from 'node:crypto';

export type DsaAlgorithm = 'DS128' | 'DS256';

/** The two parameter sizes BrowserID defines, and the digest each signs with. */
export const DSA_SIZES: Record<DsaAlgorithm, { pBits: number; qBits: number; digest: 'sha1' | 'sha256' }> = {
  DS128: { pBits: 1024, qBits: 160, digest: 'sha1' },
  DS256: { pBits: 2048, qBits: 256, digest: 'sha256' },
};

/** BrowserID's wire form of a DSA public key, as PyBrowserID writes it (lowercase hex, no leading zeros). */
export type BrowserIdDsaPublicKey = {
  algorithm: 'DS';
  p: string;
  q: string;
  g: string;
  y: string;
};

/** A checked DSA public key. A class, so no JSON value can pass for one. */
export class DsaPublicKey {
  constructor(
    readonly alg: DsaAlgorithm,
    readonly p: bigint,
    readonly q: bigint,
    readonly g: bigint,
    readonly y: bigint,
  ) {}
}

function bitLength(v: bigint): number {
  return v === 0n ? 0 : v.toString(2).length;
}

export function modPow(base: bigint, exponent: bigint, modulus: bigint): bigint {
  let result = 1n;
  let b = base % modulus;
  for (let e = exponent; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % modulus;
    b = (b * b) % modulus;
  }
  return result;
}

function hexMember(o: Record<string, unknown>, name: string, maxHexDigits: number): bigint {
  const v = o[name];
  // Length first: the regex and BigInt then run on at most 512 characters. The regex refuses ''.
  if (typeof v !== 'string' || v.length > maxHexDigits || !/^[0-9a-fA-F]+$/.test(v)) {
    throw new TypeError(`"${name}" must be a hex string of at most ${maxHexDigits} digits`);
  }
  return BigInt(`0x${v}`);
}

/** Answers of isPrime, by value: keys mostly share a few published parameter sets. */
const primality = new Map<bigint, boolean>();
const PRIMALITY_CACHE_LIMIT = 1000;

/**
 * Whether `n` is prime (OpenSSL's Miller–Rabin, error below 2^-128); remembered,
 * since a 256-bit test costs about a millisecond.
 */
export function isPrime(n: bigint): boolean {
  let known = primality.get(n);
  if (known === undefined) {
    if (primality.size >= PRIMALITY_CACHE_LIMIT) primality.clear();
    known = checkPrimeSync(n);
    primality.set(n, known);
  }
  return known;
}

/**
 * Checks a key in BrowserID's DS form; throws TypeError saying why it is not
 * usable. Beyond the two sizes: 1 < g < p and 1 < y < p, q divides p − 1, q is
 * prime (so odd: it has 160 or 256 bits), and g and y lie in the subgroup of
 * order q. With g or y of order 1 or 2 (1 or p − 1), or an even q that p − 1
 * itself satisfies, anyone could make signatures that verify. The primality of
 * p is not tested (a 2048-bit test costs over 100 ms per certificate); a
 * trusted issuer certified the key.
 */
export function parseDsaPublicKey(o: Record<string, unknown>): DsaPublicKey {
  const p = hexMember(o, 'p', 512);
  const q = hexMember(o, 'q', 64);
  const g = hexMember(o, 'g', 512);
  const y = hexMember(o, 'y', 512);
  const alg = (Object.keys(DSA_SIZES) as DsaAlgorithm[]).find((a) => DSA_SIZES[a].pBits === bitLength(p) && DSA_SIZES[a].qBits === bitLength(q));
  if (!alg) throw new TypeError('p and q must have 1024 and 160 bits (DS128) or 2048 and 256 bits (DS256)');
  if (g <= 1n || g >= p) throw new TypeError('"g" must be between 1 and p (exclusive)');
  if (y <= 1n || y >= p) throw new TypeError('"y" must be between 1 and p (exclusive)');
  if ((p - 1n) % q !== 0n) throw new TypeError('q must divide p - 1');
  if (!isPrime(q)) throw new TypeError('q must be an odd prime');
  if (modPow(g, q, p) !== 1n) throw new TypeError('"g" must generate the subgroup of order q');
  if (modPow(y, q, p) !== 1n) throw new TypeError('"y" must lie in the subgroup of order q');
  return new DsaPublicKey(alg, p, q, g, y);
}

// ---- DER: just what a DSA SubjectPublicKeyInfo needs (X.690, RFC 3279 §2.3.2) ----

const SEQUENCE = 0x30;
const INTEGER = 0x02;
const BIT_STRING = 0x03;
/** OBJECT IDENTIFIER 1.2.840.10040.4.1 (id-dsa), tag and length included. */
const ID_DSA = Buffer.from('06072a8648ce380401', 'hex');

function derElement(tag: number, content: Buffer): Buffer {
  const n = content.length;
  const length = n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : [0x82, n >> 8, n & 0xff];
  return Buffer.concat([Buffer.from([tag, ...length]), content]);
}

function derInteger(v: bigint): Buffer {
  const hex = v.toString(16);
  const bytes = Buffer.from(hex.length % 2 ? `0${hex}` : hex, 'hex');
  // A set top bit would read as negative: prefix a zero byte.
  return derElement(INTEGER, bytes[0] & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
}

/** SubjectPublicKeyInfo { AlgorithmIdentifier { id-dsa, Dss-Parms { p, q, g } }, BIT STRING { INTEGER y } }, DER. */
export function dsaSpki(k: DsaPublicKey): Buffer {
  const algorithm = derElement(SEQUENCE, Buffer.concat([ID_DSA, derElement(SEQUENCE, Buffer.concat([derInteger(k.p), derInteger(k.q), derInteger(k.g)]))]));
  return derElement(SEQUENCE, Buffer.concat([algorithm, derElement(BIT_STRING, Buffer.concat([Buffer.from([0]), derInteger(k.y)]))]));
}

/** The KeyObject node:crypto verifies with. */
export function dsaKeyObject(k: DsaPublicKey): KeyObject {
  return createPublicKey({ key: dsaSpki(k), format: 'der', type: 'spki' });
}

/**
 * Reads one DER element at `offset`: its tag, content and where the next one
 * starts. Only ever given node:crypto's own export, so it does not check for
 * truncation.
 */
function readDer(der: Buffer, offset: number): { tag: number; content: Buffer; end: number } {
  const tag = der[offset];
  let length = der[offset + 1];
  let start = offset + 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    length = der.readUIntBE(start, bytes);
    start += bytes;
  }
  return { tag, content: der.subarray(start, start + length), end: start + length };
}

function children(content: Buffer): { tag: number; content: Buffer }[] {
  const out = [];
  for (let offset = 0; offset < content.length; ) {
    const e = readDer(content, offset);
    out.push(e);
    offset = e.end;
  }
  return out;
}

/** A DER INTEGER's content (never empty) as a non-negative number: DSA's are all positive. */
const toBigInt = (b: Buffer) => BigInt(`0x${b.toString('hex')}`);

/** The DS form of a DSA KeyObject (node:crypto exports no DSA JWK); for test and development signers. */
export function browserIdDsaFromKeyObject(key: KeyObject): BrowserIdDsaPublicKey {
  const [algorithm, subjectPublicKey] = children(readDer(key.export({ format: 'der', type: 'spki' }), 0).content);
  const [, params] = children(algorithm.content);
  const [p, q, g] = children(params.content).map((e) => toBigInt(e.content));
  const y = toBigInt(readDer(subjectPublicKey.content, 1).content);
  return { algorithm: 'DS', p: p.toString(16), q: q.toString(16), g: g.toString(16), y: y.toString(16) };
}

/**
 * r || s as OpenSSL's `ieee-p1363` encoding wants it: exactly twice q's byte
 * length. Shorter signatures are left-padded as PyBrowserID's verifier does
 * (the same integer with its leading zero bytes dropped); longer → null.
 */
export function dsaSignature(signature: Buffer, alg: DsaAlgorithm): Buffer | null {
  const size = (2 * DSA_SIZES[alg].qBits) / 8;
  if (signature.length > size) return null;
  return signature.length < size ? Buffer.concat([Buffer.alloc(size - signature.length), signature]) : signature;
}
