// serverCloser through real HTTP: what a request being answered gets when its server closes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { listen, serverCloser } from './listen.js';

/** A server whose answers wait until release() (each request calls `arrived`). */
async function slowServer(arrived: () => void) {
  const waiting: Array<() => void> = [];
  const server = http.createServer((_req, res) => {
    waiting.push(() => res.end('done'));
    arrived();
  });
  const close = serverCloser(server);
  const port = await listen(server, 0, '127.0.0.1');
  return { port, close, release: () => waiting.splice(0).forEach((f) => f()) };
}

function get(port: number, agent: http.Agent): Promise<{ status: number; connection?: string; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, agent }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection, body }));
      })
      .on('error', reject);
  });
}

test('serverCloser with a grace: new connections refused at once, the request being answered finishes with Connection: close', async () => {
  let arrivedOne!: () => void;
  const arrived = new Promise<void>((r) => (arrivedOne = r));
  const s = await slowServer(() => arrivedOne());
  const agent = new http.Agent({ keepAlive: true });
  const pending = get(s.port, agent);
  await arrived;
  let closed = false;
  const closing = s.close(10_000).then(() => (closed = true));
  await assert.rejects(get(s.port, new http.Agent()), { code: 'ECONNREFUSED' });
  assert.equal(closed, false, 'waits for the answer');
  s.release();
  const res = await pending;
  assert.deepEqual(res, { status: 200, connection: 'close', body: 'done' });
  await closing;
  agent.destroy();
});

test('serverCloser without a grace (or once it runs out): the request being answered is cut', async () => {
  for (const grace of [0, 100]) {
    let arrivedOne!: () => void;
    const arrived = new Promise<void>((r) => (arrivedOne = r));
    const s = await slowServer(() => arrivedOne());
    const pending = get(s.port, new http.Agent());
    await arrived;
    const started = Date.now();
    await s.close(grace);
    assert.ok(Date.now() - started < grace + 1000);
    await assert.rejects(pending, /socket hang up/);
  }
});

test('serverCloser: idle keep-alive connections do not hold the close up', async () => {
  const s = await slowServer(() => s.release());
  const agent = new http.Agent({ keepAlive: true });
  assert.equal((await get(s.port, agent)).status, 200);
  const started = Date.now();
  await s.close(10_000);
  assert.ok(Date.now() - started < 1000, `closed after ${Date.now() - started} ms`);
  agent.destroy();
});
