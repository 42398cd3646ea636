// Where Bearer's and the webhook's keys come from (DESIGN §9.1, §13.1): a file
// path or a URL, OAUTH_ISSUER alone by discovery, the URL rule (https://, or
// http:// to loopback), the refresh settings, and what turns Bearer on.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { bearerConfig, DEFAULTS, discoveryUrl, isLoopbackHost, jwksConfig, loginConfig, remoteUrlProblem, webhookConfig, type Env } from './config.js';
import { refused } from './testkit.js';


const LOGIN: Env = { APPLICATIONS: 'sync/1.5', MASTER_SECRETS: randomBytes(48).toString('hex'), INTERNAL_SECRET: randomBytes(32).toString('hex') };

describe('remoteUrlProblem: the URL rule', () => {
  test('https:// anywhere, http:// only to loopback', () => {
    for (const ok of ['https://oauth.accounts.firefox.com/v1/jwks', 'https://accounts.firefox.com', 'http://127.0.0.1:9000/v1/jwks', 'http://localhost/jwks', 'http://[::1]:8080/', 'http://127.1.2.3/', 'http://id.localhost/']) {
      assert.equal(remoteUrlProblem(ok), undefined, ok);
    }
    assert.match(remoteUrlProblem('http://accounts.example/v1/jwks')!, /only to a loopback host.*accounts\.example/);
    assert.match(remoteUrlProblem('http://10.0.0.1/')!, /only to a loopback host/);
    assert.match(remoteUrlProblem('http://127.0.0.1.evil.example/')!, /only to a loopback host/);
    assert.match(remoteUrlProblem('http://localhost.evil.example/')!, /only to a loopback host/);
    assert.match(remoteUrlProblem('ftp://accounts.example/jwks')!, /must be an https:\/\/ URL, got ftp:/);
    assert.match(remoteUrlProblem('https://user:pw@accounts.example/')!, /user or password/);
    assert.match(remoteUrlProblem('not a url')!, /is not a URL/);
  });

  test('isLoopbackHost', () => {
    assert.ok(isLoopbackHost('LOCALHOST'));
    assert.ok(isLoopbackHost('127.0.0.1'));
    assert.ok(isLoopbackHost('[::1]'));
    assert.ok(!isLoopbackHost('::1.example'));
    assert.ok(!isLoopbackHost('128.0.0.1'));
  });

  test('discoveryUrl: the issuer without a trailing slash, then the well-known path', () => {
    assert.equal(discoveryUrl('https://accounts.firefox.com'), 'https://accounts.firefox.com/.well-known/openid-configuration');
    assert.equal(discoveryUrl('https://idp.example/tenant/'), 'https://idp.example/tenant/.well-known/openid-configuration');
  });
});

