// LOGIN_WORKERS: login's entry point as a process of its own with two cluster
// workers, against a real directory and nodeassign. Both workers serve the one
// port (their ids in the access lines), the primary's /metrics adds them up,
// SIGHUP reaches every worker, SIGTERM lets a request in flight finish, and a
// start that cannot succeed ends the primary. (A worker killed under load:
// tests/fault.test.ts.)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { call, grpcClient } from '../lib/grpc.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { loadOrCreateDevIdp, type DevIdp } from '../lib/idp.js';
import { startDirectory } from '../services/directory/server.js';
import { startNodeAssign } from '../services/nodeassign/server.js';
import { httpRequest } from '../services/login/testkit.js';
import { gatedDirectory } from './support/gated-directory.js';
import { startLoginProcess, trustedIssuersFile, type LoginProcess, type LogLine } from './support/login-process.js';
import { metricValue } from './support/prometheus.js';
import { eventually, newSecret, runEntryPoint, serveTcp, TEST_AUTH } from './support/services.js';

const AUDIENCE = 'http://login.workers.example';
const TOKEN_PATH = '/1.0/sync/1.5';
const TOKEN_ROUTE = '/1.0/:app/:version';

interface Backends {
  directoryAddr: string;
  nodeAssignAddr: string;
  storeUrl: string;
  close(): Promise<void>;
}

/** Directory and nodeassign on one SQLite store in `dir`, with a node for sync. */
async function startBackends(dir: string): Promise<Backends> {
  const storeUrl = `sqlite:${path.join(dir, 'store.db')}`;
  const directory = await startDirectory({ storeUrl, port: 0, auth: TEST_AUTH });
  const nodeAssign = await startNodeAssign({ storeUrl, port: 0, auth: TEST_AUTH });
  const client = grpcClient(NodeAssignClient, `127.0.0.1:${nodeAssign.port}`, TEST_AUTH);
  await call(client, client.addNode, { service: 'sync', url: 'http://node.workers.example', capacity: 100_000 }, { deadlineMs: 5000, retryAfter: 1 });
  client.close();
  return {
    directoryAddr: `127.0.0.1:${directory.port}`,
    nodeAssignAddr: `127.0.0.1:${nodeAssign.port}`,
    storeUrl,
    close: async () => {
      await nodeAssign.close();
      await directory.close();
    },
  };
}

function loginEnv(dir: string, idp: DevIdp, backends: Pick<Backends, 'directoryAddr' | 'nodeAssignAddr'>): Record<string, string> {
  return {
    LOGIN_WORKERS: '2',
    APPLICATIONS: 'sync/1.5',
    AUDIENCES: AUDIENCE,
    TRUSTED_ISSUERS: trustedIssuersFile(dir, idp),
    MASTER_SECRETS: newSecret(),
    INTERNAL_SECRET: TEST_AUTH.internalSecret,
    DIRECTORY_ADDR: backends.directoryAddr,
    NODEASSIGN_ADDR: backends.nodeAssignAddr,
  };
}

/** A token request on a connection of its own, so that the primary hands it to the next worker in turn. */
async function loginAs(login: LoginProcess, idp: DevIdp, email: string, timeoutMs = 10_000) {
  const authorization = `Assertion ${await idp.makeAssertion(email, { audience: AUDIENCE })}`;
  return httpRequest(`${login.url}${TOKEN_PATH}`, { headers: { Authorization: authorization, Connection: 'close' }, timeoutMs });
}

const workerIds = (lines: LogLine[], msg: string): Set<number> => new Set(lines.filter((l) => l.msg === msg && l.worker !== undefined).map((l) => l.worker!));

