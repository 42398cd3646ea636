// Faults under load: a backend stopped while logins keep coming, then started
// again on the same port; one of login's workers killed (LOGIN_WORKERS); the
// application behind the gateway refusing or not answering. Every request must complete (no hang), with 200 or the
// documented 503 + Retry-After (login) or 502/504 (gateway), and the system
// must recover by itself. (The database-down case: tests/mongo-outage.test.ts.)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gatewayConfig, loginConfig } from '../lib/config.js';
import { call, grpcClient } from '../lib/grpc.js';
import { newSecret, TEST_AUTH } from './support/services.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { hawkHeader } from '../lib/hawk.js';
import { loadOrCreateDevIdp, type DevIdp } from '../lib/idp.js';
import { makeToken, newSalt, nodeSecrets } from '../lib/token.js';
import { startDirectory } from '../services/directory/server.js';
import { startLogin, type RunningLogin } from '../services/login/server.js';
import { startGateway, type Gateway } from '../services/node-gateway/server.js';
import { startNodeAssign } from '../services/nodeassign/server.js';
import { httpRequest } from '../services/login/testkit.js';
import { startLoginProcess, trustedIssuersFile, type LoginProcess } from './support/login-process.js';
import { isErrorBody } from './support/stack.js';

const AUDIENCE = 'http://login.fault.example';
const NODE_URL = 'http://node.fault.example';
const MASTER_SECRETS = newSecret();
/** DESIGN: a 503 while a backend is down comes within a second. */
const UNAVAILABLE_WITHIN_MS = 1000;
/** A request still open after this long counts as hung. */
const HANG_MS = 8000;
const WORKERS = 6;

