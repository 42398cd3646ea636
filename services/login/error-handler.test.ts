import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Koa from 'koa';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InvalidCredentials, MethodNotAllowed, NotAcceptable, ServiceUnavailable } from '../../lib/errors.js';
import { errorHandler } from './error-handler.js';
import { httpRequest } from './testkit.js';
import { capturedLog } from '../../tests/support/log.js';

let server: Server;
let base: string;
const { log, lines: logged } = capturedLog('info');

before(async () => {
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
      case '/koa-404':
        ctx.throw(404, 'raw koa message');
      case '/koa-413':
        ctx.throw(413, 'raw koa message');
      case '/koa-499':
        ctx.throw(499, 'raw koa message');
      case '/koa-500':
        ctx.throw(500, 'koa internal detail');
      case '/throw-null':
        throw null;
      case '/status-302':
        throw Object.assign(new Error('a redirect some library reported'), { status: 302 });
      case '/status-string':
        throw Object.assign(new Error('a status that is a string'), { status: '404' });
      case '/throw-string':
        throw 'a thrown string';
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

// Found missing by mutation testing: each mapping of a non-protocol error, and which line each kind of failure logs.

/** The log lines of one path's failures. */
const linesFor = (p: string) => logged.filter((l) => l.path === p);

test("Koa's http errors: 404, 413 and any other 4xx as ours, with a fixed description; any other status (a 5xx, a 3xx, a string) as an internal fault", async () => {
  const entry = (location: string, description: string) => ({ location, name: '', description });
  const cases: Array<[string, number, object]> = [
    ['/koa-400', 400, entry('internal', 'the request could not be processed')],
    ['/koa-404', 404, entry('url', 'no such endpoint')],
    ['/koa-413', 413, entry('body', 'the request could not be processed')],
    ['/koa-499', 400, entry('internal', 'the request could not be processed')],
    ['/koa-500', 500, entry('internal', 'Server error')],
    ['/status-302', 500, entry('internal', 'Server error')],
    ['/status-string', 500, entry('internal', 'Server error')],
  ];
  for (const [p, status, e] of cases) {
    const res = await httpRequest(`${base}${p}`);
    assert.equal(res.status, status, p);
    assert.deepEqual(res.json, { status: 'error', errors: [e] }, p);
    assert.doesNotMatch(res.text, /raw koa message|internal detail/, p);
  }
  assert.equal(linesFor('/koa-400').length, 0, 'a refusal is not an error line (the access line has it)');
  const [fault] = linesFor('/koa-500');
  assert.equal(fault?.level, 50);
  assert.match(JSON.stringify(fault), /koa internal detail/);
});

test('anything thrown that is not an Error (null, a string) is a 500 with its cause logged', async () => {
  for (const p of ['/throw-null', '/throw-string']) {
    const res = await httpRequest(`${base}${p}`);
    assert.equal(res.status, 500, p);
    assert.deepEqual(res.json, { status: 'error', errors: [{ location: 'internal', name: '', description: 'Server error' }] }, p);
    const lines = linesFor(p);
    assert.equal(lines.length, 1, p);
    assert.deepEqual([lines[0].level, lines[0].msg], [50, 'request failed unexpectedly'], p);
  }
  assert.match(JSON.stringify(linesFor('/throw-string')), /a thrown string/);
});

test('log lines: an unexpected fault at error, a protocol 5xx at warn with its reason and class, a 4xx none', async () => {
  await httpRequest(`${base}/crash`);
  await httpRequest(`${base}/unavailable`);
  await httpRequest(`${base}/unauthorized`);
  const crash = linesFor('/crash');
  assert.deepEqual([crash.at(-1)?.level, crash.at(-1)?.msg], [50, 'request failed unexpectedly']);
  const unavailable = linesFor('/unavailable').at(-1);
  assert.deepEqual(
    [unavailable?.level, unavailable?.msg, unavailable?.err, unavailable?.class],
    [40, 'request failed', 'directory at 10.0.0.7:50051 refused', 'ServiceUnavailable'],
  );
  assert.equal(linesFor('/unauthorized').length, 0);
});
