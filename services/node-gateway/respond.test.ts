// The gateway's one place that turns errors into responses, over real HTTP:
// each route of a plain node:http server fails in one way and calls sendError.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { InvalidCredentials, InvalidTimestamp, ServiceUnavailable } from '../../lib/errors.js';
import { capturedLog } from '../../tests/support/log.js';
import { eventually, rawExchange } from '../../tests/support/services.js';
import { hasUnreadBody, sendError } from './respond.js';

const { log, lines: logged } = capturedLog();
let server: http.Server;
let port: number;

/** Resolves once the client's end of this request's connection is gone. */
function socketGone(req: http.IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    const check = () => (req.socket.destroyed ? resolve() : setTimeout(check, 5));
    check();
  });
}

before(async () => {
  server = http.createServer(async (req, res) => {
    const extra = { 'X-Request-Id': 'req-1' };
    switch (req.url) {
      case '/refused':
        return sendError(res, new InvalidCredentials('token signature does not match'), log, extra);
      case '/stale':
        return sendError(res, new InvalidTimestamp('stale timestamp', { headers: { 'WWW-Authenticate': 'Hawk ts="1", tsm="x", error="Stale timestamp"' } }), log);
      case '/unavailable':
        return sendError(res, new ServiceUnavailable('redis at 10.0.0.9 refused', 4), log);
      case '/crash':
        return sendError(res, new Error('secret internals'), log);
      case '/unread-body':
        // The body is never read: the connection cannot carry another request.
        return sendError(res, new InvalidCredentials('no'), log);
      case '/mid-response':
        res.writeHead(200, { 'Content-Length': '100' });
        res.write('partial');
        // As when the application fails later in its reply: the first bytes have gone out.
        await new Promise((r) => setTimeout(r, 20));
        return sendError(res, new Error('upstream reset'), log);
      case '/ended':
        res.end('done');
        return sendError(res, new Error('too late'), log);
      case '/ended-null':
        res.end('done');
        return sendError(res, null, log);
      case '/client-gone':
        await socketGone(req);
        return sendError(res, new InvalidCredentials('nobody to tell'), log);
      default:
        res.end('fine');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});

after(() => new Promise<void>((r) => server.close(() => r())));

/** Raw requests on one connection: everything until the server closes it or `waitMs` pass. */
const exchange = (raw: string, waitMs = 1000) => rawExchange(port, raw, { waitMs });

const get = (p: string) => `GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`;
const linesFor = (msg: string) => logged.filter((l) => l.msg === msg);

function parse(text: string): { status: number; headers: Record<string, string>; body: string } {
  const [head, body] = text.split('\r\n\r\n');
  const [statusLine, ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body };
}

test('a refusal: status, status string and detail as JSON, X-Timestamp, the Hawk challenge on 401, the extra headers', async () => {
  const before = Math.floor(Date.now() / 1000);
  const { text } = await exchange(get('/refused'), 300);
  const r = parse(text);
  assert.equal(r.status, 401);
  const body = JSON.stringify({ status: 'invalid-credentials', errors: [{ location: 'header', name: 'Authorization', description: 'token signature does not match' }] });
  assert.equal(r.body, body);
  assert.equal(r.headers['content-type'], 'application/json');
  assert.equal(r.headers['content-length'], String(Buffer.byteLength(body)));
  assert.equal(r.headers['cache-control'], 'no-store');
  assert.equal(r.headers['www-authenticate'], 'Hawk');
  assert.equal(r.headers['x-request-id'], 'req-1');
  const ts = Number(r.headers['x-timestamp']);
  assert.ok(ts >= before && ts <= before + 5, `X-Timestamp in seconds (${ts})`);
  assert.equal(r.headers.connection, 'keep-alive', 'a request read whole leaves the connection open');
  const line = linesFor('request refused').at(-1);
  assert.deepEqual([line?.level, line?.status, line?.reason], [20, 401, 'token signature does not match']);
});

test("a 401's own challenge is kept (the stale-timestamp one)", async () => {
  const r = parse((await exchange(get('/stale'), 300)).text);
  assert.equal(r.status, 401);
  assert.equal(r.headers['www-authenticate'], 'Hawk ts="1", tsm="x", error="Stale timestamp"');
});

test('a 5xx: no description, its Retry-After, a warning with the reason; anything else: a 500 and an error line', async () => {
  const u = parse((await exchange(get('/unavailable'), 300)).text);
  assert.equal(u.status, 503);
  assert.equal(u.headers['retry-after'], '4');
  assert.equal(u.headers['www-authenticate'], undefined, 'no challenge on a 503');
  assert.equal(u.body, JSON.stringify({ status: 'error', errors: [{ location: 'internal', name: '', description: 'the service is unavailable, try again later' }] }));
  const warned = linesFor('request failed').at(-1);
  assert.deepEqual([warned?.level, warned?.status, warned?.reason], [40, 503, 'redis at 10.0.0.9 refused']);

  const c = parse((await exchange(get('/crash'), 300)).text);
  assert.equal(c.status, 500);
  assert.doesNotMatch(c.body, /secret internals/);
  const failed = linesFor('request failed unexpectedly').at(-1);
  assert.equal(failed?.level, 50);
  assert.match(JSON.stringify(failed), /secret internals/);
});

test('a request whose body was not read is answered with Connection: close; one without a body keeps the connection', async () => {
  for (const framing of ['Content-Length: 10', 'Transfer-Encoding: chunked']) {
    const { text, closed } = await exchange(`POST /unread-body HTTP/1.1\r\nHost: x\r\n${framing}\r\n\r\n`);
    const r = parse(text);
    assert.equal(r.status, 401, framing);
    assert.equal(r.headers.connection, 'close', framing);
    assert.ok(closed, `the server closes the connection (${framing})`);
  }
  const empty = await exchange(`POST /unread-body HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n${get('/other')}`, 300);
  assert.equal(empty.closed, false);
  assert.match(empty.text, /^HTTP\/1\.1 401 [^]*HTTP\/1\.1 200 /, 'the next request on the connection is served');
});

test('hasUnreadBody: a complete request has none; else its framing says, and framing the gateway refuses counts as a body', () => {
  const req = (complete: boolean, rawHeaders: string[], httpVersion = '1.1') => ({ complete, rawHeaders, httpVersion }) as unknown as http.IncomingMessage;
  assert.equal(hasUnreadBody(req(true, ['Content-Length', '10'])), false);
  assert.equal(hasUnreadBody(req(false, ['Host', 'x'])), false);
  assert.equal(hasUnreadBody(req(false, ['Content-Length', '0'])), false);
  assert.equal(hasUnreadBody(req(false, ['Content-Length', '10'])), true);
  assert.equal(hasUnreadBody(req(false, ['Transfer-Encoding', 'chunked'])), true);
  assert.equal(hasUnreadBody(req(false, ['Transfer-Encoding', 'chunked'], '1.0')), true, 'refused framing: where the next request starts is unknown');
});

test('mid-response, the connection is cut; once answered, or with the client gone, nothing more is sent', async () => {
  const cut = await exchange(get('/mid-response'));
  assert.ok(cut.closed, 'the connection is cut');
  assert.match(cut.text, /^HTTP\/1\.1 200 /);
  assert.ok(cut.text.endsWith('partial'), 'no error body after the partial reply');

  const before = linesFor('client went away').length;
  // The answered request leaves the connection open: the next request on it is served.
  const done = await exchange(get('/ended') + get('/other'), 300);
  assert.equal(done.closed, false);
  assert.equal(done.text.match(/HTTP\/1\.1 200 /g)?.length, 2, done.text);
  assert.doesNotMatch(done.text, /too late/);
  assert.equal(linesFor('client went away').length, before + 1);
  assert.equal(linesFor('client went away').at(-1)?.reason, 'too late');
  // Anything may have been thrown, null included.
  const nothing = await exchange(get('/ended-null') + get('/other'), 300);
  assert.equal(nothing.text.match(/HTTP\/1\.1 200 /g)?.length, 2, nothing.text);
  assert.equal(linesFor('client went away').length, before + 2);

  const s = connect(port, '127.0.0.1', () => {
    s.write(get('/client-gone'));
    setTimeout(() => s.destroy(), 50);
  });
  await eventually('the gone client is logged', () => linesFor('client went away').some((l) => l.reason === 'nobody to tell'), { timeoutMs: 3000, pollMs: 20 });
  assert.equal(linesFor('client went away').at(-1)?.reason, 'nobody to tell');
});
