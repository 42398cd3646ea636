// No secret in the logs of a full run: `npm start`'s script as a child process
// with LOG_LEVEL=debug (every service in one process, as a user runs it),
// logins that succeed and fail, gateway requests that pass and are refused,
// then every line it wrote is searched for the master secret, the node
// secrets and signing keys, token ids, derived keys, the assertions and their
// parts, the development IdP's private key, and the internal gRPC secret
// (right and wrong: a refused call is logged without either). The lines must exist, be
// JSON, and carry the request id from login through directory and nodeassign.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DirectoryClient } from '../lib/gen/directory.js';
import { call, grpcClient } from '../lib/grpc.js';
import { hawkHeader } from '../lib/hawk.js';
import { DEV_IDP_FILE, loadOrCreateDevIdp, type DevIdp } from '../lib/idp.js';
import { nodeSecrets, signingKey } from '../lib/token.js';
import { httpRequest, type HttpResponse } from '../services/login/testkit.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MASTER_SECRET = randomBytes(32).toString('hex');
const INTERNAL_SECRET = randomBytes(32).toString('hex');
const WRONG_INTERNAL_SECRET = randomBytes(32).toString('hex');
const TOKEN_PATH = '/1.0/sync/1.5';

let dir: string;
let child: ChildProcess;
let output = '';
let exited: Promise<number | null>;
let loginUrl: string;
let gatewayUrl: string;
let directoryAddr: string;
let metricsUrls: { login: string; gateway: string };
let audience: string;
let idp: DevIdp;
/** Everything that must never reach a log line. */
const secrets = new Set<string>();

function waitForOutput(pattern: RegExp, timeoutMs = 60_000): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${pattern} in the output within ${timeoutMs} ms:\n${output}`)), timeoutMs);
    const check = (): void => {
      const m = pattern.exec(output);
      if (m) {
        clearTimeout(timer);
        child.stdout!.off('data', check);
        resolve(m);
      }
    };
    child.stdout!.on('data', check);
    check();
  });
}

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'logs-test-'));
  child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      LOG_LEVEL: 'debug',
      DATA_DIR: dir,
      MASTER_SECRETS: MASTER_SECRET,
      INTERNAL_SECRET,
      APPLICATIONS: 'sync/1.5',
      LOGIN_PORT: '0',
      GATEWAY_PORT: '0',
      DIRECTORY_PORT: '0',
      NODEASSIGN_PORT: '0',
      DEMO_APP_PORT: '0',
      LOGIN_METRICS_PORT: '0',
      GATEWAY_METRICS_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d: Buffer) => (output += d));
  child.stderr!.on('data', (d: Buffer) => (output += d));
  exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  await waitForOutput(/Ctrl-C stops everything/);
  loginUrl = /login:\s+(http:\/\/\S+?)\/1\.0\//.exec(output)![1];
  gatewayUrl = /node-gateway:\s+(http:\/\/\S+)/.exec(output)![1];
  const metricsOf = (service: string) => new RegExp(`metrics:\\s+(http://\\S+)\\s+\\(${service}\\)`).exec(output)![1];
  metricsUrls = { login: metricsOf('login'), gateway: metricsOf('gateway') };
  audience = /--audience (\S+)/.exec(output)![1];
  directoryAddr = /directory:\s+(\S+)\s+\(gRPC\)/.exec(output)![1];
  idp = await loadOrCreateDevIdp(dir);

  secrets.add(MASTER_SECRET);
  secrets.add(INTERNAL_SECRET);
  secrets.add(WRONG_INTERNAL_SECRET);
  for (const s of nodeSecrets([MASTER_SECRET], gatewayUrl)) {
    secrets.add(s);
    secrets.add(signingKey(s).toString('hex'));
    secrets.add(signingKey(s).toString('base64'));
  }
  const devKey = JSON.parse(readFileSync(path.join(dir, DEV_IDP_FILE), 'utf8')) as { privateJwk: { d: string } };
  secrets.add(devKey.privateJwk.d);
});

