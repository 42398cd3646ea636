// The entry point as a process: starts from the environment, stops on SIGTERM, refuses bad config.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { refusesBadInternalSecret, runEntryPoint, tempStoreUrl, TEST_AUTH } from '../../tests/support/services.js';

const entry = fileURLToPath(new URL('./index.ts', import.meta.url));

test('directory entry point: listens, logs its port, exits 0 on SIGTERM', async () => {
  const temp = tempStoreUrl('directory-entry-');
  try {
    const run = await runEntryPoint(entry, { STORE_URL: temp.storeUrl, DIRECTORY_PORT: '0', INTERNAL_SECRET: TEST_AUTH.internalSecret }, /directory listening/);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /"port":\d+/);
    assert.match(run.stdout, /directory stopping/);
  } finally {
    temp.cleanup();
  }
});

test('directory entry point: DIRECTORY_METRICS_PORT starts the /metrics listener, on loopback', async () => {
  const run = await runEntryPoint(
    entry,
    { STORE_URL: 'sqlite::memory:', DIRECTORY_PORT: '0', DIRECTORY_METRICS_PORT: '0', INTERNAL_SECRET: TEST_AUTH.internalSecret },
    /directory listening/,
  );
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /"host":"127\.0\.0\.1".*"msg":"metrics listening"/);
});

test('directory entry point: invalid configuration prints the variable and exits 1', async () => {
  const run = await runEntryPoint(entry, { STORE_URL: 'postgres://nope', DIRECTORY_PORT: '0', INTERNAL_SECRET: TEST_AUTH.internalSecret }, /listening/);
  assert.equal(run.code, 1);
  assert.match(run.stderr, /^configuration error: STORE_URL: must start with mongodb:\/\/ or sqlite:/);
});

test('directory entry point: refuses to start without INTERNAL_SECRET, or with a short one', async () => {
  await refusesBadInternalSecret(entry, { STORE_URL: 'sqlite::memory:', DIRECTORY_PORT: '0' });
});
