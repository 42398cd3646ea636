import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidGeneration, ServiceUnavailable } from './errors.js';
import { aggregatedPage, CachedCounts, GatewayMetrics, knownMethod, LoginMetrics, outcomeOf, statusClass, statusStringOf, type RecordCount } from './metrics.js';
import { metricValue } from '../tests/support/prometheus.js';

test('statusStringOf: the error’s own string, else ok below 400 and error from 400', () => {
  assert.equal(statusStringOf(401, new InvalidGeneration('older')), 'invalid-generation');
  assert.equal(statusStringOf(503, new ServiceUnavailable('down')), 'error');
  assert.equal(statusStringOf(200), 'ok');
  assert.equal(statusStringOf(304), 'ok');
  assert.equal(statusStringOf(404), 'error');
  assert.equal(statusStringOf(500, new Error('boom')), 'error');
});

test('outcomeOf: ok, the protocol error’s class, or InternalError for anything else', () => {
  assert.equal(outcomeOf(undefined), 'ok');
  assert.equal(outcomeOf(new ServiceUnavailable('x')), 'ServiceUnavailable');
  assert.equal(outcomeOf(new TypeError('x')), 'InternalError');
});

test('knownMethod and statusClass keep labels to a fixed set', () => {
  assert.equal(knownMethod('GET'), 'GET');
  assert.equal(knownMethod('BREW'), 'other');
  assert.equal(statusClass(204), '2xx');
  assert.equal(statusClass(502), '5xx');
});

test('two instances in one process keep their own counts; the page carries the service label and process metrics', async () => {
  const a = new LoginMetrics();
  const b = new LoginMetrics();
  a.observeRequest({ route: '/1.0/:app/:version', method: 'GET', status: 200, statusString: 'ok', seconds: 0.01 });
  a.allocations.inc({ application: 'sync' });
  const pageA = await a.page();
  const pageB = await b.page();
  assert.match(pageA.contentType, /^text\/plain/);
  const labels = { route: '/1.0/:app/:version', method: 'GET', status: '200', status_string: 'ok', service: 'login' };
  assert.equal(metricValue(pageA.body, 'http_requests_total', labels), 1);
  assert.equal(metricValue(pageA.body, 'http_request_duration_seconds_count', { route: '/1.0/:app/:version', service: 'login' }), 1);
  assert.equal(metricValue(pageA.body, 'login_node_allocations_total', { application: 'sync', service: 'login' }), 1);
  assert.equal(metricValue(pageB.body, 'http_requests_total'), 0, 'b counted nothing');
  assert.match(pageB.body, /^process_cpu_user_seconds_total /m);
  const gw = await new GatewayMetrics().page();
  assert.match(gw.body, /# TYPE gateway_rejections_total counter/);
});

test('aggregatedPage: the snapshots of several instances on one page, counters and histogram buckets summed, gauges summed, start time left out', async () => {
  const a = new LoginMetrics();
  const b = new LoginMetrics();
  const request = { route: '/1.0/:app/:version', method: 'GET', status: 200, statusString: 'ok' };
  a.observeRequest({ ...request, seconds: 0.002 });
  a.observeRequest({ ...request, seconds: 0.2 });
  b.observeRequest({ ...request, seconds: 0.002 });
  b.tokenRequestsInFlight.inc(3);
  const page = await aggregatedPage([...(await a.snapshots()), ...(await b.snapshots())]);
  assert.match(page.contentType, /^text\/plain/);
  assert.equal(metricValue(page.body, 'http_requests_total', { route: request.route, method: 'GET', status: '200', status_string: 'ok', service: 'login' }), 3);
  assert.equal(metricValue(page.body, 'http_request_duration_seconds_count', { route: request.route }), 3);
  assert.equal(metricValue(page.body, 'http_request_duration_seconds_bucket', { route: request.route, le: '0.0025' }), 2);
  assert.equal(metricValue(page.body, 'http_request_duration_seconds_bucket', { route: request.route, le: '+Inf' }), 3);
  assert.equal(metricValue(page.body, 'login_token_requests_in_flight'), 3);
  assert.equal(page.body.split('\n').filter((l) => l === '# TYPE http_requests_total counter').length, 1, 'one family, not one per instance');
  assert.match(page.body, /^process_cpu_user_seconds_total /m);
  assert.doesNotMatch(page.body, /process_start_time_seconds/, 'a sum of start times means nothing');
  assert.equal((await aggregatedPage([])).body.trim(), '', 'no workers, an empty page');
});

test('timeCall records the outcome of a backend call and passes its result or error through', async () => {
  const m = new LoginMetrics();
  assert.equal(await m.timeCall('directory.Login', async () => 42), 42);
  await assert.rejects(
    m.timeCall('directory.Login', async () => {
      throw new ServiceUnavailable('down');
    }),
    ServiceUnavailable,
  );
  const body = (await m.page()).body;
  const count = (outcome: string) => metricValue(body, 'login_backend_call_duration_seconds_count', { method: 'directory.Login', outcome });
  assert.equal(count('ok'), 1);
  assert.equal(count('ServiceUnavailable'), 1);
});

/** A CachedCounts on a hand-driven clock and a count function whose calls are recorded. */
function cachedCounts(maxAgeMs: number) {
  const clock = { now: 1_000_000 };
  const calls: Array<{ resolve(c: RecordCount[]): void; reject(e: Error): void }> = [];
  const errors: unknown[] = [];
  const counts = new CachedCounts(
    () => new Promise<RecordCount[]>((resolve, reject) => calls.push({ resolve, reject })),
    maxAgeMs,
    (err) => errors.push(err),
    () => clock.now,
  );
  return { counts, clock, calls, errors };
}
const live = (count: number): RecordCount[] => [{ application: 'sync', state: 'live', count }];

test('CachedCounts: counts once, reuses the result within the max age, counts again after it', async () => {
  const { counts, clock, calls } = cachedCounts(15_000);
  const first = counts.get();
  calls[0].resolve(live(1));
  assert.deepEqual(await first, { at: 1_000_000, counts: live(1) });
  clock.now += 14_999;
  assert.deepEqual((await counts.get())?.counts, live(1));
  assert.equal(calls.length, 1);
  clock.now += 1;
  const second = counts.get();
  assert.equal(calls.length, 2);
  calls[1].resolve(live(2));
  assert.deepEqual(await second, { at: 1_015_000, counts: live(2) });
});

test('CachedCounts: scrapes that come while a count runs share it', async () => {
  const { counts, calls } = cachedCounts(0);
  const both = Promise.all([counts.get(), counts.get()]);
  assert.equal(calls.length, 1);
  calls[0].resolve(live(3));
  assert.deepEqual((await both).map((r) => r?.counts), [live(3), live(3)]);
});

test('CachedCounts: a failed count is reported and keeps the last values (none before the first success)', async () => {
  const { counts, clock, calls, errors } = cachedCounts(10);
  const none = counts.get();
  calls[0].reject(new Error('store down'));
  assert.equal(await none, undefined);
  const ok = counts.get();
  calls[1].resolve(live(4));
  await ok;
  clock.now += 10;
  const failed = counts.get();
  calls[2].reject(new Error('store down again'));
  assert.deepEqual(await failed, { at: 1_000_000, counts: live(4) });
  assert.deepEqual(errors.map((e) => (e as Error).message), ['store down', 'store down again']);
  // The failure is not cached: the next scrape tries again.
  void counts.get();
  assert.equal(calls.length, 4);
});
