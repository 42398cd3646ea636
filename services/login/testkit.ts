// Test helpers: one real HTTP request with node:http, keeping repeated
// response headers apart (fetch would join two WWW-Authenticate headers);
// JWS that only a lax verifier accepts.
import { createHash } from 'node:crypto';
import { FlattenedSign } from 'jose';
import type { KeyPair } from '../../lib/idp.js';
import { request } from 'node:http';

export interface HttpResponse {
  status: number;
  /** Lower-case header name → every value sent, in order. */
  headers: Map<string, string[]>;
  header(name: string): string | undefined;
  text: string;
  json: any;
}

/** A response body parsed as JSON, or undefined when it is empty or not JSON. */
export function jsonOrUndefined(text: string): unknown {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

export function httpRequest(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {},
): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: opts.method ?? 'GET', headers: opts.headers, timeout: opts.timeoutMs ?? 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const headers = new Map<string, string[]>();
        for (let i = 0; i < res.rawHeaders.length; i += 2) {
          const name = res.rawHeaders[i].toLowerCase();
          headers.set(name, [...(headers.get(name) ?? []), res.rawHeaders[i + 1]]);
        }
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers, header: (n) => headers.get(n.toLowerCase())?.join(', '), text, json: jsonOrUndefined(text) });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`request to ${url} timed out`)));
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** DER DigestInfo prefix of SHA-256 in an RSASSA-PKCS1-v1_5 signature (RFC 8017 §9.2). */
const SHA256_DIGEST_INFO = Buffer.from('3031300d060960864801650304020105000420', 'hex');

/**
 * A compact RS256 JWS "signed" for an RSA key with exponent 1 and modulus
 * `n` (base64url), with no private key: s^1 mod n = s, so the signature is
 * the padded digest itself. Verifies wherever e = 1 is accepted.
 */
export function forgeExponentOneJws(payload: unknown, n: string): string {
  const signingInput = `${Buffer.from(JSON.stringify({ alg: 'RS256' })).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  const digest = Buffer.concat([SHA256_DIGEST_INFO, createHash('sha256').update(signingInput).digest()]);
  const k = Buffer.from(n, 'base64url').length;
  const encoded = Buffer.concat([Buffer.from([0, 1]), Buffer.alloc(k - 3 - digest.length, 0xff), Buffer.from([0]), digest]);
  return `${signingInput}.${encoded.toString('base64url')}`;
}

/**
 * A compact JWS with `b64: false` (RFC 7797) whose unencoded payload is the
 * base64url of `payload`'s JSON: byte for byte an ordinary JWS but for the
 * header, so a verifier that ignores `b64` reads claims the signer never
 * signed as JSON.
 */
export async function signUnencodedJws(key: Pick<KeyPair, 'alg' | 'privateKey'>, payload: unknown): Promise<string> {
  const segment = Buffer.from(JSON.stringify(payload)).toString('base64url');
  const jws = await new FlattenedSign(new TextEncoder().encode(segment)).setProtectedHeader({ alg: key.alg, b64: false, crit: ['b64'] }).sign(key.privateKey);
  return `${jws.protected}.${segment}.${jws.signature}`;
}