describe('login with LOGIN_WORKERS=2', () => {
  let dir: string;
  let idp: DevIdp;
  let backends: Backends;
  let login: LoginProcess;
  let allowed: string;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'login-workers-'));
    idp = await loadOrCreateDevIdp(dir);
    backends = await startBackends(dir);
    allowed = path.join(dir, 'allowed.txt');
    writeFileSync(allowed, 'alice@example.com\n@corp.example\n');
    login = await startLoginProcess({ ...loginEnv(dir, idp, backends), LOGIN_METRICS_PORT: '0', ALLOWED_USERS: `@${allowed}` });
  });

  after(async () => {
    if (login) {
      const { code } = await login.stop();
      assert.equal(code, 0, 'the primary stops cleanly');
    }
    await backends?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('one primary says "login listening" once, with the worker count; each worker listens, named by its id', async () => {
    // The primary says it when its workers listen, which can be before their own lines are written.
    await eventually('both workers\' "login worker listening" lines', () => workerIds(login.lines, 'login worker listening').size === 2);
    const primary = login.lines.filter((l) => l.msg === 'login listening');
    assert.equal(primary.length, 1);
    assert.equal(primary[0].workers, 2);
    assert.equal(primary[0].worker, undefined, 'the primary is no worker');
    const workers = login.lines.filter((l) => l.msg === 'login worker listening');
    assert.equal(workers.length, 2);
    assert.equal(new Set(workers.map((l) => l.worker)).size, 2);
    assert.equal(new Set(workers.map((l) => l.pid)).size, 2);
    assert.ok(workers.every((l) => l.port === primary[0].port && l.pid !== login.pid), 'the workers share the primary’s port');
  });

  test('requests on fresh connections are served by both workers; /metrics on the primary counts them all', async () => {
    const requests = 12;
    const ids: string[] = [];
    for (let i = 0; i < requests; i++) {
      const res = await loginAs(login, idp, `user${i}@corp.example`);
      assert.equal(res.status, 200, res.text);
      ids.push(res.header('x-request-id')!);
    }
    const lb = await httpRequest(`${login.url}/__heartbeat__`, { headers: { Connection: 'close' } });
    assert.equal(lb.status, 200, lb.text);
    const served = await Promise.all(ids.map((id) => login.waitFor((l) => l.msg === 'request' && l.requestId === id)));
    assert.equal(new Set(served.map((l) => l.worker)).size, 2, `served by ${served.map((l) => l.worker).join(',')}`);

    const page = (await httpRequest(login.metricsUrl!)).text;
    assert.equal(metricValue(page, 'http_requests_total', { service: 'login', route: TOKEN_ROUTE, status: '200' }), requests);
    assert.equal(metricValue(page, 'http_request_duration_seconds_count', { route: TOKEN_ROUTE }), requests);
    assert.equal(metricValue(page, 'login_node_allocations_total', { application: 'sync' }), requests);
    assert.equal(metricValue(page, 'login_token_requests_in_flight'), 0);
    // One family per name: the workers' samples are added up, not listed side by side.
    assert.equal(page.split('\n').filter((l) => l === '# TYPE http_requests_total counter').length, 1);
    assert.ok(metricValue(page, 'process_resident_memory_bytes') > 0, 'process metrics of the workers');
    assert.equal((await httpRequest(`${login.url}/metrics`)).status, 404, '/metrics is never on the public port');
  });

  test('SIGHUP to the primary reloads ALLOWED_USERS in every worker', async () => {
    assert.equal((await loginAs(login, idp, 'alice@example.com')).status, 200);
    writeFileSync(allowed, '@corp.example\nbob@example.com\n');
    const before = login.lines.length;
    login.signal('SIGHUP');
    await login.waitFor((l) => l.msg === 'ALLOWED_USERS reloaded' && workerIds(login.lines.slice(before), 'ALLOWED_USERS reloaded').size === 2);
    // Four fresh connections: each worker answers at least one.
    for (let i = 0; i < 4; i++) {
      const alice = await loginAs(login, idp, 'alice@example.com');
      assert.equal(alice.status, 403, alice.text);
      assert.equal((await loginAs(login, idp, 'bob@example.com')).status, 200);
    }
    assert.equal(login.lines.filter((l) => l.msg === 'login worker listening').length, 2, 'no worker was ended by the signal');
  });
});

