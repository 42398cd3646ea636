// Request smuggling through the gateway (issue #13, items 1 to 3), over raw sockets:
// a real gateway in front of a real node:http application that records every
// request it parses. Whatever bytes a client sends, the application must parse
// exactly the requests the client was authorised for, each with one framing header.
import { afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gatewayConfig } from '../lib/config.js';
import { hawkHeader } from '../lib/hawk.js';
import { makeToken, nodeSecrets } from '../lib/token.js';
import { startGateway, type Gateway } from '../services/node-gateway/server.js';
import { rawExchange } from './support/services.js';

const NODE_URL = 'http://node-1.example:8443';
const MASTERS = [randomBytes(32).toString('hex')];
const ATTACKER = 1;
const VICTIM = 2;

interface Parsed {
  method: string;
  url: string;
  uid: string | undefined;
  rawHeaders: string[];
  body: string;
}

/** The application: node:http, keep-alive, records every request its parser yields. */
async function recordingApp(): Promise<{ server: http.Server; url: string; parsed: Parsed[] }> {
  const parsed: Parsed[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      parsed.push({
        method: req.method!,
        url: req.url!,
        uid: req.headers['x-authenticated-uid'] as string | undefined,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks).toString('latin1'),
      });
      res.end(JSON.stringify({ method: req.method, uid: req.headers['x-authenticated-uid'] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, parsed };
}

interface Setup {
  gateway: Gateway;
  parsed: Parsed[];
  /** Stops the gateway (closing its upstream connections) and waits until the application has parsed all it got. */
  settle(): Promise<void>;
}

const running: Setup[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.settle();
});

async function setup(): Promise<Setup> {
  const app = await recordingApp();
  const gateway = await startGateway(gatewayConfig({ NODE_URL, UPSTREAM_URL: app.url, MASTER_SECRETS: MASTERS.join(','), GATEWAY_PORT: '0' }));
  let settled: Promise<void> | undefined;
  const s: Setup = {
    gateway,
    parsed: app.parsed,
    // The app's server closes once every connection has ended, so every byte the gateway sent has been parsed.
    settle: () => (settled ??= gateway.close().then(() => new Promise<void>((resolve) => app.server.close(() => resolve())))),
  };
  running.push(s);
  return s;
}

function authorization(method: string, path: string, uid = ATTACKER): string {
  const secret = nodeSecrets(MASTERS, NODE_URL)[0];
  const t = makeToken({ uid, node: NODE_URL, expires: Math.floor(Date.now() / 1000) + 300, salt: 'a1b2c3' }, secret);
  return hawkHeader({ id: t.id, key: t.key, method, url: NODE_URL + path });
}

/** Sends raw bytes and reads until the gateway closes the connection; returns the status of every response (bodies here are short JSON). */
async function exchange(port: number, bytes: string): Promise<number[]> {
  const { text } = await rawExchange(port, bytes);
  return [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
}

/** The victim's request, as an attacker would hide it in a body. */
const SMUGGLED = `DELETE /1.5/${VICTIM}/storage HTTP/1.1\r\nHost: app\r\nX-Authenticated-Uid: ${VICTIM}\r\nContent-Length: 0\r\n\r\n`;

function headerCount(p: Parsed, name: string): number {
  return p.rawHeaders.filter((h, i) => i % 2 === 0 && h.toLowerCase() === name).length;
}

/** The one authorised request arrived, as itself, with its body and exactly one framing header. */
function assertOnlyAuthorised(s: Setup, method: string, path: string, body: string): void {
  assert.deepEqual(
    s.parsed.map((p) => `${p.method} ${p.url} uid=${p.uid}`),
    [`${method} ${path} uid=${ATTACKER}`],
    'the application parsed other requests than the authorised one',
  );
  const p = s.parsed[0];
  assert.equal(p.body, body);
  assert.equal(headerCount(p, 'content-length') + headerCount(p, 'transfer-encoding'), 1, `one framing header: ${p.rawHeaders.join(' ')}`);
}

const METHODS = ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH'];

describe('a body cannot become a second request at the application', () => {
  for (const method of METHODS) {
    test(`${method} with Transfer-Encoding: chunked`, async () => {
      const s = await setup();
      const path = `/1.5/${ATTACKER}/storage/x`;
      const chunk = SMUGGLED.length.toString(16);
      const statuses = await exchange(
        s.gateway.port,
        `${method} ${path} HTTP/1.1\r\nHost: node-1.example:8443\r\nAuthorization: ${authorization(method, path)}\r\n` +
          `Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunk}\r\n${SMUGGLED}\r\n0\r\n\r\n`,
      );
      await s.settle();
      assert.deepEqual(statuses, [200]);
      assertOnlyAuthorised(s, method, path, SMUGGLED);
    });

    test(`${method} with Content-Length named by Connection`, async () => {
      const s = await setup();
      const path = `/1.5/${ATTACKER}/storage/y`;
      const statuses = await exchange(
        s.gateway.port,
        `${method} ${path} HTTP/1.1\r\nHost: node-1.example:8443\r\nAuthorization: ${authorization(method, path)}\r\n` +
          `Content-Length: ${SMUGGLED.length}\r\nConnection: close, Content-Length, Transfer-Encoding, Host, X-Authenticated-Uid\r\n\r\n${SMUGGLED}`,
      );
      await s.settle();
      assert.deepEqual(statuses, [200]);
      assertOnlyAuthorised(s, method, path, SMUGGLED);
      assert.equal(headerCount(s.parsed[0], 'host'), 1, 'Connection cannot remove Host');
    });

    test(`${method} followed by a pipelined forged request`, async () => {
      const s = await setup();
      const path = `/1.5/${ATTACKER}/storage/z`;
      const statuses = await exchange(
        s.gateway.port,
        `${method} ${path} HTTP/1.1\r\nHost: node-1.example:8443\r\nAuthorization: ${authorization(method, path)}\r\nContent-Length: 0\r\n\r\n` +
          SMUGGLED.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'),
      );
      await s.settle();
      assert.deepEqual(statuses, [200, 401]);
      assert.deepEqual(
        s.parsed.map((p) => `${p.method} ${p.url} uid=${p.uid}`),
        [`${method} ${path} uid=${ATTACKER}`],
      );
    });
  }
});

describe('ambiguous framing is refused before anything is forwarded', () => {
  const path = `/1.5/${ATTACKER}/storage/w`;
  const head = (method: string, version = '1.1'): string =>
    `${method} ${path} HTTP/${version}\r\nHost: node-1.example:8443\r\nAuthorization: ${authorization(method, path)}\r\n`;
  const body = `${SMUGGLED.length.toString(16)}\r\n${SMUGGLED}\r\n0\r\n\r\n`;
  const cases: Record<string, string> = {
    'Transfer-Encoding and Content-Length': `${head('POST')}Transfer-Encoding: chunked\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    'a coding other than chunked alone': `${head('POST')}Transfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n${body}`,
    'two Transfer-Encoding headers': `${head('POST')}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${body}`,
    'two Content-Length headers': `${head('POST')}Content-Length: 3\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc`,
    'Transfer-Encoding in HTTP/1.0': `${head('GET', '1.0')}Transfer-Encoding: chunked\r\n\r\n${body}`,
  };
  for (const [name, bytes] of Object.entries(cases)) {
    test(name, async () => {
      const s = await setup();
      const statuses = await exchange(s.gateway.port, bytes);
      await s.settle();
      assert.deepEqual(statuses, [400]);
      assert.deepEqual(s.parsed, []);
    });
  }
});

describe('client headers that resemble the gateway\'s (item 2)', () => {
  const path = `/1.5/${ATTACKER}/storage/h`;
  const head = (): string => `GET ${path} HTTP/1.1\r\nAuthorization: ${authorization('GET', path)}\r\n`;

  test('names with "_" and identity or address claims never reach the application', async () => {
    const s = await setup();
    const claims = ['X_Authenticated_Uid', 'x-authenticated_uid', 'X_Forwarded_For', 'X-Real-IP', 'True-Client-IP', 'X-Client-IP', 'CF-Connecting-IP', 'X-Original-URL', 'X-Rewrite-URL', 'X-HTTP-Method-Override'];
    const statuses = await exchange(s.gateway.port, `${head()}Host: h\r\n${claims.map((c) => `${c}: /1.5/${VICTIM}/storage`).join('\r\n')}\r\nX-Kept: yes\r\nConnection: close\r\n\r\n`);
    await s.settle();
    assert.deepEqual(statuses, [200]);
    assert.equal(s.parsed.length, 1);
    const names = s.parsed[0].rawHeaders.filter((_, i) => i % 2 === 0);
    assert.deepEqual(names.filter((n) => n.includes('_') || claims.some((c) => c.toLowerCase() === n.toLowerCase())), []);
    assert.ok(!s.parsed[0].rawHeaders.some((v) => v.includes(`/${VICTIM}/`)));
    assert.equal(s.parsed[0].uid, String(ATTACKER));
    assert.ok(names.includes('X-Kept'));
  });

  for (const [name, value] of [['Host', 'h'], ['Content-Type', 'text/plain'], ['Content-Length', '0'], ['Authorization', 'Hawk id="x"']]) {
    test(`a repeated ${name} is 400`, async () => {
      const s = await setup();
      const extra = name === 'Host' ? '' : 'Host: h\r\n';
      const statuses = await exchange(s.gateway.port, `${head()}${extra}${name}: ${value}\r\n${name.toLowerCase()}: ${value}\r\nConnection: close\r\n\r\n`);
      await s.settle();
      assert.deepEqual(statuses, [400]);
      assert.deepEqual(s.parsed, []);
    });
  }
});

describe('encoded traversal (item 3)', () => {
  for (const rest of ['..%2F2/storage', '%2e%2e%2f2/storage', '%2E%2E/2/storage', '..;/2/storage', '..%5c2/storage', '..%5C..%5C1.5%5C2', 'x%00/../2']) {
    const path = `/1.5/${ATTACKER}/${rest}`;
    test(path, async () => {
      const s = await setup();
      const statuses = await exchange(s.gateway.port, `GET ${path} HTTP/1.1\r\nHost: h\r\nAuthorization: ${authorization('GET', path)}\r\nConnection: close\r\n\r\n`);
      await s.settle();
      assert.deepEqual(statuses, [400]);
      assert.deepEqual(s.parsed, []);
    });
  }
});

describe('requests without a body', () => {
  for (const method of METHODS) {
    test(`${method} without a body reaches the application without one`, async () => {
      const s = await setup();
      const path = `/1.5/${ATTACKER}/storage/v`;
      const statuses = await exchange(s.gateway.port, `${method} ${path} HTTP/1.1\r\nHost: h\r\nAuthorization: ${authorization(method, path)}\r\nConnection: close\r\n\r\n`);
      await s.settle();
      assert.deepEqual(statuses, [200]);
      assert.equal(s.parsed.length, 1);
      assert.equal(s.parsed[0].body, '');
      assert.equal(headerCount(s.parsed[0], 'transfer-encoding'), 0);
      assert.ok(headerCount(s.parsed[0], 'content-length') <= 1);
    });
  }
});
