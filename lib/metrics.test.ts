import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidGeneration, ServiceUnavailable } from './errors.js';
import { GatewayMetrics, knownMethod, LoginMetrics, outcomeOf, statusClass, statusStringOf } from './metrics.js';
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