after(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGKILL');
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

/** An Authorization header from the development IdP; its assertion and every part of it are secrets. */
async function authorization(email: string, o: { audience?: string } = {}): Promise<string> {
  const bundle = await idp.makeAssertion(email, { audience: o.audience ?? audience });
  secrets.add(bundle);
  for (const jws of bundle.split('~')) {
    secrets.add(jws);
    // The header segment ({"alg":"ES256"}) is the same for everyone; payload and signature are not.
    for (const segment of jws.split('.').slice(1)) secrets.add(segment);
  }
  return `Assertion ${bundle}`;
}

async function login(email: string, headers: Record<string, string> = {}, o: { audience?: string } = {}): Promise<HttpResponse> {
  const authHeader = await authorization(email, o);
  secrets.add(authHeader);
  const res = await httpRequest(`${loginUrl}${TOKEN_PATH}`, { headers: { Authorization: authHeader, ...headers } });
  if (res.status === 200) {
    secrets.add(res.json.id);
    secrets.add(res.json.key);
  }
  return res;
}

async function signed(token: { id: string; key: string; api_endpoint: string }, o: { method?: string; path?: string; body?: string; key?: string; nonce?: string; requestId?: string } = {}) {
  const method = o.method ?? 'GET';
  const url = `${token.api_endpoint}/${o.path ?? ''}`;
  const auth = hawkHeader({
    id: token.id,
    key: o.key ?? token.key,
    method,
    url,
    nonce: o.nonce,
    ...(o.body !== undefined ? { payload: o.body, contentType: 'application/json' } : {}),
  });
  secrets.add(auth);
  const headers: Record<string, string> = { Authorization: auth };
  if (o.body !== undefined) headers['Content-Type'] = 'application/json';
  if (o.requestId) headers['X-Request-Id'] = o.requestId;
  const res = await fetch(url, { method, headers, body: o.body, signal: AbortSignal.timeout(10_000) });
  await res.text();
  return res;
}

/** Every substring of `s` of `size` characters, every `step`: a leaked fragment of a secret matches one. */
function windows(s: string, size = 16, step = 8): string[] {
  if (s.length <= size) return [s];
  const out: string[] = [];
  for (let i = 0; i + size <= s.length; i += step) out.push(s.slice(i, i + size));
  out.push(s.slice(-size));
  return out;
}

test('a full run at LOG_LEVEL=debug: log lines with request ids everywhere, and no secret in any of them', async () => {
  // ---- logins: success, the same user again, and failures of every kind ----
  const email = 'logs-user@example.com';
  const ok = await login(email, { 'X-Request-Id': 'logs-login-ok', 'X-Client-State': 'aaaa' });
  assert.equal(ok.status, 200, ok.text);
  assert.equal((await login(email, { 'X-Client-State': 'aaaa' })).status, 200);
  const failures: Array<[Promise<HttpResponse>, number]> = [
    [login(email, { 'X-Request-Id': 'logs-login-state' }), 401], // empty client state after a non-empty one
    [login('other@example.com', { 'X-Request-Id': 'logs-login-aud' }, { audience: 'https://elsewhere.example' }), 401],
    [login('third@example.com', { Accept: 'text/html' }), 406],
    [login('fourth@example.com', { 'X-Client-State': 'not valid!' }), 400],
    [httpRequest(`${loginUrl}${TOKEN_PATH}`, { headers: { Authorization: 'Assertion not-a-jws~still-not-one' } }), 401],
    [httpRequest(`${loginUrl}/1.0/unknown/1.5?duration=60`, { headers: { Authorization: await authorization('fifth@example.com') } }), 404],
  ];
  for (const [res, status] of failures) assert.equal((await res).status, status);

  // ---- the gateway: signed requests, and refusals ----
  const token = ok.json as { id: string; key: string; api_endpoint: string };
  assert.equal((await signed(token, { path: 'info', requestId: 'logs-gw-ok' })).status, 200);
  assert.equal((await signed(token, { method: 'POST', path: 'storage', body: '{"secret":"payload"}' })).status, 200);
  assert.equal((await signed(token, { path: 'info', key: `${'A'.repeat(43)}=` })).status, 401, 'wrong key');
  const nonce = 'logs-nonce-1';
  assert.equal((await signed(token, { path: 'info', nonce })).status, 200);
  assert.equal((await signed(token, { path: 'info', nonce })).status, 401, 'replayed nonce');
  assert.equal((await fetch(`${gatewayUrl}/1.5/1/info`)).status, 401, 'unsigned');
  assert.equal((await httpRequest(metricsUrls.login)).status, 200);
  assert.equal((await httpRequest(metricsUrls.gateway)).status, 200);

  // ---- a gRPC call to the directory with a wrong internal secret ----
  const stranger = grpcClient(DirectoryClient, directoryAddr, { internalSecret: WRONG_INTERNAL_SECRET });
  try {
    await assert.rejects(call(stranger, stranger.getUser, { service: 'sync', email }, { deadlineMs: 5000, retryAfter: 1 }), /UNAUTHENTICATED/);
  } finally {
    stranger.close();
  }

  // ---- stop, and read everything it wrote ----
  child.kill('SIGINT');
  assert.equal(await exited, 0, output);

  const lines = output.split('\n').filter((l) => l.trim() !== '');
  const logs = lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.ok(logs.length >= 20, `only ${logs.length} log lines:\n${output}`);

  // Every line, log or not, is free of every secret and every fragment of one.
  const needles = [...secrets].flatMap((s) => windows(s));
  assert.ok(secrets.size >= 20, `only ${secrets.size} secrets collected`);
  for (const line of lines) {
    for (const needle of needles) assert.ok(!line.includes(needle), `a secret fragment ${JSON.stringify(needle)} in: ${line}`);
  }

  // Access lines: one per request, each with a request id, never a header or the query.
  const access = logs.filter((l) => l.msg === 'request');
  for (const l of access) {
    assert.equal(typeof l.requestId, 'string', JSON.stringify(l));
    assert.equal(typeof l.status, 'number', JSON.stringify(l));
    assert.equal(typeof l.statusString, 'string', JSON.stringify(l));
    assert.ok(!String(l.path).includes('?'), JSON.stringify(l));
  }
  const of = (service: string, requestId: string) => logs.filter((l) => l.service === service && l.requestId === requestId);

  const loginOk = of('login', 'logs-login-ok').find((l) => l.msg === 'request');
  assert.ok(loginOk, 'the login access line');
  assert.equal(loginOk.status, 200);
  assert.equal(loginOk.statusString, 'ok');
  assert.equal(loginOk.uid, ok.json.uid);
  // The same request id on the backends' lines: carried in gRPC metadata.
  assert.ok(of('directory', 'logs-login-ok').some((l) => l.msg === 'rpc' && l.method === 'Login' && l.outcome === 'ok'), 'directory Login line');
  assert.ok(of('directory', 'logs-login-ok').some((l) => l.msg === 'rpc' && l.method === 'AssignNode'), 'directory AssignNode line');
  assert.ok(of('nodeassign', 'logs-login-ok').some((l) => l.msg === 'rpc' && l.method === 'Allocate'), 'nodeassign Allocate line');

  assert.equal(of('login', 'logs-login-state').find((l) => l.msg === 'request')?.statusString, 'invalid-client-state');
  assert.ok(of('directory', 'logs-login-state').some((l) => l.msg === 'rpc' && l.outcome === 'InvalidClientState'));
  assert.equal(of('login', 'logs-login-aud').find((l) => l.msg === 'request')?.statusString, 'invalid-credentials');
  // The body says only Mozilla's "Unauthorized" (DESIGN §11.2): the access line keeps the reason.
  assert.equal(of('login', 'logs-login-aud').find((l) => l.msg === 'request')?.reason, 'assertion audience is not accepted here');
  assert.equal(loginOk.reason, undefined, 'no reason on a 200');

  const gwOk = of('node-gateway', 'logs-gw-ok').find((l) => l.msg === 'request');
  assert.ok(gwOk, 'the gateway access line');
  assert.equal(gwOk.status, 200);
  assert.equal(gwOk.uid, loginOk.uid);
  assert.equal(typeof gwOk.upstreamMs, 'number');
  assert.ok(
    logs.some((l) => l.msg === 'rpc refused: internal secret' && l.reason === 'wrong secret' && l.method === '/tokenserver.directory.v1.Directory/GetUser'),
    'the refused call is logged',
  );
  const gwRefusals = access.filter((l) => l.service === 'node-gateway' && l.status === 401);
  assert.equal(gwRefusals.length, 3, 'wrong key, replay, unsigned');
});
