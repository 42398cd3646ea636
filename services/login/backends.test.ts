// Login's directory client over real gRPC: concurrent logins travel together
// in LoginBatch calls, each settles with its own result or error class, and a
// directory that is gone fails every waiting login with a 503.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type * as grpc from '@grpc/grpc-js';
import { DirectoryService, type LoginRequest } from '../../lib/gen/directory.js';
import { InvalidGeneration, NewUsersDisabled, ServiceUnavailable } from '../../lib/errors.js';
import { startServer, type RunningServer } from '../../lib/grpc.js';
import { logger } from '../../lib/log.js';
import { LoginMetrics } from '../../lib/metrics.js';
import { directoryService } from '../directory/service.js';
import { SqliteUserStore } from '../directory/store-sqlite.js';
import { tempStoreUrl, TEST_AUTH } from '../../tests/support/services.js';
import { connectBackends, type Backends } from './backends.js';

const temp = tempStoreUrl('login-backends-');
let store: SqliteUserStore;
let server: RunningServer;
let backends: Backends;
/** Calls the directory received, by method. */
const calls: Record<string, number> = {};
const RETRY_AFTER = 7;

before(async () => {
  store = SqliteUserStore.open(temp.storeUrl.slice('sqlite:'.length));
  const impl = directoryService(store, logger('directory'), { clientStateChangesPerDay: 10 });
  // The real handlers, counted.
  const counted = Object.fromEntries(
    Object.entries(impl).map(([name, handler]) => [
      name,
      (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        calls[name] = (calls[name] ?? 0) + 1;
        (handler as grpc.handleUnaryCall<unknown, unknown>)(call, cb);
      },
    ]),
  );
  server = await startServer([{ definition: DirectoryService, implementation: counted, name: 'tokenserver.directory.v1.Directory' }], '127.0.0.1', 0, TEST_AUTH);
  backends = connectBackends(
    { directoryAddr: `127.0.0.1:${server.port}`, nodeAssignAddr: '127.0.0.1:1', auth: TEST_AUTH, grpcDeadlineMs: 2000, retryAfter: RETRY_AFTER },
    new LoginMetrics(),
  );
});

after(async () => {
  backends.close();
  await server.close();
  await store.close();
  temp.cleanup();
});

const req = (email: string, o: Partial<LoginRequest> = {}): LoginRequest => ({ service: 'sync', email, clientState: '', allowNewUsers: true, ...o });

test('concurrent logins share LoginBatch calls; each gets its own user or error class', async () => {
  const first = await backends.login(req('batched@example.com', { generation: 5 }), 'rid-first');
  for (const k of Object.keys(calls)) delete calls[k];
  const settled = await Promise.allSettled([
    ...Array.from({ length: 30 }, (_, i) => backends.login(req(`batched${i}@example.com`), `rid-${i}`)),
    backends.login(req('batched@example.com', { generation: 5 }), 'rid-same'),
    backends.login(req('batched@example.com', { generation: 2 }), 'rid-lower'),
    backends.login(req('nobody@example.com', { allowNewUsers: false }), 'rid-closed'),
  ]);
  assert.equal(calls.login ?? 0, 0, 'no unary Login');
  assert.ok(calls.loginBatch >= 1 && calls.loginBatch < 5, `33 logins in ${calls.loginBatch} LoginBatch calls`);
  const users = settled.slice(0, 30).map((r) => (r.status === 'fulfilled' ? r.value : assert.fail(String(r.reason))));
  assert.deepEqual(
    users.map((u) => u.email),
    Array.from({ length: 30 }, (_, i) => `batched${i}@example.com`),
  );
  assert.equal(new Set(users.map((u) => u.uid)).size, 30, 'one new uid each');
  assert.deepEqual(settled[30], { status: 'fulfilled', value: first });
  assert.ok(settled[31].status === 'rejected' && settled[31].reason instanceof InvalidGeneration, String(settled[31]));
  assert.ok(settled[32].status === 'rejected' && settled[32].reason instanceof NewUsersDisabled, String(settled[32]));
});

test('the directory gone: every waiting login fails with 503 and the configured Retry-After', async () => {
  server.server.forceShutdown();
  const settled = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => backends.login(req(`gone${i}@example.com`), `rid-gone-${i}`)));
  for (const r of settled) {
    assert.ok(r.status === 'rejected' && r.reason instanceof ServiceUnavailable, String(r.status === 'rejected' ? r.reason : 'fulfilled'));
    assert.equal(r.reason.retryAfter, RETRY_AFTER);
  }
});
