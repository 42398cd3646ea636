// TRUSTED_ISSUERS parsing (DESIGN §10) and the lifetime limits of loginConfig.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEFAULTS, issuerHostName, loginConfig, parseTrustedIssuers } from './config.js';
import { ConfigError } from './errors.js';

const KEY = { kty: 'EC', crv: 'P-256', x: 'x', y: 'y' };

test('issuerHostName: a host name, host:port or URL gives its host name; anything else null', () => {
  assert.equal(issuerHostName('idp.example'), 'idp.example');
  assert.equal(issuerHostName('IdP.Example'), 'idp.example');
  assert.equal(issuerHostName('idp.example:8443'), 'idp.example');
  assert.equal(issuerHostName('https://Accounts.Example/oauth'), 'accounts.example');
  assert.equal(issuerHostName('idp.example/path'), null, 'a bare name with a path');
  assert.equal(issuerHostName('not a host'), null);
  assert.equal(issuerHostName('https://'), null);
  assert.equal(issuerHostName('b\u00fccher.example'), null, 'an IDN issuer lists its domains explicitly');
});

test('parseTrustedIssuers: domains default to the issuer host name; listed ones are normalised; "*" kept', () => {
  const issuers = parseTrustedIssuers({
    'idp.example': { keys: [KEY] },
    'https://login.corp.example/': { keys: [KEY], domains: ['Corp.Example', 'e\u0301.example'] },
    'dev-idp.localhost': { keys: [KEY], domains: ['*'] },
  });
  assert.deepEqual(issuers.get('idp.example'), { keys: [KEY], domains: ['idp.example'] });
  assert.deepEqual(issuers.get('https://login.corp.example/')?.domains, ['corp.example', '\u00e9.example']);
  assert.deepEqual(issuers.get('dev-idp.localhost')?.domains, ['*']);
});

test('parseTrustedIssuers: keys in BrowserID support-document form ({"algorithm": …}) are taken beside JWKs; login checks them', () => {
  const rs = { algorithm: 'RS', n: '123', e: '65537' };
  const ds = { algorithm: 'DS', p: 'ff', q: 'f', g: '2', y: '3' };
  assert.deepEqual(parseTrustedIssuers({ 'idp.example': { keys: [KEY, rs, ds] } }).get('idp.example')?.keys, [KEY, rs, ds]);
});

test('parseTrustedIssuers: bad documents, keys or domains stop the service naming the variable', () => {
  const bad: unknown[] = [
    null,
    [],
    { 'idp.example': {} },
    { 'idp.example': { keys: [] } },
    { 'idp.example': { keys: [{}] } },
    { 'idp.example': { keys: [null] } },
    { 'idp.example': { keys: [{ algorithm: 7 }] } },
    { 'idp.example': { keys: [{ kty: 7, algorithm: 'RS' }] } },
    { 'not a host': { keys: [KEY] } },
    { 'idp.example': { keys: [KEY], domains: [] } },
    { 'idp.example': { keys: [KEY], domains: 'idp.example' } },
    { 'idp.example': { keys: [KEY], domains: [''] } },
    { 'idp.example': { keys: [KEY], domains: [7] } },
    { 'idp.example': { keys: [KEY], domains: ['*.idp.example'] } },
    { 'idp.example': { keys: [KEY], domains: ['a@idp.example'] } },
    { 'idp.example': { keys: [KEY], domains: ['idp .example'] } },
    { 'idp.example': { keys: [KEY], domains: ['x'.repeat(256)] } },
  ];
  for (const doc of bad) {
    assert.throws(() => parseTrustedIssuers(doc), (e) => e instanceof ConfigError && e.variable === 'TRUSTED_ISSUERS', JSON.stringify(doc)?.slice(0, 60));
  }
});

test('loginConfig: a TRUSTED_ISSUERS file replaces the issuers the embedded stack offers', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'config-issuers-'));
  try {
    const file = path.join(dir, 'issuers.json');
    writeFileSync(file, JSON.stringify({ 'idp.example': { keys: [KEY] } }));
    const env = { AUDIENCES: 'https://t.example', MASTER_SECRETS: randomBytes(32).toString('hex'), INTERNAL_SECRET: randomBytes(32).toString('hex') };
    const dev = new Map([['dev-idp.localhost', { keys: [KEY], domains: ['*'] }]]);
    assert.deepEqual([...loginConfig({ ...env, TRUSTED_ISSUERS: file }, { trustedIssuers: dev }).trustedIssuers.keys()], ['idp.example']);
    assert.deepEqual([...loginConfig(env, { trustedIssuers: dev }).trustedIssuers.keys()], ['dev-idp.localhost']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('loginConfig: MAX_ASSERTION_LIFETIME and MAX_CERTIFICATE_LIFETIME, defaults 600 s and 24 h', () => {
  const env = { AUDIENCES: 'https://t.example', MASTER_SECRETS: randomBytes(32).toString('hex'), INTERNAL_SECRET: randomBytes(32).toString('hex') };
  const overrides = { trustedIssuers: new Map([['idp.example', { keys: [KEY], domains: ['idp.example'] }]]) };
  const c = loginConfig(env, overrides);
  assert.equal(c.maxAssertionLifetime, DEFAULTS.MAX_ASSERTION_LIFETIME);
  assert.equal(c.maxCertificateLifetime, DEFAULTS.MAX_CERTIFICATE_LIFETIME);
  assert.equal(DEFAULTS.MAX_ASSERTION_LIFETIME, 600);
  assert.equal(DEFAULTS.MAX_CERTIFICATE_LIFETIME, 86_400);
  const set = loginConfig({ ...env, MAX_ASSERTION_LIFETIME: '120', MAX_CERTIFICATE_LIFETIME: '3600' }, overrides);
  assert.deepEqual([set.maxAssertionLifetime, set.maxCertificateLifetime], [120, 3600]);
  for (const name of ['MAX_ASSERTION_LIFETIME', 'MAX_CERTIFICATE_LIFETIME']) {
    for (const v of ['0', '-1', 'soon', '1.5']) {
      assert.throws(() => loginConfig({ ...env, [name]: v }, overrides), (e) => e instanceof ConfigError && e.variable === name, `${name}=${v}`);
    }
  }
});

// ---- found missing by mutation testing (npm run mutation -- lib/config.ts) ----

test('issuerHostName: a URL without a host is null', () => {
  assert.equal(issuerHostName('file:///etc/idp'), null);
});
