// The gateway over real HTTP: a real upstream on loopback, requests signed with
// the reference `hawk` client, tokens minted with our tokenlib code.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { gatewayConfig } from '../../lib/config.js';
import { ConfigError } from '../../lib/errors.js';
import { hawkHeader, timestampMac } from '../../lib/hawk.js';
import { derivedSecret, encodeToken, makeToken, nodeSecrets, type TokenPayload } from '../../lib/token.js';
import { newSecret } from '../../tests/support/services.js';
import { startGateway, type Gateway } from './server.js';
import { readVectors } from '../../tests/support/vectors.js';

interface HawkCredentials {
  id: string;
  key: string;
  algorithm: 'sha256';
}
interface HawkClient {
  header(uri: string, method: string, options: Record<string, unknown>): { header: string; artifacts: Record<string, unknown> };
  authenticate(res: { headers: Record<string, string> }, credentials: HawkCredentials, artifacts: Record<string, unknown>): unknown;
}
const Hawk = createRequire(import.meta.url)('hawk') as { client: HawkClient };

const NODE_URL = 'http://node-1.example:8443';
const MASTERS = [newSecret(), newSecret()];
const HASH_BODY_LIMIT = 1024;

// ---- a real upstream that records what reaches it ----

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
}
const seen: Seen[] = [];
const upstreamClosed: string[] = [];
let upstream: http.Server;
let upstreamUrl: string;

function startUpstream(): Promise<void> {
  upstream = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks) });
      if (req.url!.includes('/slow')) return; // never answers
      if (req.url!.includes('/hold')) {
        res.once('close', () => upstreamClosed.push(req.url!));
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        res.write('partial');
        return; // never finishes
      }
      const body = JSON.stringify({ ok: true });
      res.writeHead(req.url!.includes('/created') ? 201 : 200, [
        'Content-Type', 'application/json',
        'Set-Cookie', 'a=1',
        'Set-Cookie', 'b=2',
        'Connection', 'X-Upstream-Hop',
        'X-Upstream-Hop', 'secret',
        'X-Upstream', 'yes',
      ]);
      res.end(body);
    });
  });
  return new Promise((resolve) => upstream.listen(0, '127.0.0.1', () => {
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    resolve();
  }));
}

// ---- gateways ----

const gateways: Gateway[] = [];
async function gateway(env: Record<string, string> = {}): Promise<Gateway> {
  const g = await startGateway(
    gatewayConfig({
      NODE_URL,
      UPSTREAM_URL: upstreamUrl,
      MASTER_SECRETS: MASTERS.join(','),
      GATEWAY_PORT: '0',
      HASH_BODY_LIMIT: String(HASH_BODY_LIMIT),
      UPSTREAM_TIMEOUT_MS: '300',
      UPSTREAM_CONNECT_TIMEOUT_MS: '300',
      ...env,
    }),
  );
  gateways.push(g);
  return g;
}

let gw: Gateway;
before(async () => {
  await startUpstream();
  gw = await gateway();
});
after(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  upstream.closeAllConnections();
  await new Promise((r) => upstream.close(r));
});

// ---- helpers ----

const now = (): number => Math.floor(Date.now() / 1000);

function token(overrides: Partial<TokenPayload> = {}, opts: { masters?: string[]; nodeUrl?: string; which?: number } = {}) {
  const nodeUrl = opts.nodeUrl ?? NODE_URL;
  const secret = nodeSecrets(opts.masters ?? MASTERS, nodeUrl)[opts.which ?? 0];
  const t = makeToken({ uid: 42, node: nodeUrl, expires: now() + 300, salt: 'a1b2c3', ...overrides }, secret);
  return { ...t, credentials: { id: t.id, key: t.key, algorithm: 'sha256' as const } };
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  text: string;
  json(): any;
}

function send(
  g: Gateway,
  o: { method?: string; path: string; headers?: Record<string, string> | string[]; body?: string | Buffer; chunked?: boolean },
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    // host/port/path rather than a URL, which would resolve dot segments before sending.
    const req = http.request({ host: '127.0.0.1', port: g.port, path: o.path, method: o.method ?? 'GET', headers: o.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode!, headers: res.headers, rawHeaders: res.rawHeaders, text, json: () => JSON.parse(text) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (o.chunked && o.body !== undefined) {
      const buf = Buffer.from(o.body);
      for (let i = 0; i < buf.length; i += 512) req.write(buf.subarray(i, i + 512));
      req.end();
    } else req.end(o.body);
  });
}

