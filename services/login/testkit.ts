// Test helper: one real HTTP request with node:http, keeping repeated
// response headers apart (fetch would join two WWW-Authenticate headers).
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
  opts: { method?: string; headers?: Record<string, string>; timeoutMs?: number } = {},
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
    req.end();
  });
}
