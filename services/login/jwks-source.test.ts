// The parts of keys from the provider (DESIGN §13.1) one at a time: what a
// response must be (JSON, not HTML), the discovery document's check, a fetched
// set's import with skipping, the disk copy (0600, atomic, never through a
// link, only for its own source), and the bounded fetch against the provider
// stand-in over real HTTP.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { RemoteJwks } from '../../lib/config.js';
import { LoginMetrics } from '../../lib/metrics.js';
import { capturedLog } from '../../tests/support/log.js';
import { signingKey } from '../../tests/support/oauth.js';
import { startOAuthProvider, type OAuthProvider } from '../../tests/support/oauth-provider.js';
import { eventually, freePort } from '../../tests/support/services.js';
import { discoveredJwksUri, FetchFailure, fetchKeySet, fetchLimited, jwksKeys, parseJsonObject, readCacheFile, startKeySource, writeCacheFile, type KeySource } from './jwks-source.js';
import { importUsableJwks } from './jwks.js';

/** The disk copy tests' files, removed after them. */
const dir = mkdtempSync(path.join(tmpdir(), 'jwks-cache-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A fetched set's settings: `where` (the variable, and the URL or issuer), over the defaults (refreshed hourly, tried again within 30 s, 5 s and 64 KiB per fetch). */
const remoteSettings = (where: Partial<RemoteJwks> & Pick<RemoteJwks, 'variable'>): RemoteJwks => ({
  refreshSeconds: 3600,
  minIntervalSeconds: 30,
  timeoutMs: 5000,
  maxBytes: 65_536,
  waitMs: 5000,
  ...where,
});

const failure = (outcome: string, re?: RegExp) => (e: unknown) => e instanceof FetchFailure && e.outcome === outcome && (!re || re.test(e.message));

describe('parseJsonObject and jwksKeys', () => {
  test('a JSON object passes; HTML, garbage, an array, a set without keys fail as malformed', () => {
    assert.deepEqual(parseJsonObject('{"keys": []}', 'application/json; charset=utf-8', 'the key set'), { keys: [] });
    // The content type is not required to be JSON (some providers send text/plain), only not HTML.
    assert.deepEqual(parseJsonObject('{"a": 1}', '', 'the key set'), { a: 1 });
    assert.throws(() => parseJsonObject('{"keys": []}', 'text/html', 'the key set'), failure('malformed', /the key set is text\/html, not JSON/));
    assert.throws(() => parseJsonObject('<html>', 'text/plain', 'the key set'), failure('malformed', /not JSON \(text\/plain\)/));
    assert.throws(() => parseJsonObject('[1]', 'application/json', 'the key set'), failure('malformed', /not a JSON object/));
    assert.throws(() => parseJsonObject('null', 'application/json', 'x'), failure('malformed'));
    assert.deepEqual(jwksKeys({ keys: [1] }), [1]);
    assert.throws(() => jwksKeys({ keys: {} }), failure('malformed', /no "keys" array/));
    assert.throws(() => jwksKeys({}), failure('malformed'));
  });
});

describe('discoveredJwksUri', () => {
  const issuer = 'https://accounts.firefox.com';
  test('the issuer exactly, and a jwks_uri keys may come from', () => {
    assert.equal(discoveredJwksUri({ issuer, jwks_uri: 'https://oauth.accounts.firefox.com/v1/jwks' }, issuer), 'https://oauth.accounts.firefox.com/v1/jwks');
    assert.throws(() => discoveredJwksUri({ issuer: `${issuer}/`, jwks_uri: 'https://a/' }, issuer), failure('issuer-mismatch', /names issuer "https:\/\/accounts\.firefox\.com\/"/));
    assert.throws(() => discoveredJwksUri({ issuer: 'https://ACCOUNTS.firefox.com', jwks_uri: 'https://a/' }, issuer), failure('issuer-mismatch'));
    assert.throws(() => discoveredJwksUri({ jwks_uri: 'https://a/' }, issuer), failure('issuer-mismatch', /names issuer none/));
    assert.throws(() => discoveredJwksUri({ issuer }, issuer), failure('malformed', /no "jwks_uri"/));
    assert.throws(() => discoveredJwksUri({ issuer, jwks_uri: 'http://oauth.accounts.firefox.com/v1/jwks' }, issuer), failure('malformed', /loopback/));
    assert.throws(() => discoveredJwksUri({ issuer, jwks_uri: 42 }, issuer), failure('malformed'));
  });
});

describe('importUsableJwks: a fetched set, key by key', () => {
  test('usable keys kept (extra members ignored), every other one skipped with its kid and why', async () => {
    const good = (await signingKey('RS256', '2019-07-30-15e473fd')).publicJwk;
    const ec = (await signingKey('ES256', 'ec-1')).publicJwk;
    const weak = { ...(generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'jwk' }) as object), kid: 'weak' };
    const p384 = { ...(generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey.export({ format: 'jwk' }) as object), kid: 'p384' };
    const set = [good, weak, { kty: 'oct', kid: 'hmac', k: 'c2VjcmV0' }, 'a string', { kid: 'no-kty' }, p384, ec];
    const { keys, usable, skipped } = importUsableJwks(set, ['RS256']);
    assert.equal(keys.length, 1);
    assert.equal(keys[0].kid, '2019-07-30-15e473fd');
    assert.deepEqual(usable, [good]);
    assert.deepEqual(
      skipped.map((s) => [s.index, s.kid]),
      [[1, 'weak'], [2, 'hmac'], [3, undefined], [4, 'no-kty'], [5, 'p384'], [6, 'ec-1']],
    );
    assert.match(skipped[0].reason, /at least 2048 bits/);
    assert.match(skipped[1].reason, /kty oct is not one of RS256/);
    assert.match(skipped[2].reason, /not a JSON object/);
    assert.match(skipped[3].reason, /no "kty"/);
    assert.match(skipped[4].reason, /not one of RS256/);
    const both = importUsableJwks(set, ['RS256', 'ES256']);
    assert.deepEqual(both.keys.map((k) => k.kid), ['2019-07-30-15e473fd', 'ec-1']);
    assert.match(both.skipped.find((s) => s.kid === 'p384')!.reason, /P-256/);
    assert.deepEqual(importUsableJwks([], ['RS256']), { keys: [], usable: [], skipped: [] });
  });
});