/** Signs with the reference client for the public node URL, sends to the gateway's socket. */
function signedSend(
  g: Gateway,
  t: { credentials: HawkCredentials },
  o: { method?: string; path: string; body?: string; contentType?: string; hash?: boolean; nodeUrl?: string; headers?: Record<string, string>; ts?: number },
) {
  const method = o.method ?? 'GET';
  const { header, artifacts } = Hawk.client.header((o.nodeUrl ?? NODE_URL) + o.path, method, {
    credentials: t.credentials,
    ...(o.hash ? { payload: o.body ?? '', contentType: o.contentType } : {}),
    ...(o.ts ? { timestamp: o.ts } : {}),
  });
  const headers: Record<string, string> = { ...o.headers, Authorization: header };
  if (o.contentType) headers['Content-Type'] = o.contentType;
  return { artifacts, reply: send(g, { method, path: o.path, headers, body: o.body }) };
}

function assertError(r: Reply, status: number, statusString: string, description: RegExp): void {
  assert.equal(r.status, status, r.text);
  assert.match(r.headers['content-type'] ?? '', /^application\/json/);
  assert.match(String(r.headers['x-timestamp']), /^\d+$/);
  assert.ok(Math.abs(Number(r.headers['x-timestamp']) - now()) <= 2);
  const body = r.json();
  assert.equal(body.status, statusString);
  assert.equal(body.errors.length, 1);
  assert.match(body.errors[0].description, description);
  assert.deepEqual(Object.keys(body.errors[0]).sort(), ['description', 'location', 'name']);
  if (status === 401) assert.match(r.headers['www-authenticate'] ?? '', /^Hawk/);
}

/** Runs a request that must not reach the application. */
async function refused(run: () => Promise<Reply>): Promise<Reply> {
  const before = seen.length;
  const r = await run();
  assert.equal(seen.length, before, 'the request reached the application');
  return r;
}

// ---- accepted requests ----

test('signed requests of every method reach the application as the caller', async () => {
  const t = token();
  const cases = [
    { method: 'GET', path: '/1.5/42/info/collections' },
    { method: 'GET', path: '/1.5/42/storage/bookmarks?full=1&newer=12.5&ids=a,b' },
    { method: 'POST', path: '/1.5/42/storage/tabs', body: '[{"id":"x"}]', contentType: 'application/json', hash: true },
    { method: 'POST', path: '/1.5/42/storage/tabs?batch=true', body: '[{"id":"y"}]', contentType: 'application/json' },
    { method: 'PUT', path: '/1.5/42/storage/meta/global', body: '{"payload":"p"}', contentType: 'application/json; charset=utf-8', hash: true },
    { method: 'PUT', path: '/1.5/42/storage/meta/global', body: '{"payload":"q"}', contentType: 'text/plain' },
    { method: 'DELETE', path: '/1.5/42/storage?ids=a,b' },
    { method: 'DELETE', path: '/1.5/42', body: '', hash: true },
    { method: 'POST', path: '/1.5/42/created', body: '' },
  ];
  for (const c of cases) {
    const { reply } = signedSend(gw, t, c);
    const r = await reply;
    const label = `${c.method} ${c.path}${c.hash ? ' (hash)' : ''}`;
    assert.equal(r.status, c.path.endsWith('/created') ? 201 : 200, `${label}: ${r.text}`);
    assert.deepEqual(r.json(), { ok: true });
    const s = seen.at(-1)!;
    assert.equal(s.method, c.method, label);
    assert.equal(s.url, c.path, label);
    assert.equal(s.body.toString(), c.body ?? '', label);
    assert.equal(s.headers['x-authenticated-uid'], '42', label);
    assert.equal(s.headers['x-authenticated-node'], NODE_URL, label);
    assert.equal(s.headers.authorization, undefined, label);
    if (c.contentType) assert.equal(s.headers['content-type'], c.contentType, label);
    // The application's headers come back, minus its connection-scoped ones.
    assert.deepEqual(r.headers['set-cookie'], ['a=1', 'b=2'], label);
    assert.equal(r.headers['x-upstream'], 'yes');
    assert.equal(r.headers['x-upstream-hop'], undefined);
  }
});

