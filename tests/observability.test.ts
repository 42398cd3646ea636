// Observability through the real interfaces: the overload signal (X-Backoff,
// then 503 beyond the cap) driven deterministically by a directory whose Login
// calls wait at a gate; the request id carried into gRPC metadata; /metrics (on
// its own port, LOGIN_METRICS_PORT / GATEWAY_METRICS_PORT) of login and gateway counting a real demo round trip (`npm run demo`'s script as a
// child process against the embedded stack); the gateway's request id and /__version__.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { VERSION_INFO } from '../lib/version.js';
import type { RunningLogin } from '../services/login/server.js';
import { httpRequest, type HttpResponse } from '../services/login/testkit.js';
import { System } from './login.suite.js';
import { gatedDirectory, type GatedDirectory } from './support/gated-directory.js';
import { loadOpenApi, responseProblems } from './support/openapi.js';
import { metricValue } from './support/prometheus.js';
import { startTestStack, TOKEN_PATH, type TestStack } from './support/stack.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TOKEN_ROUTE = '/1.0/:app/:version';

function conformsToDocument(res: HttpResponse, method: string, requestPath: string): void {
  assert.deepEqual(responseProblems(loadOpenApi(), { method, path: requestPath, status: res.status, headers: res.headers, text: res.text }), []);
}

