// Losing the database: login, directory and nodeassign on a private instance
// of the MongoDB-compatible server. While it is down, login answers 503 with
// Retry-After within seconds; once it is back on the same port, logins succeed
// again without restarting any service.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { loginConfig } from '../lib/config.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { call, grpcClient } from '../lib/grpc.js';
import { newSecret, TEST_AUTH } from './support/services.js';
import { bundle, generateKey, signAssertion, signCertificate, type KeyPair } from '../lib/idp.js';
import { startDirectory } from '../services/directory/server.js';
import { startLogin } from '../services/login/server.js';
import { httpRequest } from '../services/login/testkit.js';
import { startNodeAssign } from '../services/nodeassign/server.js';

const run = promisify(execFile);
const SCRIPT = path.resolve(import.meta.dirname, '../scripts/compat-mongo.sh');
const AUDIENCE = 'https://token.outage.example';
const ISSUER = 'outage.idp.example';
const NODE = 'https://sync-1.outage.example';
const RETRY_AFTER = '7';

async function compatInstalled(): Promise<boolean> {
  try {
    await run('bash', [SCRIPT, 'installed']);
    return true;
  } catch {
    return false;
  }
}

/** Starts the private server; returns its port. */
async function startDatabase(opts: { state: string; data: string; port?: number }): Promise<number> {
  const args = [SCRIPT, 'start', '--state', opts.state, '--data', opts.data, '--port', String(opts.port ?? 0)];
  const { stdout } = await run('bash', args);
  const m = /^MONGODB_URL=mongodb:\/\/127\.0\.0\.1:(\d+)\/$/m.exec(stdout);
  assert.ok(m, `unexpected start output: ${stdout}`);
  return Number(m[1]);
}

async function stopDatabase(state: string): Promise<void> {
  await run('bash', [SCRIPT, 'stop', '--state', state]);
}

test('MongoDB outage: 503 with Retry-After while the database is down, logins again once it is back', async (t) => {
  if (!(await compatInstalled())) {
    t.skip('the MongoDB-compatible server is not installed (bash scripts/compat-mongo.sh install)');
    return;
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'mongo-outage-'));
  const state = path.join(dir, 'state');
  const data = path.join(dir, 'data');
  const cleanups: Array<() => Promise<void>> = [];
  try {
    const port = await startDatabase({ state, data });
    cleanups.push(() => stopDatabase(state));
    const storeUrl = `mongodb://127.0.0.1:${port}/outage`;

    const directory = await startDirectory({ storeUrl, auth: TEST_AUTH });
    cleanups.push(directory.close);
    const nodeAssign = await startNodeAssign({ storeUrl, auth: TEST_AUTH });
    cleanups.push(nodeAssign.close);
    const admin = grpcClient(NodeAssignClient, `127.0.0.1:${nodeAssign.port}`, TEST_AUTH);
    try {
      await call(admin, admin.addNode, { service: 'sync', url: NODE, capacity: 100 }, { deadlineMs: 5000, retryAfter: 1 });
    } finally {
      admin.close();
    }

    const [issuerKey, userKey] = await Promise.all([generateKey('ES256'), generateKey('ES256')]);
    const login = await startLogin(
      loginConfig(
        {
          APPLICATIONS: 'sync/1.5',
          AUDIENCES: AUDIENCE,
          MASTER_SECRETS: newSecret(),
          INTERNAL_SECRET: TEST_AUTH.internalSecret,
          DIRECTORY_ADDR: `127.0.0.1:${directory.port}`,
          NODEASSIGN_ADDR: `127.0.0.1:${nodeAssign.port}`,
          LOGIN_PORT: '0',
          // Longer than the store's 2 s server selection, so the store's own
          // "database unavailable" is what reaches login, not a gRPC deadline.
          GRPC_DEADLINE_MS: '4000',
          RETRY_AFTER,
        },
        { trustedIssuers: new Map([[ISSUER, { keys: [issuerKey.publicJwk], domains: ['example.com'] }]]) },
      ),
    );
    cleanups.push(login.close);

    const tokenFor = async (email: string, user: KeyPair = userKey) => {
      const cert = await signCertificate(issuerKey, { issuer: ISSUER, email, publicKey: user.publicJwk });
      const assertion = await signAssertion(user, { audience: AUDIENCE });
      return httpRequest(`${login.url}/1.0/sync/1.5`, { headers: { Authorization: `Assertion ${bundle(cert, assertion)}` } });
    };

    const first = await tokenFor('alice@example.com');
    assert.equal(first.status, 200, first.text);
    const uid = first.json.uid as number;

    await stopDatabase(state);
    for (const email of ['alice@example.com', 'bob@example.com']) {
      const started = Date.now();
      const res = await tokenFor(email);
      const elapsed = Date.now() - started;
      assert.equal(res.status, 503, `${email}: ${res.status} ${res.text}`);
      assert.equal(res.header('retry-after'), RETRY_AFTER);
      assert.equal(res.json.status, 'error');
      assert.doesNotMatch(res.text, /mongo|127\.0\.0\.1|ECONNREFUSED/i, 'a 5xx body says nothing about internals');
      // Bounded by the store's fail-fast timeouts, not the driver's 30 s defaults.
      assert.ok(elapsed < 8000, `${email}: the 503 took ${elapsed} ms`);
      t.diagnostic(`${email}: 503 after ${elapsed} ms`);
    }

    await startDatabase({ state, data, port });
    const restarted = Date.now();
    // The services were never restarted: their clients reconnect by themselves.
    const deadline = Date.now() + 20_000;
    let again = await tokenFor('alice@example.com');
    while (again.status !== 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      again = await tokenFor('alice@example.com');
    }
    assert.equal(again.status, 200, again.text);
    t.diagnostic(`first 200 ${Date.now() - restarted} ms after the database restarted`);
    assert.equal(again.json.uid, uid, 'the data survived the outage');
    const bob = await tokenFor('bob@example.com');
    assert.equal(bob.status, 200, bob.text);
    assert.notEqual(bob.json.uid, uid);
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
});