describe('login with LOGIN_WORKERS=2 stopping', () => {
  test('SIGTERM: the port closes, a request in flight is answered, then the primary exits 0', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'login-workers-drain-'));
    const idp = await loadOrCreateDevIdp(dir);
    const backends = await startBackends(dir);
    const gated = await gatedDirectory(backends.storeUrl);
    let login: LoginProcess | undefined;
    try {
      login = await startLoginProcess({ ...loginEnv(dir, idp, { ...backends, directoryAddr: `127.0.0.1:${gated.port}` }), GRPC_DEADLINE_MS: '20000' });
      const inFlight = loginAs(login, idp, 'slow@example.com', 20_000);
      // Awaited below; should a step before fail, that failure is the one reported.
      inFlight.catch(() => undefined);
      await gated.waitForHeld(1);
      login.signal('SIGTERM');
      await login.waitFor((l) => l.msg === 'login stopping');
      await login.waitFor((l) => workerIds(login!.lines, 'login worker stopping').size === 2);
      // Both workers have stopped accepting once a new connection is refused.
      await waitUntilRefused(login.url);
      gated.open();
      const res = await inFlight;
      assert.equal(res.status, 200, res.text);
      assert.equal(res.header('connection'), 'close', 'the answer ends its connection');
      const { code, stderr } = await login.exited;
      assert.equal(code, 0, stderr);
    } finally {
      gated.open();
      await login?.stop();
      await gated.close();
      await backends.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * Polls with new connections until one is refused. A connection the primary
 * accepted as the workers closed is reset, or (node's round-robin hand-off:
 * one handed back by a closing worker when no other is left) held until the
 * primary exits: neither is served, so both count as "not accepting" too.
 */
async function waitUntilRefused(url: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await httpRequest(`${url}/__lbheartbeat__`, { headers: { Connection: 'close' }, timeoutMs: 300 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ECONNREFUSED') return;
      if ((err as NodeJS.ErrnoException).code !== 'ECONNRESET' && !/timed out/.test((err as Error).message)) throw err;
    }
    if (Date.now() > deadline) assert.fail('login still accepts connections 10 s after SIGTERM');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('LOGIN_WORKERS at start', () => {
  const env = { LOGIN_PORT: '0', APPLICATIONS: 'sync/1.5', AUDIENCES: AUDIENCE, MASTER_SECRETS: newSecret(), INTERNAL_SECRET: TEST_AUTH.internalSecret };
  let dir: string;
  let issuers: string;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'login-workers-start-'));
    issuers = trustedIssuersFile(dir, await loadOrCreateDevIdp(dir));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const value of ['0', '65', 'two']) {
    test(`LOGIN_WORKERS=${value}: a configuration error naming the variable, exit 1`, async () => {
      const run = await runEntryPoint('services/login/index.ts', { ...env, TRUSTED_ISSUERS: issuers, LOGIN_WORKERS: value }, /listening/);
      assert.equal(run.code, 1, run.stdout);
      assert.match(run.stderr, /^configuration error: LOGIN_WORKERS: must be (between 1 and 64|a whole number)/);
    });
  }

  test('workers that cannot listen (the port is taken): the primary exits 1 and says why', async () => {
    const taken = await serveTcp((client) => client.destroy());
    try {
      const run = await runEntryPoint('services/login/index.ts', { ...env, TRUSTED_ISSUERS: issuers, LOGIN_WORKERS: '2', LOGIN_PORT: String(taken.port) }, /login listening/);
      assert.equal(run.code, 1, run.stdout);
      assert.match(run.stderr, /EADDRINUSE/);
      assert.match(run.stderr, /login failed to start: login worker \d+ exited \(1\) before it was ready/);
    } finally {
      await taken.close();
    }
  });
});
