// The whole system for cross-service tests (security, fuzzing, load): the
// embedded stack (scripts/stack.ts) on loopback ephemeral ports with SQLite in
// a temp folder and known master secrets, its development IdP for assertions,
// and small request helpers for the login service and the gateway.
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Env } from '../../lib/config.js';
import { hawkHeader } from '../../lib/hawk.js';
import { loadOrCreateDevIdp, type DevIdp } from '../../lib/idp.js';
import { httpRequest, jsonOrUndefined, type HttpResponse } from '../../services/login/testkit.js';
import { startStack, type Stack } from '../../scripts/stack.js';
import { runCli } from '../../cli/run.js';
import { newSecret, TEST_AUTH } from './services.js';
import type { Token } from '../../sdk/index.js';

export const APP = 'sync';
export const VERSION = '1.5';
export const TOKEN_PATH = `/1.0/${APP}/${VERSION}`;

/** The login's 200 body, as the SDK types it. */
export type { Token };

export interface LoginOptions {
  clientState?: string;
  generation?: number;
  audience?: string;
  /** Extra or replacing headers (an Authorization here wins). */
  headers?: Record<string, string>;
  path?: string;
}

export interface SignedRequestOptions {
  method?: string;
  /** Under the token's api_endpoint, e.g. 'storage/x?full=1'; or an absolute path '/1.5/…'. */
  path?: string;
  body?: string;
  contentType?: string;
  /** Sign the body's hash (default when there is a body). */
  hashPayload?: boolean;
  ts?: number;
  nonce?: string;
  /** Sign with these instead of the token's (to test refusals). */
  id?: string;
  key?: string;
  /** A ready Authorization header, used as is. */
  authorization?: string;
}

export interface GatewayResponse {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

export interface TestStack extends Stack {
  env: Env;
  masterSecrets: string[];
  idp: DevIdp;
  /** The node URL tokens name (the gateway's public URL). */
  nodeUrl: string;
  /** `Assertion <cert>~<assertion>` for `email` from the trusted development IdP. */
  authorization(email: string, o?: Pick<LoginOptions, 'generation' | 'audience'>): Promise<string>;
  /** GET the token endpoint over real HTTP. */
  login(email: string, o?: LoginOptions): Promise<HttpResponse>;
  /** A Hawk-signed request through the gateway with a token from login(). */
  signed(token: Pick<Token, 'id' | 'key' | 'api_endpoint'>, o?: SignedRequestOptions): Promise<GatewayResponse>;
}

/** Starts the embedded stack in a temp folder; `close()` also removes the folder. */
export async function startTestStack(extra: Env = {}): Promise<TestStack> {
  const dir = mkdtempSync(path.join(tmpdir(), 'stack-test-'));
  const masterSecrets = [newSecret()];
  const env: Env = {
    DATA_DIR: dir,
    APPLICATIONS: `${APP}/${VERSION}`,
    MASTER_SECRETS: masterSecrets.join(','),
    INTERNAL_SECRET: TEST_AUTH.internalSecret,
    LOGIN_PORT: '0',
    GATEWAY_PORT: '0',
    DIRECTORY_PORT: '0',
    NODEASSIGN_PORT: '0',
    DEMO_APP_PORT: '0',
    ...extra,
  };
  let stack: Stack;
  try {
    stack = await startStack(env);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const idp = await loadOrCreateDevIdp(stack.dataDir);

  const authorization: TestStack['authorization'] = async (email, o = {}) =>
    `Assertion ${await idp.makeAssertion(email, { audience: o.audience ?? stack.audience, generation: o.generation })}`;

  return {
    ...stack,
    env,
    masterSecrets,
    idp,
    nodeUrl: stack.gatewayUrl,
    authorization,
    async login(email, o = {}) {
      const headers: Record<string, string> = { Authorization: await authorization(email, o) };
      if (o.clientState !== undefined) headers['X-Client-State'] = o.clientState;
      return httpRequest(`${stack.loginUrl}${o.path ?? TOKEN_PATH}`, { headers: { ...headers, ...o.headers } });
    },
    async signed(token, o = {}) {
      const method = o.method ?? 'GET';
      const url = o.path?.startsWith('/') ? `${stack.gatewayUrl}${o.path}` : `${token.api_endpoint}/${o.path ?? ''}`;
      const contentType = o.body === undefined ? undefined : (o.contentType ?? 'application/json');
      const auth =
        o.authorization ??
        hawkHeader({
          id: o.id ?? token.id,
          key: o.key ?? token.key,
          method,
          url,
          ts: o.ts,
          nonce: o.nonce,
          ...(o.body !== undefined && o.hashPayload !== false ? { payload: o.body, contentType } : {}),
        });
      const res = await fetch(url, {
        method,
        headers: { Authorization: auth, ...(contentType ? { 'Content-Type': contentType } : {}) },
        body: o.body,
        signal: AbortSignal.timeout(10_000),
      });
      const text = await res.text();
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      return { status: res.status, headers: res.headers, text, json };
    },
    async close() {
      await stack.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The environment of an operator CLI that talks to `stack`'s directory and nodeassign. */
export function cliEnv(stack: TestStack): Env {
  return { ...stack.env, DIRECTORY_ADDR: stack.directoryAddr, NODEASSIGN_ADDR: stack.nodeAssignAddr };
}

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed, when it is JSON (--json). */
  json: any;
}

/** The operator CLI in this process (runCli, what cli/main.ts runs), against `stack`. */
export async function stackCli(stack: TestStack, argv: string[], o: { stderrIsTTY?: boolean } = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, cliEnv(stack), { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), stderrIsTTY: o.stderrIsTTY });
  return { code, stdout, stderr, json: jsonOrUndefined(stdout) };
}

/** The DESIGN §3 error body: `{"status", "errors": [{location, name, description}]}`. */
export function isErrorBody(body: unknown, statusString?: string): boolean {
  if (typeof body !== 'object' || body === null) return false;
  const b = body as { status?: unknown; errors?: unknown };
  if (typeof b.status !== 'string' || (statusString !== undefined && b.status !== statusString)) return false;
  if (!Array.isArray(b.errors) || b.errors.length === 0) return false;
  return b.errors.every(
    (e: { location?: unknown; name?: unknown; description?: unknown }) =>
      ['header', 'url', 'body', 'internal'].includes(e.location as string) && typeof e.name === 'string' && typeof e.description === 'string',
  );
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: any;
}

/**
 * One request with the target sent exactly as given (no URL normalisation, which
 * fetch and `new URL` apply), on a fresh connection. Node refuses to send
 * control characters and spaces in a target; callers keep to \x21-\x7e.
 */
export function rawRequest(
  baseUrl: string,
  o: { method?: string; target: string; headers?: Record<string, string>; body?: string; timeoutMs?: number },
): Promise<RawResponse> {
  const base = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: base.hostname, port: base.port, method: o.method ?? 'GET', path: o.target, headers: o.headers, agent: false, timeout: o.timeoutMs ?? 10_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: jsonOrUndefined(text) });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`request ${o.target} timed out`)));
    req.on('error', reject);
    req.end(o.body);
  });
}