describe('jwksConfig: a file path or a URL', () => {
  test('a path is read now; a URL is kept with its refresh settings and cache; another scheme is refused', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'config-jwks-'));
    try {
      const file = path.join(dir, 'jwks.json');
      writeFileSync(file, JSON.stringify({ keys: [{ kty: 'RSA', n: 'x', e: 'AQAB' }] }));
      assert.deepEqual(jwksConfig({ OAUTH_JWKS: file }, 'OAUTH_JWKS', 'OAUTH_JWKS_CACHE'), { file, keys: [{ kty: 'RSA', n: 'x', e: 'AQAB' }] });
      assert.equal(jwksConfig({}, 'OAUTH_JWKS', 'OAUTH_JWKS_CACHE'), undefined);
      const remote = jwksConfig({ OAUTH_JWKS: 'https://oauth.accounts.firefox.com/v1/jwks', OAUTH_JWKS_CACHE: 'data/k.json' }, 'OAUTH_JWKS', 'OAUTH_JWKS_CACHE');
      assert.deepEqual(remote, {
        remote: {
          variable: 'OAUTH_JWKS',
          jwksUrl: 'https://oauth.accounts.firefox.com/v1/jwks',
          cache: path.resolve('data/k.json'),
          refreshSeconds: DEFAULTS.OAUTH_JWKS_REFRESH,
          minIntervalSeconds: DEFAULTS.OAUTH_JWKS_MIN_INTERVAL,
          timeoutMs: DEFAULTS.OAUTH_JWKS_TIMEOUT_MS,
          maxBytes: DEFAULTS.OAUTH_JWKS_MAX_BYTES,
          waitMs: DEFAULTS.OAUTH_JWKS_WAIT_MS,
        },
      });
      const tuned = jwksConfig({ WEBHOOK_JWKS: 'http://127.0.0.1:1/jwks', OAUTH_JWKS_REFRESH: '600', OAUTH_JWKS_MIN_INTERVAL: '5' }, 'WEBHOOK_JWKS', 'WEBHOOK_JWKS_CACHE');
      assert.ok(tuned && 'remote' in tuned);
      assert.equal(tuned.remote.refreshSeconds, 600);
      assert.equal(tuned.remote.minIntervalSeconds, 5);
      assert.equal(tuned.remote.cache, undefined);
      refused(() => jwksConfig({ OAUTH_JWKS: 'http://accounts.example/jwks' }, 'OAUTH_JWKS', 'OAUTH_JWKS_CACHE'), 'OAUTH_JWKS', /loopback/);
      refused(() => jwksConfig({ WEBHOOK_JWKS: 'file:///etc/jwks.json' }, 'WEBHOOK_JWKS', 'WEBHOOK_JWKS_CACHE'), 'WEBHOOK_JWKS', /https:\/\//);
      refused(() => jwksConfig({ OAUTH_JWKS: 'https://a.example/', OAUTH_JWKS_REFRESH: '0' }, 'OAUTH_JWKS', 'OAUTH_JWKS_CACHE'), 'OAUTH_JWKS_REFRESH');
      refused(() => jwksConfig({ OAUTH_JWKS: 'https://a.example/', OAUTH_JWKS_MIN_INTERVAL: 'soon' }, 'OAUTH_JWKS', 'OAUTH_JWKS_CACHE'), 'OAUTH_JWKS_MIN_INTERVAL');
      refused(() => jwksConfig({ OAUTH_JWKS: path.join(dir, 'missing.json') }, 'OAUTH_JWKS', 'OAUTH_JWKS_CACHE'), 'OAUTH_JWKS', /cannot read/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('bearerConfig: OAUTH_JWKS, or OAUTH_ISSUER alone', () => {
  test('OAUTH_ISSUER alone: keys by discovery of that issuer, and Bearer on', () => {
    const bearer = bearerConfig({ OAUTH_ISSUER: 'https://accounts.firefox.com' });
    assert.ok(bearer && 'remote' in bearer.jwks);
    assert.equal(bearer.jwks.remote.discoveryIssuer, 'https://accounts.firefox.com');
    assert.equal(bearer.jwks.remote.jwksUrl, undefined);
    assert.equal(bearer.jwks.remote.variable, 'OAUTH_ISSUER');
    assert.equal(bearer.issuer, 'https://accounts.firefox.com');
  });

  test('OAUTH_JWKS wins over discovery; OAUTH_ISSUER is then only the iss required', () => {
    const bearer = bearerConfig({ OAUTH_ISSUER: 'https://accounts.firefox.com', OAUTH_JWKS: 'https://oauth.accounts.firefox.com/v1/jwks' });
    assert.ok(bearer && 'remote' in bearer.jwks);
    assert.equal(bearer.jwks.remote.jwksUrl, 'https://oauth.accounts.firefox.com/v1/jwks');
    assert.equal(bearer.jwks.remote.discoveryIssuer, undefined);
  });

  test('neither: Bearer off; an issuer discovery cannot reach safely: refused naming OAUTH_ISSUER', () => {
    assert.equal(bearerConfig({}), undefined);
    refused(() => bearerConfig({ OAUTH_ISSUER: 'http://accounts.example' }), 'OAUTH_ISSUER', /loopback.*discovery/);
    // With OAUTH_JWKS set, OAUTH_ISSUER is only compared with iss: any string.
    assert.equal(bearerConfig({ OAUTH_ISSUER: 'http://accounts.example', OAUTH_JWKS: 'https://a.example/jwks' })?.issuer, 'http://accounts.example');
  });

  test('webhookConfig: WEBHOOK_JWKS as a URL; never by discovery', () => {
    const hook = webhookConfig({ WEBHOOK_JWKS: 'https://hooks.example/jwks', WEBHOOK_AUDIENCE: 'https://aud', WEBHOOK_JWKS_CACHE: '/var/lib/t/webhook-jwks.json' });
    assert.ok(hook && 'remote' in hook.jwks);
    assert.equal(hook.jwks.remote.cache, '/var/lib/t/webhook-jwks.json');
    assert.equal(webhookConfig({ OAUTH_ISSUER: 'https://accounts.firefox.com', WEBHOOK_AUDIENCE: 'https://aud' }), undefined);
  });

  test('loginConfig: OAUTH_ISSUER alone is a scheme, and needs METRICS_HASH_SECRET', () => {
    refused(() => loginConfig(LOGIN), 'TRUSTED_ISSUERS', /OAUTH_JWKS or OAUTH_ISSUER/);
    refused(() => loginConfig({ ...LOGIN, OAUTH_ISSUER: 'https://accounts.firefox.com' }), 'METRICS_HASH_SECRET', /OAUTH_JWKS or OAUTH_ISSUER/);
    const config = loginConfig({ ...LOGIN, OAUTH_ISSUER: 'https://accounts.firefox.com', METRICS_HASH_SECRET: 'a-metrics-secret' });
    assert.ok(config.bearer);
    assert.equal(config.trustedIssuers.size, 0);
  });
});

// ---- found missing by mutation testing (npm run mutation -- lib/config.ts) ----

describe('OAUTH_JWKS and its cache: trimmed; the URL form only at the start', () => {
  test('the value and the cache are trimmed; a blank cache is none', () => {
    const remote = jwksConfig({ OAUTH_JWKS: '  https://a.example/jwks  ', OAUTH_JWKS_CACHE: '  /var/lib/t/jwks.json  ' }, 'OAUTH_JWKS', 'OAUTH_JWKS_CACHE');
    assert.ok(remote && 'remote' in remote);
    assert.equal(remote.remote.jwksUrl, 'https://a.example/jwks');
    assert.equal(remote.remote.cache, '/var/lib/t/jwks.json');
    const uncached = jwksConfig({ OAUTH_JWKS: 'https://a.example/jwks', OAUTH_JWKS_CACHE: '  ' }, 'OAUTH_JWKS', 'OAUTH_JWKS_CACHE');
    assert.ok(uncached && 'remote' in uncached);
    assert.equal(uncached.remote.cache, undefined);
  });

  test('Bearer keeps its fetched keys at OAUTH_JWKS_CACHE, from a JWKS URL or by discovery', () => {
    for (const env of [{ OAUTH_JWKS: 'https://a.example/jwks' }, { OAUTH_ISSUER: 'https://a.example' }]) {
      const bearer = bearerConfig({ ...env, OAUTH_JWKS_CACHE: '/var/lib/t/jwks.json' });
      assert.ok(bearer && 'remote' in bearer.jwks);
      assert.equal(bearer.jwks.remote.cache, '/var/lib/t/jwks.json', JSON.stringify(env));
    }
  });

  test('a file path with "a://" inside it is still a path', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'config-jwks-'));
    try {
      mkdirSync(path.join(dir, 'a:'));
      writeFileSync(path.join(dir, 'a:', 'jwks.json'), JSON.stringify({ keys: [{ kty: 'RSA', n: 'x', e: 'AQAB' }] }));
      const file = `${dir}/a://jwks.json`;
      assert.deepEqual(jwksConfig({ OAUTH_JWKS: file }, 'OAUTH_JWKS', 'OAUTH_JWKS_CACHE'), { file, keys: [{ kty: 'RSA', n: 'x', e: 'AQAB' }] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