/** What a 5xx body must never show: gRPC status names, errno codes, addresses, stack frames. */
const INTERNALS = /grpc|ECONN[A-Z]+|EPIPE|\bUNAVAILABLE\b|DEADLINE_EXCEEDED|127\.0\.0\.1|:\d{4,5}\b|\bat \S+ \(/;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Outcome {
  kind: 'existing' | 'new';
  started: number;
  ended: number;
  status: number;
  retryAfter?: string;
  body: any;
  /** Set when the request failed at the HTTP level (reset, timeout). */
  error?: string;
}

/** Directory and nodeassign on one temp SQLite store, each stoppable and restartable on its port. */
class Backends {
  private dir = mkdtempSync(path.join(tmpdir(), 'fault-test-'));
  private storeUrl = `sqlite:${path.join(this.dir, 'store.db')}`;
  ports = { directory: 0, nodeassign: 0 };
  private closers: Record<'directory' | 'nodeassign', (() => Promise<void>) | null> = { directory: null, nodeassign: null };

  async start(which: 'directory' | 'nodeassign'): Promise<void> {
    const s = which === 'directory'
      ? await startDirectory({ storeUrl: this.storeUrl, port: this.ports.directory, auth: TEST_AUTH })
      : await startNodeAssign({ storeUrl: this.storeUrl, port: this.ports.nodeassign, auth: TEST_AUTH });
    this.ports[which] = s.port;
    this.closers[which] = s.close;
  }

  async stop(which: 'directory' | 'nodeassign'): Promise<void> {
    await this.closers[which]?.();
    this.closers[which] = null;
  }

  async close(): Promise<void> {
    await this.stop('nodeassign');
    await this.stop('directory');
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Logins (existing and new users, alternately) to `url()` from WORKERS loops,
 * over keep-alive connections, until stop() resolves; every outcome recorded.
 */
function load(url: () => string, idp: DevIdp, existing: string[], fresh: () => string): { outcomes: Outcome[]; stop(): Promise<void> } {
  const outcomes: Outcome[] = [];
  let running = true;
  let n = 0;
  const worker = async () => {
    while (running) {
      const kind = n++ % 2 === 0 ? 'existing' : 'new';
      const email = kind === 'existing' ? existing[n % existing.length] : fresh();
      const authorization = `Assertion ${await idp.makeAssertion(email, { audience: AUDIENCE })}`;
      const started = Date.now();
      try {
        const res = await httpRequest(`${url()}/1.0/sync/1.5`, { headers: { Authorization: authorization }, timeoutMs: HANG_MS });
        outcomes.push({ kind, started, ended: Date.now(), status: res.status, retryAfter: res.header('retry-after'), body: res.json });
      } catch (err) {
        outcomes.push({ kind, started, ended: Date.now(), status: 0, body: undefined, error: (err as Error).message });
      }
    }
  };
  const workers = Array.from({ length: WORKERS }, worker);
  return {
    outcomes,
    stop: async () => {
      running = false;
      await Promise.all(workers);
    },
  };
}

function checkAll(outcomes: Outcome[]): void {
  const failed = outcomes.filter((o) => o.error);
  assert.deepEqual(failed.map((o) => o.error), [], 'every request completes');
  for (const o of outcomes) {
    assert.ok(o.status === 200 || o.status === 503, `unexpected ${o.status} ${JSON.stringify(o.body)}`);
    if (o.status === 503) {
      assert.match(o.retryAfter ?? '', /^\d+$/, '503 carries Retry-After');
      assert.ok(isErrorBody(o.body, 'error'), JSON.stringify(o.body));
      // A 5xx says nothing about internals (addresses, gRPC codes, errno names).
      assert.doesNotMatch(JSON.stringify(o.body), INTERNALS);
    }
  }
}

/** Directory and nodeassign on one store, with the node every login here is given. */
async function backendsWithNode(): Promise<Backends> {
  const backends = new Backends();
  await backends.start('directory');
  await backends.start('nodeassign');
  const client = grpcClient(NodeAssignClient, `127.0.0.1:${backends.ports.nodeassign}`, TEST_AUTH);
  try {
    await call(client, client.addNode, { service: 'sync', url: NODE_URL, capacity: 100_000 }, { deadlineMs: 5000, retryAfter: 1 });
  } finally {
    client.close();
  }
  return backends;
}

describe('login with a backend stopped mid-load', () => {
  let backends: Backends;
  let login: RunningLogin;
  let idp: DevIdp;
  let idpDir: string;
  const existing: string[] = [];
  let fresh = 0;

  before(async () => {
    backends = await backendsWithNode();
    idpDir = mkdtempSync(path.join(tmpdir(), 'fault-idp-'));
    idp = await loadOrCreateDevIdp(idpDir);
    // Default deadlines and Retry-After: the settings a deployment starts with.
    login = await startLogin(
      loginConfig(
        { APPLICATIONS: 'sync/1.5', AUDIENCES: AUDIENCE, MASTER_SECRETS, INTERNAL_SECRET: TEST_AUTH.internalSecret, LOGIN_PORT: '0', DIRECTORY_ADDR: `127.0.0.1:${backends.ports.directory}`, NODEASSIGN_ADDR: `127.0.0.1:${backends.ports.nodeassign}` },
        { trustedIssuers: idp.trustedIssuers },
      ),
    );
    for (let i = 0; i < 20; i++) {
      const email = `existing-${i}@fault.example`;
      const res = await loginAs(email);
      assert.equal(res.status, 200, res.text);
      existing.push(email);
    }
  });

  after(async () => {
    await login?.close();
    await backends?.close();
    rmSync(idpDir, { recursive: true, force: true });
  });

  async function loginAs(email: string) {
    const authorization = `Assertion ${await idp.makeAssertion(email, { audience: AUDIENCE })}`;
    return httpRequest(`${login.url}/1.0/sync/1.5`, { headers: { Authorization: authorization }, timeoutMs: HANG_MS });
  }

  /** Waits until requests of `kind` started after `since` succeed again; returns when the first did. */
  async function recovered(outcomes: Outcome[], since: number, kind: Outcome['kind'], withinMs: number): Promise<number> {
    const deadline = Date.now() + withinMs;
    while (Date.now() < deadline) {
      const ok = outcomes.find((o) => o.kind === kind && o.started >= since && o.status === 200);
      if (ok) return ok.ended;
      await sleep(50);
    }
    assert.fail(`no ${kind}-user login succeeded within ${withinMs} ms of the restart`);
  }

  for (const which of ['directory', 'nodeassign'] as const) {
    test(`${which} stopped: 503 + Retry-After within 1 s for what needs it, no hang; recovers when it returns on its port`, async () => {
      const run = load(() => login.url, idp, existing, () => `new-${++fresh}@fault.example`);
      await sleep(600);
      await backends.stop(which);
      const stopped = Date.now();
      await sleep(1500);
      await backends.start(which);
      const restarted = Date.now();
      const firstOk = await recovered(run.outcomes, restarted, 'new', 10_000);
      await sleep(300);
      await run.stop();
      const { outcomes } = run;
      checkAll(outcomes);

      // While it was down (a little after the stop, so in-flight calls have ended):
      const down = outcomes.filter((o) => o.started >= stopped + 100 && o.ended <= restarted);
      assert.ok(down.length >= 10, `enough requests while ${which} was down (${down.length})`);
      const needsIt = down.filter((o) => which === 'directory' || o.kind === 'new');
      assert.ok(needsIt.length > 0);
      for (const o of needsIt) {
        assert.equal(o.status, 503, `${o.kind} user while ${which} is down`);
        assert.ok(o.ended - o.started < UNAVAILABLE_WITHIN_MS, `503 after ${o.ended - o.started} ms`);
      }
      if (which === 'nodeassign') {
        // Users with a node need no allocation.
        for (const o of down.filter((d) => d.kind === 'existing')) assert.equal(o.status, 200, 'existing user while nodeassign is down');
      }
      // Back to normal: the last requests of each kind succeed.
      const late = outcomes.filter((o) => o.started > firstOk);
      assert.ok(late.length > 0);
      assert.deepEqual([...new Set(late.map((o) => o.status))], [200], 'all succeed after recovery');
    });
  }
});

describe('login with LOGIN_WORKERS=2: a worker killed under load', () => {
  let backends: Backends;
  let idp: DevIdp;
  let dir: string;
  let login: LoginProcess;
  const existing: string[] = [];
  let fresh = 0;

  before(async () => {
    backends = await backendsWithNode();
    dir = mkdtempSync(path.join(tmpdir(), 'fault-workers-'));
    idp = await loadOrCreateDevIdp(dir);
    login = await startLoginProcess({
      LOGIN_WORKERS: '2', APPLICATIONS: 'sync/1.5', AUDIENCES: AUDIENCE, TRUSTED_ISSUERS: trustedIssuersFile(dir, idp), MASTER_SECRETS, INTERNAL_SECRET: TEST_AUTH.internalSecret,
      DIRECTORY_ADDR: `127.0.0.1:${backends.ports.directory}`, NODEASSIGN_ADDR: `127.0.0.1:${backends.ports.nodeassign}`,
    });
    for (let i = 0; i < 10; i++) existing.push(`workers-existing-${i}@fault.example`);
  });

  after(async () => {
    await login?.stop();
    await backends?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('SIGKILL to one worker: only requests in flight on it fail, the other serves on, and a new worker takes its place', async () => {
    const run = load(() => login.url, idp, existing, () => `workers-new-${++fresh}@fault.example`);
    await sleep(800);
    const victim = await login.waitFor((l) => l.msg === 'login worker listening');
    const served = (worker: number) => login.lines.filter((l) => l.msg === 'request' && l.worker === worker).length;
    assert.ok(served(victim.worker!) > 0, 'the worker to be killed was serving');
    const killedAt = Date.now();
    process.kill(victim.pid, 'SIGKILL');
    const exitLine = await login.waitFor((l) => l.msg === 'login worker exited; starting another');
    const ready = await login.waitFor((l) => l.msg === 'login worker ready');
    // New connections go to the new worker in turn with the other one.
    const byNew = () => login.lines.some((l) => l.msg === 'request' && l.worker === ready.worker);
    for (let i = 0; i < 20 && !byNew(); i++) {
      const res = await httpRequest(`${login.url}/__lbheartbeat__`, { headers: { Connection: 'close' } });
      assert.equal(res.status, 200);
    }
    await sleep(300);
    await run.stop();

    assert.equal(exitLine.worker, victim.worker);
    assert.equal(exitLine.signal, 'SIGKILL');
    assert.notEqual(ready.worker, victim.worker);
    assert.ok(byNew(), 'the new worker serves');
    const { outcomes } = run;
    const failed = outcomes.filter((o) => o.error);
    // At most one request per load loop was on the killed worker's connections; a connection
    // the client had pooled can still take a request in the moment before its close arrives.
    assert.ok(failed.length <= WORKERS, `${failed.length} failed`);
    for (const o of failed) assert.ok(o.started <= killedAt + 100 && o.ended >= killedAt, `failed, started ${o.started - killedAt} ms after the kill: ${o.error}`);
    checkAll(outcomes.filter((o) => !o.error));
    assert.ok(outcomes.filter((o) => o.started > killedAt && o.status === 200).length >= 10, 'logins go on after the kill');
    assert.equal(outcomes.filter((o) => o.status === 503).length, 0, 'no 503: the backends were up all along');
  });
});

describe('gateway with the application down or silent', () => {
  let upstream: http.Server | undefined;
  let upstreamPort = 0;
  let silent = false;
  let gateway: Gateway;
  const UPSTREAM_TIMEOUT_MS = 600;
  const token = makeToken({ uid: 1, node: NODE_URL, expires: Math.floor(Date.now() / 1000) + 3600, salt: newSalt() }, nodeSecrets([MASTER_SECRETS], NODE_URL)[0]);

  async function startUpstream(): Promise<void> {
    upstream = http.createServer((req, res) => {
      req.resume();
      if (silent) return; // accepts, never answers
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"ok":true}');
    });
    await new Promise<void>((resolve) => upstream!.listen(upstreamPort, '127.0.0.1', resolve));
    upstreamPort = (upstream.address() as AddressInfo).port;
  }

  async function stopUpstream(): Promise<void> {
    await new Promise<void>((resolve) => {
      upstream!.close(() => resolve());
      upstream!.closeAllConnections();
    });
  }

  before(async () => {
    await startUpstream();
    gateway = await startGateway(
      gatewayConfig({
        NODE_URL, UPSTREAM_URL: `http://127.0.0.1:${upstreamPort}`, MASTER_SECRETS, GATEWAY_PORT: '0', UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS), UPSTREAM_CONNECT_TIMEOUT_MS: '500',
        // One token drives the whole load here: its nonce share must not be what answers.
        NONCE_PER_TOKEN: '100000',
      }),
    );
  });

  after(async () => {
    await gateway?.close();
    if (upstream?.listening) await stopUpstream();
  });

  async function signedGet(): Promise<{ status: number; ms: number; body: any }> {
    const target = `/1.5/1/storage/x`;
    const started = Date.now();
    const res = await httpRequest(`${gateway.url}${target}`, {
      headers: { Authorization: hawkHeader({ id: token.id, key: token.key, method: 'GET', url: `${NODE_URL}${target}` }) },
      timeoutMs: HANG_MS,
    });
    return { status: res.status, ms: Date.now() - started, body: res.json };
  }

  test('application stopped mid-load: 502 at once, no hang; 200 again when it returns on its port', async () => {
    type Phase = 'up' | 'stopping' | 'down' | 'starting' | 'back';
    const outcomes: Array<{ phase: Phase; status: number; ms: number; body: any }> = [];
    let phase: Phase = 'up';
    let running = true;
    const worker = async () => {
      while (running) {
        const p = phase;
        const r = await signedGet();
        // A request counts for a phase only if that phase lasted all through it.
        if (phase === p) outcomes.push({ phase: p, ...r });
      }
    };
    const workers = Array.from({ length: 4 }, worker);
    await sleep(300);
    phase = 'stopping';
    await stopUpstream();
    phase = 'down';
    await sleep(700);
    phase = 'starting';
    await startUpstream();
    phase = 'back';
    await sleep(500);
    running = false;
    await Promise.all(workers);

    for (const o of outcomes) assert.ok([200, 502].includes(o.status), `unexpected ${o.status}`);
    const down = outcomes.filter((o) => o.phase === 'down');
    assert.ok(down.length > 0);
    for (const o of down) {
      assert.equal(o.status, 502);
      assert.ok(isErrorBody(o.body, 'error'), JSON.stringify(o.body));
      assert.doesNotMatch(JSON.stringify(o.body), INTERNALS);
      assert.ok(o.ms < UPSTREAM_TIMEOUT_MS, `502 after ${o.ms} ms`);
    }
    assert.ok(outcomes.filter((o) => o.phase === 'back').some((o) => o.status === 200), 'recovers');
    assert.equal(outcomes.filter((o) => o.phase === 'up').every((o) => o.status === 200), true);
  });

  test('application accepting but never answering: 504 within the upstream timeout, never a hang', async () => {
    silent = true;
    try {
      const results = await Promise.all(Array.from({ length: 4 }, signedGet));
      for (const r of results) {
        assert.equal(r.status, 504);
        assert.ok(isErrorBody(r.body, 'error'));
        assert.ok(r.ms >= UPSTREAM_TIMEOUT_MS - 50 && r.ms < UPSTREAM_TIMEOUT_MS + 1000, `504 after ${r.ms} ms`);
      }
    } finally {
      silent = false;
    }
    assert.equal((await signedGet()).status, 200, 'answers again once the application does');
  });
});