describe('the disk copy', () => {
  test('written 0600, whole, over a link without following it; read only for its own source', () => {
    const file = path.join(dir, 'oauth-jwks.json');
    const target = path.join(dir, 'elsewhere');
    writeFileSync(target, 'keep');
    symlinkSync(target, file);
    const doc = { source: 'https://accounts.firefox.com', fetched_at: 1_700_000_000_000, keys: [{ kty: 'RSA', kid: 'k' }] };
    writeCacheFile(file, doc);
    assert.equal(readFileSync(target, 'utf8'), 'keep');
    assert.ok(lstatSync(file).isFile());
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.deepEqual(readCacheFile(file, 'https://accounts.firefox.com'), doc);
    assert.deepEqual(readdirSync(dir).sort(), ['elsewhere', 'oauth-jwks.json'], 'no temporary file left');
    assert.throws(() => readCacheFile(file, 'https://other.example'), /holds the keys of "https:\/\/accounts\.firefox\.com", not of "https:\/\/other\.example"/);
    // A link in its place is not read through.
    const linked = path.join(dir, 'linked.json');
    symlinkSync(file, linked);
    assert.throws(() => readCacheFile(linked, 'https://accounts.firefox.com'), (e: NodeJS.ErrnoException) => e.code === 'ELOOP');
    writeFileSync(path.join(dir, 'bad.json'), '{"keys": "no"}');
    assert.throws(() => readCacheFile(path.join(dir, 'bad.json'), 'x'), /not a key set copy/);
    assert.throws(() => readCacheFile(path.join(dir, 'missing.json'), 'x'), (e: NodeJS.ErrnoException) => e.code === 'ENOENT');
  });
});

