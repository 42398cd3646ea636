// The directory's /metrics (DIRECTORY_METRICS_PORT) over real HTTP, after real
// gRPC calls: retire and purge counters, and records by state as a gauge.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { DirectoryClient, type LoginRequest } from '../lib/gen/directory.js';
import { call, grpcClient } from '../lib/grpc.js';
import { startDirectory, type RunningDirectory } from '../services/directory/server.js';
import { metricValue } from './support/prometheus.js';
import { tempStoreUrl, TEST_AUTH } from './support/services.js';

const temp = tempStoreUrl('directory-metrics-');
let server: RunningDirectory;
let client: DirectoryClient;
const opts = { deadlineMs: 10_000, retryAfter: 10 };

before(async () => {
  // Max age 0: every scrape counts afresh, so each one shows the calls before it.
  server = await startDirectory({ storeUrl: temp.storeUrl, auth: TEST_AUTH, metrics: { host: '127.0.0.1', port: 0 }, recordCountsMaxAgeMs: 0 });
  client = grpcClient(DirectoryClient, `127.0.0.1:${server.port}`, TEST_AUTH);
});
after(async () => {
  client.close();
  await server.close();
  temp.cleanup();
});

async function scrape(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

const login = (service: string, email: string, clientState: string, generation = 0) =>
  call(client, client.login, { service, email, clientState, generation, allowNewUsers: true } as LoginRequest, opts).then((r) => r.user!);

test('/metrics is on its own port, not the gRPC one, and only when DIRECTORY_METRICS_PORT is set', async () => {
  assert.ok(server.metricsPort && server.metricsPort !== server.port);
  const plain = await startDirectory({ storeUrl: 'sqlite::memory:', auth: TEST_AUTH });
  try {
    assert.equal(plain.metricsPort, undefined);
  } finally {
    await plain.close();
  }
});

test('records by state, retire and purge counters follow the RPCs that change them', async () => {
  const records = (page: string, application: string, state: string) => metricValue(page, 'directory_user_records', { application, state, service: 'directory' });
  const empty = await scrape();
  assert.equal(records(empty, 'sync', 'live'), 0);
  assert.match(empty, /^# TYPE directory_user_records gauge$/m);

  // Three live users in sync, one in notes; a client-state change leaves a replaced record.
  const a1 = await login('sync', 'a@example.com', 'aa', 1);
  await login('sync', 'a@example.com', 'bb', 2);
  await login('sync', 'b@example.com', '');
  await login('sync', 'c@example.com', '');
  await login('notes', 'c@example.com', '');
  let page = await scrape();
  assert.equal(records(page, 'sync', 'live'), 3);
  assert.equal(records(page, 'sync', 'replaced'), 1);
  assert.equal(records(page, 'notes', 'live'), 1);
  assert.equal(records(page, 'notes', 'replaced'), 0);
  assert.ok(metricValue(page, 'directory_user_records_counted_timestamp_seconds') > 0);

  // Retiring c everywhere: one retired record per application, each now a replaced one.
  const retired = await call(client, client.retireUser, { email: 'c@example.com', service: '' }, opts);
  assert.equal(retired.retired.length, 2);
  page = await scrape();
  assert.equal(metricValue(page, 'directory_retired_users_total', { application: 'sync' }), 1);
  assert.equal(metricValue(page, 'directory_retired_users_total', { application: 'notes' }), 1);
  assert.equal(records(page, 'sync', 'live'), 2);
  assert.equal(records(page, 'sync', 'replaced'), 2);
  assert.equal(records(page, 'notes', 'replaced'), 1);

  // Purge of a's old uid: a claim refused as too recent, one that holds, the delete; then the trim.
  const claim = { service: 'sync', email: 'a@example.com', uid: a1.uid, claimant: 'purge-1', leaseMs: 60_000 };
  assert.equal((await call(client, client.claimReplaced, { ...claim, replacedBefore: 1 }, opts)).claimed, false);
  assert.equal((await call(client, client.claimReplaced, { ...claim, replacedBefore: Date.now() + 1000 }, opts)).claimed, true);
  const deleted = await call(client, client.deleteReplaced, { service: 'sync', email: 'a@example.com', uid: a1.uid, claimant: 'purge-1' }, opts);
  assert.equal(deleted.deleted, true);
  // Deleting again finds nothing: not counted twice.
  await call(client, client.deleteReplaced, { service: 'sync', email: 'a@example.com', uid: a1.uid, claimant: 'purge-1' }, opts);
  assert.equal((await call(client, client.trimClientStates, { service: 'sync', email: 'a@example.com', max: 0 }, opts)).removed, 1);

  page = await scrape();
  assert.equal(metricValue(page, 'directory_purge_claims_total', { application: 'sync', outcome: 'too-recent' }), 1);
  assert.equal(metricValue(page, 'directory_purge_claims_total', { application: 'sync', outcome: 'ok' }), 1);
  assert.equal(metricValue(page, 'directory_purged_records_total', { application: 'sync' }), 1);
  assert.equal(metricValue(page, 'directory_trimmed_client_states_total', { application: 'sync' }), 1);
  assert.equal(records(page, 'sync', 'replaced'), 1);
  assert.equal(records(page, 'sync', 'live'), 2);
});
