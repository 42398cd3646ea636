// The entry point as a process: starts from the environment, stops on SIGTERM, refuses bad config.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { refusesBadInternalSecret, runEntryPoint, tempStoreUrl, TEST_AUTH } from '../../tests/support/services.js';

const entry = fileURLToPath(new URL('./index.ts', import.meta.url));

test('nodeassign entry point: listens, logs its port, exits 0 on SIGTERM', async () => {
  const temp = tempStoreUrl('nodeassign-entry-');
  try {
    const run = await runEntryPoint(entry, { STORE_URL: temp.storeUrl, NODEASSIGN_PORT: '0', INTERNAL_SECRET: TEST_AUTH.internalSecret }, /nodeassign listening/);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /"port":\d+/);
    assert.match(run.stdout, /nodeassign stopping/);
  } finally {
    temp.cleanup();
  }
});

test('nodeassign entry point: NODEASSIGN_METRICS_PORT starts the /metrics listener, on loopback', async () => {
  const run = await runEntryPoint(
    entry,
    { STORE_URL: 'sqlite::memory:', NODEASSIGN_PORT: '0', NODEASSIGN_METRICS_PORT: '0', INTERNAL_SECRET: TEST_AUTH.internalSecret },
    /nodeassign listening/,
  );
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /"host":"127\.0\.0\.1".*"msg":"metrics listening"/);
});

test('nodeassign entry point: invalid configuration prints the variable and exits 1', async () => {
  const run = await runEntryPoint(entry, { RELEASE_RATE: '2', NODEASSIGN_PORT: '0', INTERNAL_SECRET: TEST_AUTH.internalSecret }, /listening/);
  assert.equal(run.code, 1);
  assert.match(run.stderr, /^configuration error: RELEASE_RATE: must be a number between/);
});

test('nodeassign entry point: refuses to start without INTERNAL_SECRET, or with a short one', async () => {
  await refusesBadInternalSecret(entry, { STORE_URL: 'sqlite::memory:', NODEASSIGN_PORT: '0' });
});