describe('fetchLimited against the provider stand-in', () => {
  let p: OAuthProvider;
  let other: OAuthProvider;
  const limits = { timeoutMs: 5000, maxBytes: 65_536 };
  before(async () => {
    p = await startOAuthProvider({ keys: [await signingKey('RS256', 'k1')] });
    other = await startOAuthProvider({ keys: [] });
  });
  after(async () => {
    await p.close();
    await other.close();
  });

  test('200: the body and its content type', async () => {
    const got = await fetchLimited(p.jwksUri, limits);
    assert.equal(JSON.parse(got.text).keys[0].kid, 'k1');
    assert.match(got.contentType, /application\/json/);
  });

  test('a redirect within the origin is followed; to another origin it is a failure', async () => {
    p.fail('moved');
    assert.equal(JSON.parse((await fetchLimited(p.jwksUri, limits)).text).keys[0].kid, 'k1');
    p.fail('redirect', { location: other.jwksUri });
    const before = other.fetchCount();
    await assert.rejects(fetchLimited(p.jwksUri, limits), failure('redirect', /redirected to another origin/));
    assert.equal(other.fetchCount(), before, 'the other origin is never asked');
    p.fail(null);
  });

  test('too large, by its Content-Length or as it streams; a status; a cut connection; a timeout', async () => {
    p.fail('huge');
    await assert.rejects(fetchLimited(p.jwksUri, limits), failure('too-large', /more than 65536 bytes/));
    p.fail('status');
    await assert.rejects(fetchLimited(p.jwksUri, limits), failure('status', /HTTP 500/));
    p.fail('down');
    await assert.rejects(fetchLimited(p.jwksUri, limits), failure('unreachable', /127\.0\.0\.1/));
    p.fail('hang');
    const started = Date.now();
    await assert.rejects(fetchLimited(p.jwksUri, { ...limits, timeoutMs: 300 }), failure('timeout', /within 300 ms/));
    assert.ok(Date.now() - started < 4000);
    p.fail(null);
    // A declared length beyond the cap is refused before the body is read.
    await assert.rejects(fetchLimited(p.jwksUri, { ...limits, maxBytes: 10 }), failure('too-large', /sent \d+ bytes, more than 10/));
  });
});

// Found missing by mutation testing (npm run mutation -- services/login/jwks.ts).

describe('importUsableJwks: found missing by mutation testing', () => {
  test('null is skipped as not an object; the reason is the rule alone; a long kid is cut to 100 characters', () => {
    const long = 'k'.repeat(150);
    const { keys, skipped } = importUsableJwks([null, { kty: 'oct', kid: long, k: 'c2VjcmV0' }], ['RS256']);
    assert.deepEqual(keys, []);
    assert.deepEqual(skipped, [
      { index: 0, reason: 'not a JSON object' },
      { index: 1, kid: long.slice(0, 100), reason: 'kty oct is not one of RS256' },
    ]);
  });
});

// Found missing by mutation testing (npm run mutation -- services/login/jwks-source.ts).

describe('parseJsonObject, discoveredJwksUri and FetchFailure: found missing by mutation testing', () => {
  test('a JSON string or number is not an object; the media type is read case-blind, and its absence named', () => {
    assert.throws(() => parseJsonObject('"keys"', 'application/json', 'the key set'), failure('malformed', /the key set is not a JSON object/));
    assert.throws(() => parseJsonObject('42', 'application/json', 'the key set'), failure('malformed', /not a JSON object/));
    assert.throws(() => parseJsonObject('{}', ' Text/HTML ; charset=utf-8', 'the key set'), failure('malformed', /^the key set is text\/html, not JSON$/));
    assert.throws(() => parseJsonObject('<p>', '', 'the key set'), failure('malformed', /^the key set is not JSON \(no content type\)$/));
    const e = new FetchFailure('timeout', 'slow');
    assert.equal(e.name, 'FetchFailure');
    assert.equal(e.message, 'slow');
  });

  test('a mismatched issuer is quoted, cut to 200 characters', () => {
    const issuer = 'https://accounts.firefox.com';
    const long = `https://${'a'.repeat(300)}`;
    assert.throws(
      () => discoveredJwksUri({ issuer: long, jwks_uri: 'https://a/' }, issuer),
      (e: unknown) => e instanceof FetchFailure && e.message === `the discovery document names issuer ${JSON.stringify(long.slice(0, 200))}, not "${issuer}"`,
    );
  });
});

