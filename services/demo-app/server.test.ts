import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { isUserDelete, queryObject, startDemoApp, type DemoApp } from './server.js';

let app: DemoApp;
before(async () => {
  app = await startDemoApp({ port: 0 });
});
after(() => app.close());

test('echoes the authenticated caller, method, path, query, body size and forwarded-for', async () => {
  const res = await fetch(`${app.url}/1.5/42/storage/bookmarks?full=1&ids=a&ids=b`, {
    method: 'POST',
    headers: { 'X-Authenticated-Uid': '42', 'X-Authenticated-Node': 'http://node.example', 'X-Forwarded-For': '203.0.113.9' },
    body: 'x'.repeat(1000),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  assert.deepEqual(await res.json(), {
    uid: '42',
    node: 'http://node.example',
    method: 'POST',
    path: '/1.5/42/storage/bookmarks',
    query: { full: '1', ids: ['a', 'b'] },
    bodyBytes: 1000,
    forwardedFor: '203.0.113.9',
  });
});

test('without gateway headers the caller fields are null', async () => {
  const body = (await (await fetch(`${app.url}/anything`)).json()) as Record<string, unknown>;
  assert.equal(body.uid, null);
  assert.equal(body.node, null);
  assert.equal(body.forwardedFor, null);
  assert.equal(body.bodyBytes, 0);
  assert.equal(body.method, 'GET');
});

test('heartbeats answer ok', async () => {
  for (const path of ['/__heartbeat__', '/__lbheartbeat__']) {
    const res = await fetch(`${app.url}${path}`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { status: 'ok' });
  }
});

test('queryObject keeps single values as strings and repeats as arrays', () => {
  assert.deepEqual(queryObject(new URLSearchParams('')), {});
  assert.deepEqual(queryObject(new URLSearchParams('a=1&b=2&a=3&a=4')), { a: ['1', '3', '4'], b: '2' });
});

test("DELETE /<version>/<uid> (the purge deleting a uid's data) answers 204; other DELETEs are echoed", async () => {
  const res = await fetch(`${app.url}/1.5/42`, { method: 'DELETE', headers: { 'X-Authenticated-Uid': '42' } });
  assert.equal(res.status, 204);
  assert.equal(await res.text(), '');
  const other = await fetch(`${app.url}/1.5/42/storage/x`, { method: 'DELETE' });
  assert.equal(other.status, 200);
  assert.equal(((await other.json()) as { method: string }).method, 'DELETE');
});

test('isUserDelete: only DELETE of exactly /<version>/<uid>', () => {
  assert.equal(isUserDelete('DELETE', '/1.5/42'), true);
  assert.equal(isUserDelete('DELETE', '/1.5/42/'), true);
  assert.equal(isUserDelete('GET', '/1.5/42'), false);
  assert.equal(isUserDelete('DELETE', '/1.5/42/storage'), false);
  assert.equal(isUserDelete('DELETE', '/1.5/abc'), false);
  assert.equal(isUserDelete('DELETE', '/42'), false);
});
