// hawkFetch: a fetch that signs each request with the TokenClient's token
// (Hawk, sha256) and recovers once from the gateway's two fixable refusals:
// a stale timestamp (clock moved by the server's MAC-checked time) and an
// expired or refused token (a new one is fetched).
import { hawkHeader } from '../lib/hawk.js';
import { statusStringOf } from './errors.js';
import { parseHawkChallenge, resolveUrl, verifyTimestampMac } from './policy.js';
import type { TokenClient } from './token-client.js';

export type HawkFetch = (pathOrUrl: string | URL, init?: RequestInit) => Promise<Response>;

// Gateway status strings after which a new token may succeed.
const TOKEN_REFUSED = new Set(['invalid-credentials', 'invalid-timestamp']);

/**
 * A fetch-like function for the application node. Relative paths resolve
 * under the token's api_endpoint (`'storage/x'` → `<api_endpoint>/storage/x`);
 * absolute URLs are used as they are. A body is read once into memory, so it
 * can be hashed into the signature and sent again on a retry.
 */
export function hawkFetch(client: TokenClient): HawkFetch {
  return async (pathOrUrl, init = {}) => {
    const method = (init.method ?? 'GET').toUpperCase();
    const { body, contentType } = await readBody(init);
    const payload = body && Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    let clockRetried = false;
    let tokenRetried = false;
    for (;;) {
      const token = await client.getToken();
      const url = resolveUrl(token.api_endpoint, pathOrUrl);
      const headers = new Headers(init.headers);
      if (contentType !== undefined) headers.set('Content-Type', contentType);
      headers.set(
        'Authorization',
        hawkHeader({ id: token.id, key: token.key, method, url, ts: Math.floor(client.now() / 1000), payload, contentType }),
      );
      const res = await client.fetch(url, { ...init, method, headers, body });
      if (res.status !== 401) return res;

      const challenge = parseHawkChallenge(res.headers.get('www-authenticate'));
      if (!clockRetried && challenge && verifyTimestampMac(token.key, challenge)) {
        clockRetried = true;
        client.syncClock(challenge.ts);
        await res.body?.cancel();
        continue;
      }
      if (!tokenRetried && TOKEN_REFUSED.has(statusStringOf(await jsonOf(res.clone())) ?? '')) {
        tokenRetried = true;
        client.invalidate();
        await res.body?.cancel();
        continue;
      }
      return res;
    }
  };
}

/** The body as bytes and its content type (fetch's own defaults for strings, forms ...). */
async function readBody(init: RequestInit): Promise<{ body?: Uint8Array<ArrayBuffer>; contentType?: string }> {
  if (init.body === undefined || init.body === null) return {};
  // A throwaway Request does fetch's body extraction for every body type.
  const req = new Request('http://body.invalid/', { method: 'POST', body: init.body, headers: init.headers, duplex: 'half' } as RequestInit);
  return { body: new Uint8Array(await req.arrayBuffer()), contentType: req.headers.get('content-type') ?? undefined };
}

async function jsonOf(res: Response): Promise<unknown> {
  try {
    return await res.json();
  } catch {
    return null;
  }
}