describe('overload signal through real HTTP', () => {
  let dir: string;
  let sys: System;
  let gated: GatedDirectory;
  let login: RunningLogin;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'overload-test-'));
    sys = new System(`sqlite:${path.join(dir, 'system.db')}`);
    await sys.start();
    gated = await gatedDirectory(`sqlite:${path.join(dir, 'gated.db')}`);
    login = await sys.startLogin({
      LOGIN_METRICS_PORT: '0',
      DIRECTORY_ADDR: `127.0.0.1:${gated.port}`,
      BACKOFF_INFLIGHT: '1',
      MAX_INFLIGHT: '2',
      BACKOFF_SECONDS: '45',
      // Only the in-flight count decides here, so the outcome does not depend on machine load.
      BACKOFF_LOOP_DELAY_MS: '0',
      // Held calls must not hit the suite's short gRPC deadline.
      GRPC_DEADLINE_MS: '20000',
    });
  });

  after(async () => {
    await gated?.close();
    await sys?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('within the threshold: no X-Backoff; above it: X-Backoff; beyond the cap: 503 + Retry-After + X-Backoff; the request id reaches the directory', async () => {
    const request = async (email: string, requestId: string) =>
      sys.get(TOKEN_PATH, { Authorization: await sys.auth(email), 'X-Request-Id': requestId }, { login });
    const first = request(sys.newEmail(), 'overload-a');
    await gated.waitForHeld(1);
    const second = request(sys.newEmail(), 'overload-b');
    await gated.waitForHeld(2);

    const refused = await request(sys.newEmail(), 'overload-c');
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.json.status, 'error');
    assert.equal(refused.header('retry-after'), '7');
    assert.equal(refused.header('x-backoff'), '45');
    assert.equal(refused.header('x-request-id'), 'overload-c');
    conformsToDocument(refused, 'GET', TOKEN_PATH);

    const during = (await httpRequest(`http://127.0.0.1:${login.metricsPort}/metrics`)).text;
    assert.equal(metricValue(during, 'login_token_requests_in_flight'), 2);

    gated.open();
    const [a, b] = await Promise.all([first, second]);
    assert.equal(a.status, 200, a.text);
    assert.equal(a.header('x-backoff'), undefined, 'one in flight is within the threshold');
    assert.equal(b.status, 200, b.text);
    assert.equal(b.header('x-backoff'), '45', 'two in flight is above it');
    conformsToDocument(a, 'GET', TOKEN_PATH);
    conformsToDocument(b, 'GET', TOKEN_PATH);

    const calm = await sys.get(TOKEN_PATH, { Authorization: await sys.auth(sys.newEmail()) }, { login });
    assert.equal(calm.status, 200, calm.text);
    assert.equal(calm.header('x-backoff'), undefined, 'the signal ends with the load');
    // The refused request never reached the directory; the others carried their ids there.
    assert.deepEqual(gated.requestIds, ['overload-a', 'overload-b', calm.header('x-request-id')]);

    const page = (await httpRequest(`http://127.0.0.1:${login.metricsPort}/metrics`)).text;
    assert.equal(metricValue(page, 'login_overload_total', { action: 'backoff' }), 1);
    assert.equal(metricValue(page, 'login_overload_total', { action: 'reject' }), 1);
    assert.equal(metricValue(page, 'login_token_requests_in_flight'), 0);
    assert.equal(metricValue(page, 'http_requests_total', { route: TOKEN_ROUTE, status: '503', status_string: 'error' }), 1);
    assert.equal(metricValue(page, 'http_requests_total', { route: TOKEN_ROUTE, status: '200', status_string: 'ok' }), 3);
  });

  test('an X-Request-Id that is not sane is replaced by a fresh one', async () => {
    const res = await sys.get('/__lbheartbeat__', { 'X-Request-Id': 'has spaces and "quotes"' }, { login });
    assert.match(res.header('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  });
});

describe('/metrics after a demo round trip (embedded stack)', () => {
  let stack: TestStack;

  before(async () => {
    stack = await startTestStack({ LOGIN_METRICS_PORT: '0', GATEWAY_METRICS_PORT: '0' });
  });
  after(async () => {
    await stack?.close();
  });

  function runDemo(): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', 'scripts/demo.ts', '--email', 'metrics@example.com'],
        { cwd: ROOT, env: { ...process.env, LOGIN_URL: stack.loginUrl, DATA_DIR: stack.dataDir, APPLICATIONS: 'sync/1.5' }, timeout: 60_000 },
        (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  }

  test('login and gateway count the demo’s token request, backend calls, allocation and signed requests', async () => {
    const run = await runDemo();
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /round trip complete/);

    const loginRes = await httpRequest(stack.metricsUrls.login!);
    assert.equal(loginRes.status, 200);
    assert.match(loginRes.header('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const lp = loginRes.text;
    const login = { service: 'login' };
    assert.equal(metricValue(lp, 'http_requests_total', { ...login, route: TOKEN_ROUTE, method: 'GET', status: '200', status_string: 'ok' }), 1);
    assert.equal(metricValue(lp, 'http_request_duration_seconds_count', { ...login, route: TOKEN_ROUTE }), 1);
    assert.equal(metricValue(lp, 'login_node_allocations_total', { ...login, application: 'sync' }), 1);
    for (const method of ['directory.Login', 'nodeassign.Allocate', 'directory.AssignNode']) {
      assert.equal(metricValue(lp, 'login_backend_call_duration_seconds_count', { ...login, method, outcome: 'ok' }), 1, method);
    }
    assert.ok(metricValue(lp, 'process_resident_memory_bytes') > 0, 'process metrics too');

    const gp = (await httpRequest(stack.metricsUrls.gateway!)).text;
    const gw = { service: 'node-gateway' };
    assert.equal(metricValue(gp, 'http_requests_total', { ...gw, route: 'proxy', status: '200', status_string: 'ok' }), 2, 'signed GET and POST');
    assert.equal(metricValue(gp, 'gateway_upstream_duration_seconds_count', { ...gw, outcome: '2xx' }), 2);
    assert.equal(metricValue(gp, 'gateway_rejections_total', gw), 0);
  });

  test('gateway: rejections by reason, X-Request-Id on every answer, /__version__', async () => {
    const unsigned = await httpRequest(`${stack.gatewayUrl}/1.5/1/storage`, { headers: { 'X-Request-Id': 'gw-req-1' } });
    assert.equal(unsigned.status, 401);
    assert.equal(unsigned.header('x-request-id'), 'gw-req-1');
    const malformed = await httpRequest(`${stack.gatewayUrl}/1.5/1/storage`, { headers: { Authorization: 'Hawk id="x", mac' } });
    assert.equal(malformed.status, 400);
    assert.match(malformed.header('x-request-id') ?? '', /^[0-9a-f-]{36}$/);

    const token = (await stack.login('gateway-metrics@example.com')).json;
    const signed = await stack.signed(token, { path: 'info' });
    assert.equal(signed.status, 200, signed.text);
    assert.match(signed.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);

    const version = await httpRequest(`${stack.gatewayUrl}/__version__`);
    assert.equal(version.status, 200);
    assert.deepEqual(version.json, VERSION_INFO);

    const gp = (await httpRequest(stack.metricsUrls.gateway!)).text;
    assert.equal(metricValue(gp, 'gateway_rejections_total', { reason: 'Unauthorized' }), 1);
    assert.equal(metricValue(gp, 'gateway_rejections_total', { reason: 'BadRequest' }), 1);
    assert.equal(metricValue(gp, 'http_requests_total', { route: '/__version__', status: '200' }), 1);
  });

  test('/metrics is never served on the public ports', async () => {
    const publicLogin = await httpRequest(`${stack.loginUrl}/metrics`);
    assert.equal(publicLogin.status, 404);
    const publicGateway = await httpRequest(`${stack.gatewayUrl}/metrics`);
    assert.equal(publicGateway.status, 401, 'an ordinary unsigned request to the gateway');
    for (const res of [publicLogin, publicGateway]) assert.doesNotMatch(res.text, /http_requests_total/);
    // The metrics listener answers /metrics only.
    assert.equal((await httpRequest(stack.metricsUrls.login!.replace(/\/metrics$/, '/__version__'))).status, 404);
    assert.equal((await httpRequest(stack.metricsUrls.gateway!, { method: 'POST' })).status, 405);
  });
});
