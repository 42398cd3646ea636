// The middleware every login endpoint shares, in a Koa app of its own over real HTTP: the access
// line's fields, the request metrics' route label and duration, and load shedding's refusal.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import Koa from 'koa';
import { BadRequest } from '../../lib/errors.js';
import { LoginMetrics } from '../../lib/metrics.js';
import { capturedLog } from '../../tests/support/log.js';
import { metricValue } from '../../tests/support/prometheus.js';
import { eventually } from '../../tests/support/services.js';
import { errorHandler } from './error-handler.js';
import { requestContext, shedLoad } from './shared.js';
import { httpRequest } from './testkit.js';

const WAIT_MS = 60;
const { log, lines } = capturedLog('info');
const metrics = new LoginMetrics();
let server: Server;
let base: string;

before(async () => {
  const router = new Router();
  router.get('/users/:uid', async (ctx) => {
    ctx.state.user = { uid: Number(ctx.params.uid) };
    await new Promise((r) => setTimeout(r, WAIT_MS));
    ctx.body = { ok: true };
  });
  router.get('/refused', () => {
    throw new BadRequest(`bad ${'x'.repeat(300)}`);
  });
  // At most 0 in flight: every request is refused.
  const overload = { backoffSeconds: 45, backoffInFlight: 0, maxInFlight: 0, backoffLoopDelayMs: 0, retryAfter: 9 };
  router.get('/shed', shedLoad({ config: { overload } as never, metrics, loopDelay: { ms: () => 0 } as never }), (ctx) => {
    ctx.body = {};
  });
  const app = new Koa();
  app.use(requestContext(log, metrics));
  app.use(errorHandler({ log, challenges: [] }));
  app.use(router.routes());
  server = createServer(app.callback());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => new Promise<void>((r) => server.close(() => r())));

/** The access line of the request with this id, once written (at the end of its event-loop turn). */
async function accessLine(requestId: string): Promise<Record<string, any>> {
  const find = () => lines.find((l) => l.msg === 'request' && l.requestId === requestId);
  await eventually(`the access line of ${requestId}`, () => find() !== undefined, { timeoutMs: 500, pollMs: 10 });
  return find()!;
}

test('the access line: method, path, status, status string, whole milliseconds and the uid; no reason when served', async () => {
  const sent = performance.now();
  const res = await httpRequest(`${base}/users/42`, { headers: { 'X-Request-Id': 'served-1' } });
  const elapsed = performance.now() - sent;
  assert.equal(res.status, 200);
  const line = await accessLine('served-1');
  const { time: _, pid: __, hostname: ___, ...fields } = line;
  assert.deepEqual({ ...fields, ms: undefined }, { level: 30, requestId: 'served-1', method: 'GET', path: '/users/42', status: 200, statusString: 'ok', ms: undefined, uid: 42, msg: 'request' });
  // Within what the client saw, rounded.
  assert.ok(Number.isInteger(line.ms) && line.ms >= WAIT_MS - 5 && line.ms <= Math.round(elapsed) + 1, `ms ${line.ms}, ${elapsed} ms at the client`);
});

test('the access line: no uid field for uid 0 or no user; a long path and a refusal\'s reason cut to 200 characters', async () => {
  await httpRequest(`${base}/users/0`, { headers: { 'X-Request-Id': 'uid-0' } });
  assert.ok(!('uid' in (await accessLine('uid-0'))));
  const refused = await httpRequest(`${base}/refused`, { headers: { 'X-Request-Id': 'refused-1' } });
  assert.equal(refused.status, 400);
  const line = await accessLine('refused-1');
  assert.equal(line.reason, `bad ${'x'.repeat(196)}`);
  assert.ok(!('uid' in line));
  const long = `/${'p'.repeat(300)}`;
  assert.equal((await httpRequest(`${base}${long}`, { headers: { 'X-Request-Id': 'long-1' } })).status, 404);
  assert.equal((await accessLine('long-1')).path, long.slice(0, 200));
});

test('the request metrics: the route\'s template as its label, "unmatched" for no route, the time in seconds', async () => {
  const page = await metrics.registry.metrics();
  assert.equal(metricValue(page, 'http_requests_total', { route: '/users/:uid', method: 'GET', status: '200', status_string: 'ok' }), 2);
  assert.equal(metricValue(page, 'http_requests_total', { route: 'unmatched', status: '404' }), 1);
  assert.ok(!page.includes('pppp'), 'no path a client typed');
  const seconds = metricValue(page, 'http_request_duration_seconds_sum', { route: '/users/:uid' });
  assert.ok(seconds >= (2 * (WAIT_MS - 5)) / 1000 && seconds < 10, `${seconds} s for two requests of ${WAIT_MS} ms`);
});

test('load shedding beyond the cap: 503 with Retry-After and X-Backoff, its reason logged, counted, nothing left in flight', async () => {
  const res = await httpRequest(`${base}/shed`, { headers: { 'X-Request-Id': 'shed-1' } });
  assert.equal(res.status, 503);
  assert.equal(res.header('retry-after'), '9');
  assert.equal(res.header('x-backoff'), '45');
  assert.ok(lines.some((l) => l.requestId === 'shed-1' && l.err === 'too many requests in flight'), 'the reason on the error line');
  const page = await metrics.registry.metrics();
  assert.equal(metricValue(page, 'login_overload_total', { action: 'reject' }), 1);
  assert.equal(metricValue(page, 'login_token_requests_in_flight'), 0);
});
