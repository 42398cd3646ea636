import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Koa from 'koa';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { InvalidCredentials, MethodNotAllowed, NotAcceptable, ServiceUnavailable } from '../../lib/errors.js';
import { errorHandler } from './error-handler.js';
import { httpRequest } from './testkit.js';

let server: Server;
let base: string;
const logged: unknown[] = [];

before(async () => {
  const log = pino({ level: 'info' }, { write: (line: string) => logged.push(JSON.parse(line)) });
  const app = new Koa();
  app.use(errorHandler({ log, challenges: ['Assertion', 'BrowserID'] }));
  app.use(async (ctx) => {
    switch (ctx.path) {
      case '/unauthorized':
        throw new InvalidCredentials('bad signature');
      case '/unavailable':
        throw new ServiceUnavailable('directory at 10.0.0.7:50051 refused', 7);
      case '/method':
        throw new MethodNotAllowed(['GET', 'HEAD']);
      case '/accept':
        throw new NotAcceptable('JSON only');
      case '/crash':
        throw new Error('db password is hunter2');
      case '/koa-400':
        ctx.throw(400, 'raw koa message');
      default:
        ctx.body = 'fine';
    }
  });
  server = createServer(app.callback());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => new Promise<void>((r) => server.close(() => r())));

test("a 4xx protocol error: its status string and Mozilla's entry as JSON, one challenge header per scheme on 401", async () => {
  const res = await httpRequest(`${base}/unauthorized`);
  assert.equal(res.status, 401);
  assert.equal(res.header('content-type'), 'application/json');
  assert.deepEqual(res.json, { status: 'invalid-credentials', errors: [{ location: 'body', name: '', description: 'Unauthorized' }] });
  assert.deepEqual(res.headers.get('www-authenticate'), ['Assertion', 'BrowserID']);
});

test('an error Mozilla does not make keeps its own entry', async () => {
  const res = await httpRequest(`${base}/accept`);
  assert.equal(res.status, 406);
  assert.deepEqual(res.json, { status: 'error', errors: [{ location: 'header', name: 'Accept', description: 'JSON only' }] });
});

test("an error's headers are copied (Allow, Retry-After); a 5xx body hides its description", async () => {
  const m = await httpRequest(`${base}/method`);
  assert.equal(m.status, 405);
  assert.equal(m.header('allow'), 'GET, HEAD');
  const u = await httpRequest(`${base}/unavailable`);
  assert.equal(u.status, 503);
  assert.equal(u.header('retry-after'), '7');
  assert.equal(u.json.status, 'error');
  assert.doesNotMatch(u.text, /10\.0\.0\.7/);
  assert.equal(u.headers.get('www-authenticate'), undefined);
});

test('an unknown error: generic 500 body, details only in the log', async () => {
  const res = await httpRequest(`${base}/crash`);
  assert.equal(res.status, 500);
  assert.equal(res.json.status, 'error');
  assert.doesNotMatch(res.text, /hunter2/);
  assert.ok(JSON.stringify(logged).includes('hunter2'), 'the cause is logged');
});

test("Koa's own http errors map onto our classes by status", async () => {
  const res = await httpRequest(`${base}/koa-400`);
  assert.equal(res.status, 400);
  assert.equal(res.json.status, 'error');
  assert.equal(res.json.errors.length, 1);
});