test('the MAC uses the public node URL: default and non-default ports, whatever Host says', async () => {
  const t = token();
  const { reply } = signedSend(gw, t, { path: '/1.5/42/x', headers: { Host: 'evil.example:1234' } });
  assert.equal((await reply).status, 200);
  assert.equal(seen.at(-1)!.headers.host, 'evil.example:1234', 'Host passes through');
  for (const nodeUrl of ['https://node-2.example', 'http://node-3.example', 'https://node-4.example:4443']) {
    const g = await gateway({ NODE_URL: nodeUrl });
    const tk = token({}, { nodeUrl });
    const ok = signedSend(g, tk, { path: '/1.5/42/y?q=1', nodeUrl });
    assert.equal((await ok.reply).status, 200, nodeUrl);
    assert.equal(seen.at(-1)!.headers['x-forwarded-proto'], new URL(nodeUrl).protocol.slice(0, -1));
    assert.equal(seen.at(-1)!.headers['x-forwarded-host'], new URL(nodeUrl).host);
    // Signed for the gateway's socket address instead: refused.
    const wrong = signedSend(g, tk, { path: '/1.5/42/y', nodeUrl: g.url });
    assertError(await wrong.reply, 401, 'invalid-credentials', /MAC/);
  }
});

test('a token in the reference tokenlib format is accepted', async () => {
  const vector = readVectors<Array<{ payload_json: string }>>('tokenlib.json')[0];
  const payload = { ...JSON.parse(vector.payload_json), node: NODE_URL, expires: now() + 300 };
  const secret = nodeSecrets(MASTERS, NODE_URL)[0];
  const id = encodeToken(JSON.stringify(payload), secret);
  const key = derivedSecret(id, payload.salt, secret);
  const { reply } = signedSend(gw, { credentials: { id, key, algorithm: 'sha256' } }, { path: '/1.5/12345/info/collections' });
  assert.equal((await reply).status, 200);
  assert.equal(seen.at(-1)!.headers['x-authenticated-uid'], '12345');
});

test('secret rotation: a token from the older master secret is accepted', async () => {
  const { reply } = signedSend(gw, token({}, { which: 1 }), { path: '/1.5/42/rotated' });
  assert.equal((await reply).status, 200);
});

test('NODE_SECRETS belong to one exact URL: a gateway that would make its URL from its port (npm start without NODE_URL) refuses to start', async () => {
  const config = gatewayConfig({ NODE_URL, UPSTREAM_URL: upstreamUrl, NODE_SECRETS: nodeSecrets(MASTERS, NODE_URL).join(','), GATEWAY_PORT: '0' });
  await assert.rejects(startGateway(config, (p) => `http://127.0.0.1:${p}`), (e: unknown) => e instanceof ConfigError && e.variable === 'NODE_URL' && /NODE_SECRETS/.test(e.message));
});

test('forwarding headers are overwritten, hop-by-hop and gateway-owned ones dropped', async () => {
  const t = token();
  const path = '/1.5/42/headers';
  const auth = hawkHeader({ id: t.id, key: t.key, method: 'GET', url: NODE_URL + path });
  const r = await send(gw, {
    path,
    headers: [
      'Host', 'node-1.example:8443',
      'Authorization', auth,
      'X-Forwarded-For', '203.0.113.9',
      'X-Forwarded-Proto', 'gopher',
      'X-Forwarded-Host', 'spoofed.example',
      'X-Forwarded-Port', '1',
      'Forwarded', 'for=203.0.113.9',
      'X-Authenticated-Uid', '999',
      'x-authenticated-node', 'https://elsewhere',
      'X-Authenticated-Whatever', 'x',
      'Connection', 'keep-alive, X-Client-Hop',
      'X-Client-Hop', 'drop me',
      'Proxy-Authorization', 'Basic eA==',
      'TE', 'trailers',
      'X-Multi', 'one',
      'X-Multi', 'two',
    ],
  });
  assert.equal(r.status, 200, r.text);
  const s = seen.at(-1)!;
  assert.equal(s.headers['x-forwarded-for'], '127.0.0.1');
  assert.equal(s.headers['x-forwarded-proto'], 'http');
  assert.equal(s.headers['x-forwarded-host'], 'node-1.example:8443');
  assert.equal(s.headers['x-authenticated-uid'], '42');
  assert.equal(s.headers['x-authenticated-node'], NODE_URL);
  for (const gone of ['authorization', 'x-forwarded-port', 'forwarded', 'x-authenticated-whatever', 'x-client-hop', 'proxy-authorization', 'te']) {
    assert.equal(s.headers[gone], undefined, gone);
  }
  const names = s.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
  assert.equal(names.filter((n) => n === 'x-authenticated-uid').length, 1);
  assert.equal(names.filter((n) => n === 'x-forwarded-for').length, 1);
  assert.deepEqual(s.rawHeaders.filter((_, i) => s.rawHeaders[i - 1] === 'X-Multi'), ['one', 'two']);
});

