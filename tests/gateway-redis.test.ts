// Two gateways for one node sharing one Redis (NONCE_STORE=redis://…), over
// real HTTP: one in this process, one as its own process from the entry point.
// A request accepted by one is a replay at the other; the per-token quota
// holds across both; Redis down or slow is 503 + Retry-After and nothing is
// forwarded; Redis back is service back. A Redis that lost nonces (restarted
// empty or from an older snapshot, flushed, failed over to a replica that had
// not caught up) never lets a request signed before the loss through, whatever
// its ts; an evicting policy set at run time is refused within a second.
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { gatewayConfig } from '../lib/config.js';
import { hawkHeader } from '../lib/hawk.js';
import { makeToken, nodeSecrets } from '../lib/token.js';
import { EPOCH_KEY } from '../services/node-gateway/redis-nonces.js';
import { startGateway, type Gateway } from '../services/node-gateway/server.js';
import { redisSkipReason, startRedis, type TestRedis } from './support/redis.js';
import { CountingUpstream, eventually, newSecret, serveTcp } from './support/services.js';

const NODE_URL = 'http://node-1.example:8443';
const MASTERS = [newSecret()];
const PER_TOKEN = 4;
const TIMEOUT_MS = 300;
const RETRY_AFTER = 7;
/** HAWK_SKEW here: after a loss the gateways refuse everything for this long, so the tests keep it short. */
const SKEW = 15;
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
  return (path = '/1.5/42/storage/bookmarks', ts?: number): { path: string; headers: Record<string, string> } => ({
    path,
    headers: { Authorization: hawkHeader({ id: t.id, key: t.key, method: 'GET', url: NODE_URL + path, ts }) },
  });
}

// ---- the application: counts what reaches it ----

const upstream = new CountingUpstream();

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
    HAWK_SKEW: String(SKEW),
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