describe('the disk copy: found missing by mutation testing', () => {
  test('null, a number or a copy without fetched_at is not a copy; a source that is not a string is named, not a crash', () => {
    const file = path.join(dir, 'copy.json');
    for (const text of ['null', '42', '{"keys": [], "source": "x"}', '{"keys": [], "source": "x", "fetched_at": "today"}']) {
      writeFileSync(file, text);
      assert.throws(() => readCacheFile(file, 'x'), /^Error: not a key set copy$/, text);
    }
    writeFileSync(file, JSON.stringify({ keys: [], source: 42, fetched_at: 1 }));
    assert.throws(() => readCacheFile(file, 'x'), /holds the keys of "42", not of "x"/);
    writeFileSync(file, JSON.stringify({ keys: [], source: 's'.repeat(300), fetched_at: 1 }));
    assert.throws(() => readCacheFile(file, 'x'), /holds the keys of "s{200}", not of "x"/);
  });

  test('a write whose rename fails throws and leaves no temporary file', () => {
    // A non-empty directory where the copy goes: the rename over it fails.
    const file = path.join(dir, 'occupied');
    mkdirSync(path.join(file, 'inside'), { recursive: true });
    assert.throws(() => writeCacheFile(file, { source: 'x', fetched_at: 1, keys: [] }), (e: NodeJS.ErrnoException) => e.code === 'EISDIR' || e.code === 'ENOTEMPTY');
    assert.deepEqual(readdirSync(dir).filter((f) => f.endsWith('.tmp')), []);
  });
});