test('an unsigned body streams through untouched, beyond the hash limit', async () => {
  const body = Buffer.alloc(3 * 1024 * 1024 + 7, 'z');
  for (const chunked of [false, true]) {
    const t = token();
    const path = '/1.5/42/storage/big';
    const r = await send(gw, {
      method: 'PUT',
      path,
      chunked,
      body,
      headers: { Authorization: hawkHeader({ id: t.id, key: t.key, method: 'PUT', url: NODE_URL + path }), 'Content-Type': 'application/octet-stream' },
    });
    assert.equal(r.status, 200, r.text);
    const s = seen.at(-1)!;
    assert.equal(s.body.length, body.length);
    assert.equal(createHash('sha256').update(s.body).digest('hex'), createHash('sha256').update(body).digest('hex'));
    if (chunked) assert.equal(s.headers['transfer-encoding'], 'chunked');
    else assert.equal(s.headers['content-length'], String(body.length));
  }
});

test('a signed body is checked and forwarded with its exact length', async () => {
  const t = token();
  const body = '{"x":"' + 'y'.repeat(900) + '"}';
  const path = '/1.5/42/storage/hashed';
  const auth = hawkHeader({ id: t.id, key: t.key, method: 'POST', url: NODE_URL + path, payload: body, contentType: 'application/json' });
  const r = await send(gw, { method: 'POST', path, chunked: true, body, headers: { Authorization: auth, 'Content-Type': 'application/json' } });
  assert.equal(r.status, 200, r.text);
  assert.equal(seen.at(-1)!.headers['content-length'], String(body.length));
  assert.equal(seen.at(-1)!.headers['transfer-encoding'], undefined);
  assert.equal(seen.at(-1)!.body.toString(), body);
});

// ---- refused requests ----

test('malformed Hawk headers are 400, a missing or foreign scheme 401', async () => {
  const path = '/1.5/42/x';
  const malformed = [
    'Hawk',
    'Hawk id=abc',
    'Hawk id="a", ts="1", nonce="n"',
    'Hawk id="a", ts="soon", nonce="n", mac="m"',
    'Hawk id="a", ts="1", nonce="n", mac="m", color="red"',
    'Hawk id="a", id="b", ts="1", nonce="n", mac="m"',
    'Hawk id="a\\b", ts="1", nonce="n", mac="m"',
    `Hawk id="${'a'.repeat(4100)}", ts="1", nonce="n", mac="m"`,
  ];
  for (const authorization of malformed) {
    const r = await refused(() => send(gw, { path, headers: { Authorization: authorization } }));
    assertError(r, 400, 'error', /Hawk|Authorization/);
    assert.deepEqual({ ...r.json().errors[0], description: '' }, { location: 'header', name: 'Authorization', description: '' });
  }
  assertError(await refused(() => send(gw, { path })), 401, 'error', /missing Authorization/);
  assertError(await refused(() => send(gw, { path, headers: { Authorization: 'Bearer abc' } })), 401, 'error', /scheme/);
  assertError(await refused(() => send(gw, { path: '/1.5/42/../43/x', headers: { Authorization: 'Bearer abc' } })), 400, 'error', /segments/);
});

test('bad tokens: signature, flipped byte, another node, expired', async () => {
  const path = '/1.5/42/x';
  const other = token({}, { masters: ['a-completely-different-master-secret'] });
  assertError(await refused(() => signedSend(gw, other, { path }).reply), 401, 'invalid-credentials', /signature/);
  const t = token();
  const i = 20;
  const flippedId = t.id.slice(0, i) + (t.id[i] === 'A' ? 'B' : 'A') + t.id.slice(i + 1);
  const flipped = { credentials: { ...t.credentials, id: flippedId } };
  assertError(await refused(() => signedSend(gw, flipped, { path }).reply), 401, 'invalid-credentials', /signature|malformed/);
  const elsewhere = token({ node: 'http://node-9.example:8443' });
  assertError(await refused(() => signedSend(gw, elsewhere, { path }).reply), 401, 'invalid-credentials', /another node/);
  const expired = token({ expires: now() - 1 });
  assertError(await refused(() => signedSend(gw, expired, { path }).reply), 401, 'invalid-timestamp', /expired/);
});