/** Asserts a 503 with Retry-After, and that nothing reached the application. */
async function unavailable(g: Port, request: { path: string; headers: Record<string, string> }): Promise<Reply> {
  const before = upstream.reached;
  const r = await send(g, request.path, request.headers);
  assert.equal(r.status, 503, r.body);
  assert.match(String(r.headers['retry-after']), /^[1-9]\d*$/);
  assert.equal(JSON.parse(r.body).status, 'error');
  assert.ok(!/redis|127\.0\.0\.1|ECONNREFUSED|timed out/i.test(r.body), `no internals in a 5xx body: ${r.body}`);
  assert.equal(upstream.reached, before, 'the request reached the application');
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
    const env = gatewayEnv(redis.url, await upstream.start());
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
    await upstream.stop();
    await redis?.dispose();
  });

  test('a captured request replayed to the other replica is 401; the application sees it once', async () => {
    const sign = newToken();
    for (const [first, second] of [[a, b], [b, a]] as const) {
      const captured = sign();
      const before = upstream.reached;
      assert.equal((await send(first, captured.path, captured.headers)).status, 200);
      const replay = await send(second, captured.path, captured.headers);
      assert.equal(replay.status, 401, replay.body);
      assert.equal(JSON.parse(replay.body).status, 'invalid-credentials');
      assert.match(JSON.parse(replay.body).errors[0].description, /nonce already used/);
      assert.equal((await send(first, captured.path, captured.headers)).status, 401, 'and at the first one too');
      assert.equal(upstream.reached, before + 1);
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

  test('Redis stopped: 503 + Retry-After, heartbeat 503; restarted empty: a request captured before is refused, then everything is served again', async () => {
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
    await redis.start();
    for (const g of [a, b]) await eventually('connected again', async () => (await send(g, '/__heartbeat__')).status === 200);
    // The gateways knew the store before: an empty Redis lost what it knew.
    for (const g of [a, b]) {
      const replay = await unavailable(g, captured);
      // Until the client's clock reaches the epoch's start plus the skew: at most twice the skew after it signed.
      assert.ok(Number(replay.headers['retry-after']) <= 2 * SKEW + 1, String(replay.headers['retry-after']));
    }
    for (const g of [a, b]) {
      await eventually('served again once the wait is over', async () => {
        const r = sign();
        return (await send(g, r.path, r.headers)).status === 200;
      }, { timeoutMs: (SKEW + 20) * 1000 });
    }
  });

  test('an evicting maxmemory-policy set at run time: 503 within a second at both gateways, nothing forwarded; set back: served', async () => {
    // A token per request: NONCE_PER_TOKEN is small here.
    const sign = () => newToken()();
    const ok = sign();
    assert.equal((await send(a, ok.path, ok.headers)).status, 200);
    await redis.command('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const changed = Date.now();
      for (const g of [a, b]) {
        await eventually('refused', async () => {
          const before = upstream.reached;
          const r = sign();
          const res = await send(g, r.path, r.headers);
          if (res.status === 200) return false;
          assert.equal(res.status, 503, res.body);
          assert.equal(res.headers['retry-after'], String(RETRY_AFTER));
          assert.equal(upstream.reached, before);
          return true;
        });
      }
      console.log(`# both gateways refused ${Date.now() - changed} ms after CONFIG SET`);
      // Until it is set back, and the heartbeat (which HAProxy does not probe) says so too.
      await unavailable(a, sign());
      assert.equal((await send(b, '/__heartbeat__')).status, 503);
    } finally {
      await redis.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    }
    for (const g of [a, b]) await eventually('served again', async () => {
        const r = sign();
        return (await send(g, r.path, r.headers)).status === 200;
      });
  });
});

/** A TCP relay to whichever Redis `to` names; switch() drops every connection, so clients reconnect to the new one. */
async function redisRelay(port: number) {
  let target = port;
  const open = new Set<net.Socket>();
  const relay = await serveTcp((client, track) => {
    const upstream = net.connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      track(s);
      open.add(s);
      s.on('close', () => open.delete(s));
    }
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  return {
    url: `redis://127.0.0.1:${relay.port}`,
    switchTo(p: number) {
      target = p;
      for (const s of open) s.destroy();
    },
    close: relay.close,
  };
}

describe('a Redis that lost nonces it acknowledged: nothing signed before the loss gets through, whatever its ts', { skip }, () => {
  let redis: TestRedis;
  let replica: TestRedis | undefined;
  let relay: Awaited<ReturnType<typeof redisRelay>>;
  let gateways: Gateway[] = [];
  let upstreamUrl: string;

  before(async () => {
    upstreamUrl = await upstream.start();
  });
  after(() => upstream.stop());
  beforeEach(async () => {
    redis = await startRedis();
    relay = await redisRelay(redis.port);
    gateways = [];
    for (let i = 0; i < 2; i++) gateways.push(await startGateway(gatewayConfig(gatewayEnv(relay.url, upstreamUrl))));
  });
  afterEach(async () => {
    await Promise.all(gateways.map((g) => g.close()));
    await relay.close();
    await redis.dispose();
    await replica?.dispose();
    replica = undefined;
  });

  /** Both gateways connected (heartbeat 200): a 503 then is the store refusing, not Redis away. */
  async function connected(): Promise<void> {
    for (const g of gateways) await eventually('the gateway uses Redis again', async () => (await send(g, '/__heartbeat__')).status === 200, { timeoutMs: 20_000 });
  }

  /** A nonce the store still holds: 401 at both gateways, whatever the epoch. */
  async function replayedEverywhere(request: { path: string; headers: Record<string, string> }): Promise<void> {
    for (const g of gateways) {
      const before = upstream.reached;
      const r = await send(g, request.path, request.headers);
      assert.equal(r.status, 401, r.body);
      assert.match(JSON.parse(r.body).errors[0].description, /nonce already used/);
      assert.equal(upstream.reached, before);
    }
  }

  /** The request is refused at both gateways (503 + Retry-After, within the wait) and reaches nothing. */
  async function refusedEverywhere(request: { path: string; headers: Record<string, string> }): Promise<void> {
    for (const g of gateways) {
      const r = await unavailable(g, request);
      assert.ok(Number(r.headers['retry-after']) <= 2 * SKEW + 1, String(r.headers['retry-after']));
    }
  }

  test('restarted from an older RDB snapshot (SAVE, a request accepted, kill -9, restart): the later request replayed is refused', async () => {
    const sign = newToken();
    const first = sign();
    assert.equal((await send(gateways[0], first.path, first.headers)).status, 200);
    assert.equal(await redis.command('SAVE'), 'OK');
    const second = sign();
    assert.equal((await send(gateways[1], second.path, second.headers)).status, 200);
    await redis.kill();
    await redis.start();
    await connected();
    // The snapshot brought the store's epoch back and the first nonce (a replay, 401), not the second.
    await refusedEverywhere(second);
    await replayedEverywhere(first);
  });

  test('FLUSHALL: a request signed 10 s ahead (inside the skew) and accepted before is refused after', async () => {
    const sign = newToken();
    const ahead = sign(undefined, Math.floor(Date.now() / 1000) + 10);
    assert.equal((await send(gateways[0], ahead.path, ahead.headers)).status, 200);
    assert.equal((await send(gateways[1], ahead.path, ahead.headers)).status, 401, 'a replay while Redis remembers');
    assert.equal(await redis.command('FLUSHALL'), 'OK');
    await refusedEverywhere(ahead);
    // Once the wait is over, new requests are served.
    await eventually('served again once the wait is over', async () => {
      const r = sign();
      return (await send(gateways[1], r.path, r.headers)).status === 200;
    }, { timeoutMs: (SKEW + 20) * 1000 });
  });

  test('a replica promoted (REPLICAOF NO ONE) that had not caught up, the gateways pointed at it: the request it missed is refused', async () => {
    replica = await startRedis(['--replicaof', '127.0.0.1', String(redis.port)]);
    const sign = newToken();
    const before = sign();
    assert.equal((await send(gateways[0], before.path, before.headers)).status, 200);
    // The replica has the store's epoch (and the first nonce) ...
    await eventually('the replica caught up', async () => Number(await replica!.command('EXISTS', EPOCH_KEY)) === 1 && /master_link_status:up/.test(String(await replica!.command('INFO', 'replication'))));
    await eventually('the replica has the first nonce', async () => Number(await replica!.command('DBSIZE')) === Number(await redis.command('DBSIZE')));
    // ... then loses its primary, and is promoted before it learns of the second request.
    assert.equal(await replica.command('REPLICAOF', 'NO', 'ONE'), 'OK');
    const missed = sign();
    assert.equal((await send(gateways[1], missed.path, missed.headers)).status, 200);
    relay.switchTo(replica.port);
    await connected();
    await refusedEverywhere(missed);
    await replayedEverywhere(before);
  });
});