describe('fetchLimited at its limits: found missing by mutation testing', () => {
  /** What the next request gets; `seen` holds each request's path and Accept header. */
  let respond: (req: http.IncomingMessage, res: http.ServerResponse) => void = (_req, res) => res.end();
  const seen: Array<{ url: string; accept: string | undefined }> = [];
  const server = http.createServer((req, res) => {
    seen.push({ url: req.url!, accept: req.headers.accept });
    respond(req, res);
  });
  let base: string;
  const limits = { timeoutMs: 5000, maxBytes: 100 };
  before(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  test('exactly maxBytes passes, by Content-Length and streamed; one more byte is too large; no content type reads as ""', async () => {
    for (const chunked of [false, true]) {
      for (const size of [100, 101]) {
        respond = (_req, res) => {
          if (chunked) res.write('x'.repeat(size - 1));
          res.end(chunked ? 'x' : 'x'.repeat(size));
        };
        const got = fetchLimited(`${base}/keys`, limits);
        if (size === 100) assert.deepEqual(await got, { text: 'x'.repeat(100), contentType: '' });
        else await assert.rejects(got, failure('too-large', chunked ? /sent more than 100 bytes/ : /sent 101 bytes, more than 100/));
      }
    }
    assert.equal(seen.at(-1)!.accept, 'application/json');
  });

  test('three redirects within the origin are followed, a fourth is not; 300 is a redirect too', async () => {
    respond = (req, res) => {
      const hop = Number(req.url!.slice(1));
      if (hop < 3) res.writeHead(hop === 0 ? 300 : 302, { location: `/${hop + 1}` }).end();
      else res.end('{}');
    };
    assert.equal((await fetchLimited(`${base}/0`, limits)).text, '{}');
    await assert.rejects(fetchLimited(`${base}/-1`, limits), failure('redirect', /^more than 3 redirects$/));
  });

  test('a redirect to nowhere, or to a Location that is no URL, fails; 400 is a status, not a redirect', async () => {
    respond = (_req, res) => res.writeHead(301).end();
    await assert.rejects(fetchLimited(`${base}/`, limits), failure('redirect', /redirected to nowhere usable$/));
    respond = (_req, res) => res.writeHead(301, { location: 'http://[::1' }).end();
    await assert.rejects(fetchLimited(`${base}/`, limits), failure('redirect', /redirected to nowhere usable$/));
    respond = (_req, res) => res.writeHead(400, { location: '/elsewhere' }).end();
    await assert.rejects(fetchLimited(`${base}/bad`, limits), failure('status', /\/bad answered HTTP 400$/));
  });

  test('a refused connection names the error code', async () => {
    const port = await freePort();
    await assert.rejects(fetchLimited(`http://127.0.0.1:${port}/keys`, limits), failure('unreachable', new RegExp(`^http://127\\.0\\.0\\.1:${port}: ECONNREFUSED$`)));
  });
});

describe('fetchKeySet: found missing by mutation testing', () => {
  test('discovery, then the set (or the set alone for a URL); each failure names the document at fault', async () => {
    const p = await startOAuthProvider({ keys: [await signingKey('RS256', 'k1')] });
    const byDiscovery = remoteSettings({ variable: 'OAUTH_ISSUER', discoveryIssuer: p.issuer });
    const byUrl = { ...byDiscovery, variable: 'OAUTH_JWKS', discoveryIssuer: undefined, jwksUrl: p.jwksUri };
    const quoted = p.jwksUri.replace(/[.]/g, '\\.');
    try {
      const got = await fetchKeySet(byDiscovery, ['RS256']);
      assert.equal(got.url, p.jwksUri);
      assert.deepEqual(got.keys.map((k) => k.kid), ['k1']);
      assert.equal(got.usable.length, 1);
      assert.deepEqual(got.skipped, []);
      const discoveries = p.discoveryCount();
      assert.equal((await fetchKeySet(byUrl, ['RS256'])).url, p.jwksUri);
      assert.equal(p.discoveryCount(), discoveries, 'a URL needs no discovery');
      p.fail('garbage');
      await assert.rejects(fetchKeySet(byDiscovery, ['RS256']), failure('malformed', /^the discovery document is not JSON/));
      await assert.rejects(fetchKeySet(byUrl, ['RS256']), failure('malformed', /^the key set is not JSON/));
      p.fail('symmetric-keys');
      await assert.rejects(fetchKeySet(byUrl, ['RS256']), failure('no-usable-key', new RegExp(`^${quoted} holds no usable key \\(1 skipped: kty oct is not one of RS256\\)$`)));
      p.fail(null);
      p.setKeys([]);
      await assert.rejects(fetchKeySet(byUrl, ['RS256']), failure('no-usable-key', new RegExp(`^${quoted} holds no usable key \\(0 skipped: none there\\)$`)));
    } finally {
      await p.close();
    }
  });
});

describe('the key source: what it logs', () => {
  // What an operator reads when keys from the provider go wrong: which set, from where, why, and for
  // how long the last good set has been kept. Never a key's material: the kids alone.
  let p: OAuthProvider;
  let good: Awaited<ReturnType<typeof signingKey>>;
  before(async () => {
    good = await signingKey('RS256', 'k1');
    p = await startOAuthProvider({ keys: [good] });
  });
  after(() => p.close());

  type Seconds = Partial<Pick<RemoteJwks, 'refreshSeconds' | 'minIntervalSeconds'>>;
  /** A source started on `cache`, its lines, and the lines with `msg`. */
  async function started(cache: string | undefined, seconds: Seconds = {}) {
    const { log, lines } = capturedLog();
    const remote = remoteSettings({ variable: 'OAUTH_JWKS', jwksUrl: p.jwksUri, cache, ...seconds });
    const source = await startKeySource({ remote }, 'OAUTH_JWKS', { set: 'oauth', algorithms: ['RS256'], log, metrics: new LoginMetrics() });
    return { source, lines, withMsg: (msg: string) => lines.filter((l) => l.msg === msg) };
  }
  const fields = (line: Record<string, any>, ...names: string[]) => Object.fromEntries(names.map((n) => [n, line[n]]));
  let sources: KeySource[] = [];
  const stopAll = () => {
    for (const s of sources) s.close();
    sources = [];
  };

  test('a first start: no copy yet (info), each skipped key with its index, kid and why (warn), the set fetched with its kids and reason', async (t) => {
    t.after(stopAll);
    p.fail(null);
    p.setKeys([good, { kty: 'oct', kid: 'hmac', k: 'c2VjcmV0' }]);
    const file = path.join(dir, 'log-first.json');
    const { source, lines, withMsg } = await started(file);
    sources.push(source);
    const [none] = withMsg('no cached key set yet');
    assert.equal(none.level, 30);
    assert.deepEqual(fields(none, 'set', 'variable', 'file'), { set: 'oauth', variable: 'OAUTH_JWKS', file });
    const [skipped] = withMsg('key of the fetched set skipped');
    assert.equal(skipped.level, 40);
    assert.deepEqual(fields(skipped, 'set', 'variable', 'url', 'key', 'kid'), { set: 'oauth', variable: 'OAUTH_JWKS', url: p.jwksUri, key: 1, kid: 'hmac' });
    assert.match(skipped.reason, /kty oct is not one of RS256/);
    const [fetched] = withMsg('key set fetched');
    assert.equal(fetched.level, 30);
    assert.deepEqual(fields(fetched, 'set', 'variable', 'url', 'reason', 'keys', 'kids'), { set: 'oauth', variable: 'OAUTH_JWKS', url: p.jwksUri, reason: 'start', keys: 1, kids: ['k1'] });
    assert.equal(lines.length, 3, JSON.stringify(lines));
    const all = JSON.stringify(lines);
    assert.ok(!all.includes(String(good.publicJwk.n)) && !all.includes('c2VjcmV0'), 'no key material in the lines');
  });

  test('a restart from the copy with the provider down: the copy read (info, its keys and age), then the failed fetch, the last good set kept (warn)', async (t) => {
    t.after(stopAll);
    p.setKeys([good]);
    const file = path.join(dir, 'log-restart.json');
    // A copy written 90 s ago, as the source writes it.
    const fetchedAt = Date.now() - 90_000;
    writeCacheFile(file, { source: p.jwksUri, fetched_at: fetchedAt, keys: [good.publicJwk] });
    p.fail('down');
    const { source, withMsg } = await started(file);
    sources.push(source);
    const [read] = withMsg('cached key set read');
    assert.equal(read.level, 30);
    assert.deepEqual(fields(read, 'set', 'variable', 'file', 'keys', 'fetchedAt'), { set: 'oauth', variable: 'OAUTH_JWKS', file, keys: 1, fetchedAt: new Date(fetchedAt).toISOString() });
    const [kept] = withMsg('key set fetch failed; the last good set stays');
    assert.equal(kept.level, 40);
    assert.deepEqual(fields(kept, 'set', 'variable', 'reason', 'outcome'), { set: 'oauth', variable: 'OAUTH_JWKS', reason: 'start', outcome: 'unreachable' });
    assert.match(kept.err, /^http:\/\/127\.0\.0\.1:\d+: /);
    assert.ok(kept.keptSetAgeSeconds >= 90 && kept.keptSetAgeSeconds <= 95, `kept for ${kept.keptSetAgeSeconds} s`);
    p.fail(null);
  });

  test('no copy and no provider: the failed fetch says 503 until the next try (warn), with no kept set; the try after it is a retry', async (t) => {
    t.after(stopAll);
    p.fail('down');
    const { source, withMsg, lines } = await started(undefined, { minIntervalSeconds: 0.2 });
    sources.push(source);
    const [failed] = withMsg('key set fetch failed; no key set yet (answering 503), trying again within 0.2 s');
    assert.equal(failed.level, 40);
    assert.deepEqual(fields(failed, 'set', 'variable', 'reason', 'outcome'), { set: 'oauth', variable: 'OAUTH_JWKS', reason: 'start', outcome: 'unreachable' });
    assert.ok(!('keptSetAgeSeconds' in failed));
    p.fail(null);
    await eventually('the retry', () => withMsg('key set fetched').length === 1);
    assert.equal(withMsg('key set fetched')[0].reason, 'retry');
    assert.deepEqual(
      lines.map((l) => l.msg),
      ['key set fetch failed; no key set yet (answering 503), trying again within 0.2 s', 'key set fetched'],
      'no copy configured: nothing said of one',
    );
  });

  test('the background fetch of a fresh set is a refresh; the fetch for an unknown kid says so', async (t) => {
    t.after(stopAll);
    p.fail(null);
    const { source, withMsg } = await started(undefined, { refreshSeconds: 0.2, minIntervalSeconds: 0.1 });
    sources.push(source);
    await eventually('a refresh', () => withMsg('key set fetched').some((l) => l.reason === 'refresh'));
    // Refreshed only each hour, so the next fetch is the one for the unknown kid, once the minimum interval has passed.
    const hourly = await started(undefined, { minIntervalSeconds: 0.1 });
    sources.push(hourly.source);
    await new Promise((r) => setTimeout(r, 150));
    await hourly.source.refreshForUnknownKid();
    assert.deepEqual(hourly.withMsg('key set fetched').map((l) => l.reason), ['start', 'unknown-kid']);
  });

  test('a copy not used: unreadable (its error), or with no usable key; a copy not written (its error code)', async (t) => {
    t.after(stopAll);
    p.fail(null);
    const garbage = path.join(dir, 'log-garbage.json');
    writeFileSync(garbage, 'not json', { mode: 0o600 });
    const a = await started(garbage);
    sources.push(a.source);
    const [notUsed] = a.withMsg('cached key set not used');
    assert.equal(notUsed.level, 40);
    assert.deepEqual(fields(notUsed, 'set', 'variable', 'file'), { set: 'oauth', variable: 'OAUTH_JWKS', file: garbage });
    assert.equal(typeof notUsed.err, 'string');
    assert.ok(notUsed.err.length > 0);

    const unusable = path.join(dir, 'log-unusable.json');
    writeCacheFile(unusable, { source: p.jwksUri, fetched_at: Date.now(), keys: [{ kty: 'oct', kid: 'hmac', k: 'c2VjcmV0' }] });
    p.fail('down');
    const b = await started(unusable);
    sources.push(b.source);
    const [noKey] = b.withMsg('cached key set not used: no usable key in it');
    assert.equal(noKey.level, 40);
    assert.deepEqual(fields(noKey, 'set', 'variable', 'file'), { set: 'oauth', variable: 'OAUTH_JWKS', file: unusable });
    assert.equal(b.source.keys, undefined);
    p.fail(null);

    const nowhere = path.join(dir, 'no-such-dir', 'copy.json');
    const c = await started(nowhere);
    sources.push(c.source);
    const [notWritten] = c.withMsg('key set not written to its cache file');
    assert.equal(notWritten.level, 40);
    assert.deepEqual(fields(notWritten, 'set', 'file', 'err'), { set: 'oauth', file: nowhere, err: 'ENOENT' });
    assert.deepEqual(c.source.keys?.map((k) => k.kid), ['k1'], 'the fetched set is used all the same');
  });

  // Found missing by mutation testing (npm run mutation -- --lines 212-372 --with tests/provider-keys.test.ts).
  test('a key without a kid is logged as null, a kid over 100 characters cut; the set is fetched and its copy written', async (t) => {
    t.after(stopAll);
    p.fail(null);
    const { kid: _, ...noKid } = good.publicJwk;
    const longKid = 'k'.repeat(150);
    p.setKeys([noKid, { ...good.publicJwk, kid: longKid }]);
    const file = path.join(dir, 'log-kids.json');
    const { source, withMsg } = await started(file);
    sources.push(source);
    const [fetched] = withMsg('key set fetched');
    assert.deepEqual(fields(fetched, 'reason', 'keys', 'kids'), { reason: 'start', keys: 2, kids: [null, 'k'.repeat(100)] });
    assert.deepEqual(withMsg('key set fetch failed; the last good set stays'), []);
    assert.deepEqual(source.keys?.map((k) => k.kid), [undefined, longKid]);
    assert.equal(readCacheFile(file, p.jwksUri).keys.length, 2, 'the copy is written');
    p.setKeys([good]);
  });
});