test('uid mismatch, bad MAC, replayed nonce', async () => {
  const t = token();
  assertError(await refused(() => signedSend(gw, t, { path: '/1.5/43/x' }).reply), 401, 'invalid-credentials', /uid/);
  const badKey = { credentials: { ...t.credentials, key: token({ salt: '000000' }).key } };
  assertError(await refused(() => signedSend(gw, badKey, { path: '/1.5/42/x' }).reply), 401, 'invalid-credentials', /MAC/);
  const path = '/1.5/42/once';
  const auth = hawkHeader({ id: t.id, key: t.key, method: 'GET', url: NODE_URL + path });
  assert.equal((await send(gw, { path, headers: { Authorization: auth } })).status, 200);
  assertError(await refused(() => send(gw, { path, headers: { Authorization: auth } })), 401, 'invalid-credentials', /nonce/);
});

test('a nonce flood cannot evict another token\'s nonces: the flooder gets 503, the capture still replays as 401', async () => {
  const g = await gateway({ NONCE_CACHE_SIZE: '100', NONCE_PER_TOKEN: '10' });
  const victim = token({ uid: 42, salt: 'aaaaaa' });
  const path = '/1.5/42/storage/captured';
  const captured = hawkHeader({ id: victim.id, key: victim.key, method: 'GET', url: NODE_URL + path });
  assert.equal((await send(g, { path, headers: { Authorization: captured } })).status, 200);
  const flooder = token({ uid: 43, salt: 'bbbbbb' });
  const statuses = new Map<number, number>();
  for (let i = 0; i < 300; i++) {
    // A third of the flood aims at another uid: refused, so it must not take room either.
    const p = i % 3 === 0 ? '/1.5/42/x' : '/1.5/43/x';
    const r = await send(g, { path: p, headers: { Authorization: hawkHeader({ id: flooder.id, key: flooder.key, method: 'GET', url: NODE_URL + p }) } });
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    if (r.status === 503) assert.match(String(r.headers['retry-after']), /^[1-9]\d*$/);
  }
  assertError(await refused(() => send(g, { path, headers: { Authorization: captured } })), 401, 'invalid-credentials', /nonce/);
  assert.deepEqual(Object.fromEntries(statuses), { 200: 10, 401: 100, 503: 190 });
});

test('a stale timestamp is 401 with a server time the client can verify', async () => {
  const t = token();
  const { artifacts, reply } = signedSend(gw, t, { path: '/1.5/42/x', ts: now() - 3600 });
  const r = await refused(() => reply);
  assertError(r, 401, 'invalid-timestamp', /stale/);
  const m = /^Hawk ts="(\d+)", tsm="([^"]+)", error="Stale timestamp"$/.exec(r.headers['www-authenticate']!);
  assert.ok(m, r.headers['www-authenticate']);
  assert.ok(Math.abs(Number(m[1]) - now()) <= 2);
  assert.equal(m[2], timestampMac(t.key, Number(m[1])));
  // The reference client checks the tsm itself (and throws on a bad one).
  Hawk.client.authenticate({ headers: { 'www-authenticate': r.headers['www-authenticate']! } }, t.credentials, artifacts);
});

test('a refused request without a body keeps the connection: the client retries on it', async () => {
  const t = token();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = (ts: number) =>
    new Promise<{ status: number; connection: string | undefined; reused: boolean }>((resolve, reject) => {
      const { header } = Hawk.client.header(`${NODE_URL}/1.5/42/retry`, 'GET', { credentials: t.credentials, timestamp: ts });
      const req = http.get({ host: '127.0.0.1', port: gw.port, path: '/1.5/42/retry', headers: { Authorization: header }, agent }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection, reused: req.reusedSocket }));
      });
      req.on('error', reject);
    });
  try {
    const stale = await get(now() - 3600);
    assert.deepEqual([stale.status, stale.connection], [401, 'keep-alive']);
    const retried = await get(now());
    assert.deepEqual([retried.status, retried.reused], [200, true]);
  } finally {
    agent.destroy();
  }
});

