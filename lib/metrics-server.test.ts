// The metrics listener over real HTTP, and its configuration.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from './errors.js';
import { metricsListener } from './config.js';
import { logger } from './log.js';
import { GatewayMetrics } from './metrics.js';
import { serveMetrics } from './metrics-server.js';

test('metricsListener: off unless its port variable is set; loopback unless METRICS_HOST says otherwise', () => {
  assert.equal(metricsListener({}, 'GATEWAY_METRICS_PORT'), undefined);
  assert.equal(metricsListener({ GATEWAY_METRICS_PORT: ' ' }, 'GATEWAY_METRICS_PORT'), undefined);
  assert.deepEqual(metricsListener({ GATEWAY_METRICS_PORT: '9102' }, 'GATEWAY_METRICS_PORT'), { host: '127.0.0.1', port: 9102 });
  assert.deepEqual(metricsListener({ LOGIN_METRICS_PORT: '0', METRICS_HOST: '0.0.0.0' }, 'LOGIN_METRICS_PORT'), { host: '0.0.0.0', port: 0 });
  assert.throws(() => metricsListener({ LOGIN_METRICS_PORT: '70000' }, 'LOGIN_METRICS_PORT'), (e: unknown) => e instanceof ConfigError && e.variable === 'LOGIN_METRICS_PORT');
});

test('serveMetrics: GET and HEAD /metrics, 404 elsewhere, 405 for other methods', async () => {
  const metrics = new GatewayMetrics();
  metrics.rejections.inc({ reason: 'Test' });
  const served = await serveMetrics(metrics, { host: '127.0.0.1', port: 0 }, logger('test'));
  try {
    const base = `http://127.0.0.1:${served.port}`;
    const page = await fetch(`${base}/metrics?x=1`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    assert.match(await page.text(), /^gateway_rejections_total\{reason="Test",service="node-gateway"\} 1$/m);
    const head = await fetch(`${base}/metrics`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), '');
    assert.equal((await fetch(`${base}/`)).status, 404);
    assert.equal((await fetch(`${base}/metrics/x`)).status, 404);
    const post = await fetch(`${base}/metrics`, { method: 'POST', body: 'x' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET, HEAD');
  } finally {
    await served.close();
  }
});

test('serveMetrics: a page that cannot be built is a bare 500', async () => {
  const broken = { page: () => Promise.reject(new Error('registry exploded at /secret/path')) } as unknown as GatewayMetrics;
  const served = await serveMetrics(broken, { host: '127.0.0.1', port: 0 }, logger('test'));
  try {
    const res = await fetch(`http://127.0.0.1:${served.port}/metrics`);
    assert.equal(res.status, 500);
    assert.doesNotMatch(await res.text(), /exploded|secret/);
  } finally {
    await served.close();
  }
});
