// Two gateways for one node sharing one Redis (NONCE_STORE=redis://…), over
// real HTTP: one in this process, one as its own process from the entry point.
// A request accepted by one is a replay at the other; the per-token quota
// holds across both; Redis down or slow is 503 + Retry-After and nothing is
// forwarded; Redis back is service back, and a request captured before a
// Redis restart (which lost every nonce) is still not taken as new.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { gatewayConfig } from '../lib/config.js';
import { hawkHeader } from '../lib/hawk.js';
import { makeToken, nodeSecrets } from '../lib/token.js';
import { startGateway, type Gateway } from '../services/node-gateway/server.js';
import { redisSkipReason, startRedis, type TestRedis } from './support/redis.js';
import { newSecret } from './support/services.js';

const NODE_URL = 'http://node-1.example:8443';
const MASTERS = [newSecret()];
const PER_TOKEN = 4;
const TIMEOUT_MS = 300;
const RETRY_AFTER = 7;
const ENTRY_POINT = fileURLToPath(new URL('../services/node-gateway/index.ts', import.meta.url));

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** Where a gateway listens. */
interface Port {
  port: number;
}

function send(g: Port, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: g.port, path, headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

let tokens = 0;
/** A new token for uid 42 (its own quota), and a signer of requests under it. */
function newToken() {
  const t = makeToken({ uid: 42, node: NODE_URL, expires: Math.floor(Date.now() / 1000) + 600, salt: randomBytes(3).toString('hex') + String(++tokens) }, nodeSecrets(MASTERS, NODE_URL)[0]);
  return (path = '/1.5/42/storage/bookmarks'): { path: string; headers: Record<string, string> } => ({
    path,
    headers: { Authorization: hawkHeader({ id: t.id, key: t.key, method: 'GET', url: NODE_URL + path }) },
  });
}

// ---- the application: counts what reaches it ----

let reached = 0;
const upstream = http.createServer((req, res) => {
  reached++;
  req.resume();
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end('{"ok":true}');
});

// ---- the gateways ----

function gatewayEnv(redisUrl: string, upstreamUrl: string): Record<string, string> {
  return {
    NODE_URL,
    UPSTREAM_URL: upstreamUrl,
    MASTER_SECRETS: MASTERS.join(','),
    GATEWAY_PORT: '0',
    NONCE_STORE: redisUrl,
    NONCE_STORE_TIMEOUT_MS: String(TIMEOUT_MS),
    NONCE_PER_TOKEN: String(PER_TOKEN),
    RETRY_AFTER: String(RETRY_AFTER),
  };
}

/** The gateway's entry point as its own process; resolves with its port once it logs "node-gateway listening". */
function spawnGateway(env: Record<string, string>): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', ENTRY_POINT], { env: { ...process.env, ...env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the gateway process did not start: ${out.slice(-1000)}`)), 20_000);
    child.stderr!.on('data', (d: Buffer) => (out += d));
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      const line = out.split('\n').find((l) => l.includes('"node-gateway listening"'));
      if (line) {
        clearTimeout(timer);
        resolve({ child, port: JSON.parse(line).port });
      }
    });
    child.once('exit', (code) => reject(new Error(`the gateway process exited with ${code}: ${out.slice(-1000)}`)));
  });
}

