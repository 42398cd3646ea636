// The entry point as a process: starts from the environment, stops on SIGTERM, refuses bad config.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { newSecret, runEntryPoint } from '../../tests/support/services.js';

const entry = fileURLToPath(new URL('./index.ts', import.meta.url));
const env = {
  NODE_URL: 'https://node.example',
  UPSTREAM_URL: 'http://127.0.0.1:9',
  MASTER_SECRETS: newSecret(),
  GATEWAY_PORT: '0',
};

test('gateway entry point: listens, logs its port, exits 0 on SIGTERM', async () => {
  const run = await runEntryPoint(entry, env, /node-gateway listening/);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /"port":\d+/);
  assert.match(run.stdout, /node-gateway stopping/);
  assert.ok(!run.stdout.includes(env.MASTER_SECRETS), 'secrets never logged');
});

test('gateway entry point: invalid configuration names the variable and exits 1', async () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ NODE_URL: '' }, /^configuration error: NODE_URL: is required/],
    [{ HAWK_SKEW: 'soon' }, /^configuration error: HAWK_SKEW: must be a whole number/],
    // A share larger than the whole replay cache would let one token fill it.
    [{ NONCE_CACHE_SIZE: '500', NONCE_PER_TOKEN: '501' }, /^configuration error: NONCE_PER_TOKEN: must be between 1 and 500/],
  ];
  for (const [override, message] of cases) {
    const run = await runEntryPoint(entry, { ...env, ...override }, /listening/);
    assert.equal(run.code, 1, JSON.stringify(override));
    assert.match(run.stderr, message);
  }
});