test('a body that does not match its signed hash, or exceeds the limit', async () => {
  const t = token();
  const path = '/1.5/42/storage/h';
  const auth = hawkHeader({ id: t.id, key: t.key, method: 'POST', url: NODE_URL + path, payload: 'signed', contentType: 'text/plain' });
  const bad = await refused(() => send(gw, { method: 'POST', path, body: 'tampered', headers: { Authorization: auth, 'Content-Type': 'text/plain' } }));
  assertError(bad, 401, 'invalid-credentials', /payload hash/);
  const big = 'x'.repeat(HASH_BODY_LIMIT + 1);
  for (const chunked of [false, true]) {
    const a = hawkHeader({ id: t.id, key: t.key, method: 'POST', url: NODE_URL + path, payload: big, contentType: 'text/plain' });
    const r = await refused(() => send(gw, { method: 'POST', path, chunked, body: big, headers: { Authorization: a, 'Content-Type': 'text/plain' } }));
    assertError(r, 413, 'error', /limited to 1024 bytes/);
  }
});

test('Expect: 100-continue: refused before the body is sent, continued once authenticated', async () => {
  const t = token();
  const path = '/1.5/42/continue';
  const expect = (authorization: string): Promise<{ status: number; continued: boolean }> =>
    new Promise((resolve, reject) => {
      let continued = false;
      const req = http.request(`${gw.url}${path}`, {
        method: 'PUT',
        agent: false,
        headers: { Authorization: authorization, Expect: '100-continue', 'Content-Length': '5' },
      });
      req.on('continue', () => {
        continued = true;
        req.end('hello');
      });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, continued }));
      });
      req.on('error', reject);
    });
  assert.deepEqual(await expect('Hawk id="x"'), { status: 400, continued: false });
  assert.deepEqual(await expect(hawkHeader({ id: t.id, key: t.key, method: 'PUT', url: NODE_URL + path })), { status: 200, continued: true });
  assert.equal(seen.at(-1)!.body.toString(), 'hello');
  assert.equal(seen.at(-1)!.headers.expect, undefined);
});

test('oversized headers are refused by the server (431)', async () => {
  const r = await refused(() => send(gw, { path: '/1.5/42/x', headers: { 'X-Big': 'b'.repeat(20_000) } }));
  assert.equal(r.status, 431);
});

// ---- the application node misbehaving ----

test('application slow: 504; client gone: upstream request closed', async () => {
  const t = token();
  const slow = signedSend(gw, t, { path: '/1.5/42/slow' });
  const r = await slow.reply;
  assertError(r, 504, 'error', /unavailable/);
  assert.ok(!r.text.includes('application'), 'no internals in a 5xx body');

  // A client that leaves mid-response takes the upstream request with it.
  const path = '/1.5/42/hold';
  await new Promise<void>((resolve, reject) => {
    const req = http.request(`${gw.url}${path}`, { agent: false, headers: { Authorization: hawkHeader({ id: t.id, key: t.key, method: 'GET', url: NODE_URL + path }) } });
    req.on('response', (res) => {
      res.once('data', () => {
        req.destroy();
        resolve();
      });
    });
    req.on('error', () => {});
    req.on('close', () => resolve());
    setTimeout(() => reject(new Error('no response')), 5000).unref();
    req.end();
  });
  for (let i = 0; i < 100 && !upstreamClosed.includes(path); i++) await new Promise((r) => setTimeout(r, 20));
  assert.ok(upstreamClosed.includes(path), 'the upstream request was not closed');
});

test('a kept-alive connection the application closed: idempotent requests retried once, others 502', async () => {
  // Answers the first request on each connection, drops the connection on the second.
  const perSocket = new WeakMap<object, number>();
  let connections = 0;
  const flaky = http.createServer((req, res) => {
    const n = (perSocket.get(req.socket) ?? 0) + 1;
    perSocket.set(req.socket, n);
    if (n === 1) connections++;
    req.resume();
    if (n > 1) req.socket.destroy();
    else req.on('end', () => res.end('{}'));
  });
  await new Promise<void>((r) => flaky.listen(0, '127.0.0.1', () => r()));
  try {
    const g = await gateway({ UPSTREAM_URL: `http://127.0.0.1:${(flaky.address() as AddressInfo).port}` });
    const t = token();
    assert.equal((await signedSend(g, t, { path: '/1.5/42/a' }).reply).status, 200);
    assert.equal((await signedSend(g, t, { method: 'PUT', path: '/1.5/42/b', body: '{}', contentType: 'application/json', hash: true }).reply).status, 200);
    assert.equal(connections, 2, 'the retry went over a new connection');
    const post = await signedSend(g, t, { method: 'POST', path: '/1.5/42/c', body: '{}', contentType: 'application/json', hash: true }).reply;
    assertError(post, 502, 'error', /unavailable/);
  } finally {
    flaky.closeAllConnections();
    await new Promise((r) => flaky.close(r));
  }
});