async function eventually(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Asserts a 503 with Retry-After, and that nothing reached the application. */
async function unavailable(g: Port, request: { path: string; headers: Record<string, string> }): Promise<Reply> {
  const before = reached;
  const r = await send(g, request.path, request.headers);
  assert.equal(r.status, 503, r.body);
  assert.match(String(r.headers['retry-after']), /^[1-9]\d*$/);
  assert.equal(JSON.parse(r.body).status, 'error');
  assert.ok(!/redis|127\.0\.0\.1|ECONNREFUSED|timed out/i.test(r.body), `no internals in a 5xx body: ${r.body}`);
  assert.equal(reached, before, 'the request reached the application');
  return r;
}

const skip = redisSkipReason();
if (skip) console.log(`# skipped: the gateway tests with a shared Redis: ${skip}`);

describe('two gateways of one node sharing one Redis', { skip }, () => {
  let redis: TestRedis;
  let a: Gateway;
  let b: Port & { child: ChildProcess };

  before(async () => {
    redis = await startRedis();
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    const env = gatewayEnv(redis.url, `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`);
    a = await startGateway(gatewayConfig(env));
    b = await spawnGateway(env);
  });
  after(async () => {
    await a?.close();
    if (b && b.child.exitCode === null) {
      const exited = new Promise((r) => b.child.once('exit', r));
      b.child.kill('SIGTERM');
      await exited;
    }
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
    await redis?.dispose();
  });

  test('a captured request replayed to the other replica is 401; the application sees it once', async () => {
    const sign = newToken();
    for (const [first, second] of [[a, b], [b, a]] as const) {
      const captured = sign();
      const before = reached;
      assert.equal((await send(first, captured.path, captured.headers)).status, 200);
      const replay = await send(second, captured.path, captured.headers);
      assert.equal(replay.status, 401, replay.body);
      assert.equal(JSON.parse(replay.body).status, 'invalid-credentials');
      assert.match(JSON.parse(replay.body).errors[0].description, /nonce already used/);
      assert.equal((await send(first, captured.path, captured.headers)).status, 401, 'and at the first one too');
      assert.equal(reached, before + 1);
    }
  });

  test('the per-token quota holds across both replicas, for that token only', async () => {
    const sign = newToken();
    const statuses: number[] = [];
    for (let i = 0; i < PER_TOKEN + 2; i++) {
      const r = sign();
      statuses.push((await send(i % 2 ? b : a, r.path, r.headers)).status);
    }
    assert.deepEqual(statuses.slice(0, PER_TOKEN), Array(PER_TOKEN).fill(200));
    const over = await unavailable(b, sign());
    assert.ok(Number(over.headers['retry-after']) <= 2 * 60 + 15, String(over.headers['retry-after']));
    await unavailable(a, sign());
    const other = newToken()();
    assert.equal((await send(a, other.path, other.headers)).status, 200, 'another token has its own share');
  });

  test('the heartbeat reports the nonce store', async () => {
    for (const g of [a, b]) {
      const hb = await send(g, '/__heartbeat__');
      assert.equal(hb.status, 200, hb.body);
      assert.deepEqual(JSON.parse(hb.body), { status: 'ok', checks: { application: 'ok', nonces: 'ok' } });
    }
  });

  test('Redis too slow: 503 + Retry-After within the timeout, nothing forwarded; answering again: served', async () => {
    const sign = newToken();
    redis.pause();
    try {
      for (const g of [a, b]) {
        const started = Date.now();
        const r = await unavailable(g, sign());
        assert.equal(r.headers['retry-after'], String(RETRY_AFTER));
        assert.ok(Date.now() - started < TIMEOUT_MS + 1500, `answered after ${Date.now() - started} ms`);
      }
    } finally {
      redis.resume();
    }
    for (const g of [a, b]) await eventually('served again after the pause', async () => {
        const r = sign();
        return (await send(g, r.path, r.headers)).status === 200;
      });
  });

  test('Redis stopped: 503 + Retry-After, heartbeat 503; restarted: served again, and a request captured before is not taken as new', async () => {
    const sign = newToken();
    const captured = sign();
    assert.equal((await send(a, captured.path, captured.headers)).status, 200);
    await redis.stop();
    for (const g of [a, b]) {
      const r = await unavailable(g, sign());
      assert.equal(r.headers['retry-after'], String(RETRY_AFTER));
      const hb = await send(g, '/__heartbeat__');
      assert.equal(hb.status, 503, hb.body);
      assert.equal(hb.headers['retry-after'], String(RETRY_AFTER));
      assert.deepEqual(JSON.parse(hb.body).checks, { application: 'ok', nonces: 'unavailable' });
    }
    // The restarted Redis is empty; it comes back in a later second than the capture was signed in.
    const signedAt = Number(/ts="(\d+)"/.exec(captured.headers.Authorization)![1]);
    while (Math.floor(Date.now() / 1000) <= signedAt) await new Promise((r) => setTimeout(r, 50));
    await redis.start();
    for (const g of [a, b]) {
      await eventually('served again after the restart', async () => {
        const r = sign();
        return (await send(g, r.path, r.headers)).status === 200;
      });
      assert.equal((await send(g, '/__heartbeat__')).status, 200);
    }
    const replay = await unavailable(b, captured);
    assert.match(String(replay.headers['retry-after']), /^[1-9]$/, 'until the client signs in the store\'s time');
  });
});