test('application down: 502 for requests, 503 for the heartbeat; lbheartbeat stays 200', async () => {
  const up = await gateway();
  const ok = await send(up, { path: '/__heartbeat__' });
  assert.equal(ok.status, 200);
  assert.deepEqual(ok.json(), { status: 'ok', checks: { application: 'ok', nonces: 'ok' } });
  const dead = http.createServer();
  await new Promise<void>((r) => dead.listen(0, '127.0.0.1', () => r()));
  const deadUrl = `http://127.0.0.1:${(dead.address() as AddressInfo).port}`;
  await new Promise((r) => dead.close(r));
  const g = await gateway({ UPSTREAM_URL: deadUrl });
  const r = await signedSend(g, token(), { path: '/1.5/42/x' }).reply;
  assertError(r, 502, 'error', /unavailable/);
  assert.ok(!/ECONNREFUSED|127\.0\.0\.1/.test(r.text), 'no internals in a 5xx body');
  const hb = await send(g, { path: '/__heartbeat__' });
  assertError(hb, 503, 'error', /unavailable/);
  assert.deepEqual(hb.json().checks, { application: 'unavailable', nonces: 'ok' });
  assert.match(hb.headers['retry-after'] ?? '', /^\d+$/);
  const lb = await send(g, { path: '/__lbheartbeat__' });
  assert.equal(lb.status, 200);
});

// ---- observability ----

test('request id: the client’s sane X-Request-Id, else a new one, reaches the application and comes back, on errors too', async () => {
  const given = await signedSend(gw, token(), { path: '/1.5/42/rid', headers: { 'X-Request-Id': 'client-rid-7' } }).reply;
  assert.equal(given.status, 200, given.text);
  assert.equal(given.headers['x-request-id'], 'client-rid-7');
  assert.equal(seen.at(-1)!.headers['x-request-id'], 'client-rid-7');
  const made = await signedSend(gw, token(), { path: '/1.5/42/rid', headers: { 'X-Request-Id': 'not sane!' } }).reply;
  const id = made.headers['x-request-id'];
  assert.match(String(id), /^[0-9a-f-]{36}$/);
  assert.equal(seen.at(-1)!.headers['x-request-id'], id, 'the application sees the same id');
  assert.equal(seen.at(-1)!.rawHeaders.filter((h) => h.toLowerCase() === 'x-request-id').length, 1);
  const refusedReply = await refused(() => send(gw, { path: '/1.5/42/rid', headers: { 'X-Request-Id': 'refused-1' } }));
  assert.equal(refusedReply.status, 401);
  assert.equal(refusedReply.headers['x-request-id'], 'refused-1');
});

test('/__version__ is answered by the gateway itself; /metrics only on GATEWAY_METRICS_PORT', async () => {
  const version = await refused(() => send(gw, { path: '/__version__' }));
  assert.equal(version.status, 200);
  assert.equal(version.json().name, 'tokenserver');
  // On the public port /metrics is an ordinary path: unsigned, refused, and nothing leaks.
  const hidden = await refused(() => send(gw, { path: '/metrics' }));
  assertError(hidden, 401, 'error', /Authorization/);
  assert.equal(gw.metricsPort, undefined, 'off unless configured');
  const g = await gateway({ GATEWAY_METRICS_PORT: '0' });
  assert.equal((await send(g, { path: '/1.5/42/x' })).status, 401);
  const metrics = await refused(() => send({ ...g, port: g.metricsPort! }, { path: '/metrics' }));
  assert.equal(metrics.status, 200);
  assert.match(String(metrics.headers['content-type']), /^text\/plain/);
  assert.match(metrics.text, /^# HELP http_requests_total /m);
  assert.match(metrics.text, /^gateway_rejections_total\{.*reason="Unauthorized".*\} [1-9]/m);
});
