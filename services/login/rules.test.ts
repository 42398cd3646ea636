import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MOZILLA_ERRORS, NotFound } from '../../lib/errors.js';
import { accountId, acceptsJson, apiEndpoint, hashedAccountId, hashedDeviceId, isKnownApplication, isValidClientState, keyId, tokenDuration, tokenPayload, unsupportedApplication } from './rules.js';

test('isKnownApplication: name and version must both be configured', () => {
  const apps = new Map([['sync', new Set(['1.5'])]]);
  assert.equal(isKnownApplication(apps, 'sync', '1.5'), true);
  assert.equal(isKnownApplication(apps, 'sync', '1.0'), false);
  assert.equal(isKnownApplication(apps, 'notes', '1.5'), false);
});

test("unsupportedApplication: Mozilla's answer for an unknown application, or for an unknown version of a known one", () => {
  const apps = new Map([['sync', new Set(['1.5'])]]);
  const app = unsupportedApplication(apps, 'notes', '1.5');
  assert.ok(app instanceof NotFound);
  assert.deepEqual(app.answer, MOZILLA_ERRORS.unsupportedApplication.entry);
  const version = unsupportedApplication(apps, 'sync', '1.2');
  assert.ok(version instanceof NotFound);
  assert.deepEqual(version.answer, { location: 'url', name: '1.2', description: 'Unsupported application version' });
});

test('acceptsJson: absent, JSON and wildcards pass; other types and q=0 do not', () => {
  for (const a of [undefined, '', 'application/json', 'text/html, application/json;q=0.5', '*/*', 'application/*', 'Application/JSON', 'text/plain;q=1, */*;q=0.1']) {
    assert.equal(acceptsJson(a), true, String(a));
  }
  for (const a of ['text/html', 'application/xml', 'application/json;q=0', 'text/*', '*/*;q=0.0', 'application/jsonx']) {
    assert.equal(acceptsJson(a), false, a);
  }
});

test('isValidClientState: absent or empty is none; otherwise the DESIGN pattern', () => {
  for (const v of [undefined, '', 'aaaa', 'A.b_c-1', 'f'.repeat(32)]) assert.equal(isValidClientState(v), true, String(v));
  for (const v of ['f'.repeat(33), 'a b', 'a/b', 'é', 'a,b']) assert.equal(isValidClientState(v), false, v);
});

test('tokenDuration: only 0 < N < configured shortens; invalid values are ignored', () => {
  assert.equal(tokenDuration('60', 3600), 60);
  assert.equal(tokenDuration('1', 3600), 1);
  for (const q of [undefined, '', '0', '3600', '7200', '-5', '1.5', 'abc', '1e3', ['60', '70'], ' 60', '99999999999999']) {
    assert.equal(tokenDuration(q, 3600), 3600, JSON.stringify(q));
  }
});

test('apiEndpoint: <node>/<version>/<uid>, without doubled slashes', () => {
  assert.equal(apiEndpoint('https://node.example', '1.5', 42), 'https://node.example/1.5/42');
  assert.equal(apiEndpoint('https://node.example/', '1.5', 42), 'https://node.example/1.5/42');
});

test('keyId: padded generation and base64url client state (no bytes for an empty one); undefined unless hex', () => {
  assert.equal(keyId(1_700_000_000_000, '0123456789abcdef0123456789abcdef'), '1700000000000-ASNFZ4mrze8BI0VniavN7w');
  assert.equal(keyId(5, 'ff'), '0000000000005-_w');
  assert.equal(keyId(5, ''), '0000000000005-');
  assert.equal(keyId(5, 'abc'), undefined);
  assert.equal(keyId(5, 'client.state'), undefined);
});

test('tokenPayload: tokenlib fields, expires from now + duration, fxa_uid, the metrics hashes, fxa_kid unless the state is not hex; never tokenserver_origin', () => {
  const base = { uid: 7, node: 'https://n.example', fxaUid: 'abc123', hashedFxaUid: 'h'.repeat(32), hashedDeviceId: 'd'.repeat(32), generation: 3, nowSeconds: 1000.9, duration: 60, salt: 'a1b2c3' };
  assert.deepEqual(tokenPayload({ ...base, clientState: '' }), {
    uid: 7,
    node: 'https://n.example',
    expires: 1060,
    salt: 'a1b2c3',
    fxa_uid: 'abc123',
    fxa_kid: '0000000000003-',
    hashed_fxa_uid: 'h'.repeat(32),
    hashed_device_id: 'd'.repeat(32),
  });
  assert.ok(!('fxa_kid' in tokenPayload({ ...base, clientState: 'client.state' })), 'a state that is not hex has no bytes to name');
  const withKid = tokenPayload({ ...base, clientState: 'aabb' });
  assert.equal(withKid.fxa_kid, '0000000000003-qrs');
  assert.ok(!('tokenserver_origin' in withKid));
});

// Vectors computed outside this code base (Python's hmac module): the first pair is the one
// Mozilla's Rust tokenserver asserts in its own tests (fxa_uid "test123", an empty metrics secret).
test('hashedAccountId and hashedDeviceId: the first 32 hex characters of HMAC-SHA256, the device id over hashed_fxa_uid + "none"', () => {
  assert.equal(hashedAccountId('', 'test123'), '4d00ecae64b98dd7dc7dea68d0dd615d');
  assert.equal(hashedDeviceId('', '4d00ecae64b98dd7dc7dea68d0dd615d'), '3a41cccbdd666ebc4199f1f9d1249d44');
  assert.equal(hashedAccountId('secret', '0123456789abcdef0123456789abcdef'), '4048002ec5ff2ec0ea0d5a8cc577d554');
  assert.equal(hashedDeviceId('secret', '4048002ec5ff2ec0ea0d5a8cc577d554'), '4686278ac62706a391cfe460945f7e48');
  assert.equal(hashedDeviceId(Buffer.from('secret'), '4048002ec5ff2ec0ea0d5a8cc577d554'), '4686278ac62706a391cfe460945f7e48', 'a Buffer key is the same key');
});

test('accountId: the local part at the FxA e-mail domain, an opaque HMAC of the address elsewhere', () => {
  const key = Buffer.alloc(32, 1);
  const fxa = 'api.accounts.firefox.com';
  const hex = '0123456789abcdef0123456789abcdef';
  assert.equal(accountId(`${hex}@api.accounts.firefox.com`, fxa, key), hex);
  assert.equal(accountId(`${hex}@API.Accounts.Firefox.com`, fxa, key), hex, 'the domain compares without case');
  const x = accountId('alice@x.example', fxa, key);
  assert.match(x, /^[0-9a-f]{32}$/);
  assert.ok(!x.includes('alice'));
  assert.notEqual(x, accountId('alice@y.example', fxa, key), 'equal local parts at other domains differ');
  assert.equal(x, accountId('alice@x.example', fxa, key), 'stable for one key');
  assert.notEqual(x, accountId('alice@x.example', fxa, Buffer.alloc(32, 2)), 'keyed');
  assert.notEqual(accountId(`${hex}@accounts.firefox.com`, fxa, key), hex, 'a parent or sibling domain is not the FxA domain');
  assert.notEqual(accountId(`${hex}@evil.api.accounts.firefox.com`, fxa, key), hex, 'nor a subdomain');
  assert.match(accountId('@api.accounts.firefox.com', fxa, key), /^[0-9a-f]{32}$/, 'an empty local part is no account id');
});

// Found missing by mutation testing (npm run mutation -- services/login/rules.ts).

test('unsupportedApplication: the log message names what is not served', () => {
  const apps = new Map([['sync', new Set(['1.5'])]]);
  assert.equal(unsupportedApplication(apps, 'notes', '1.5').message, 'unknown application notes');
  assert.equal(unsupportedApplication(apps, 'sync', '1.2').message, 'unknown version 1.2 of sync');
});

test('acceptsJson: a header of blanks is no header; q is found among other parameters', () => {
  assert.equal(acceptsJson('  '), true);
  assert.equal(acceptsJson('application/json;charset=utf-8;q=0'), false);
  assert.equal(acceptsJson('application/json; charset=utf-8; q=0.5'), true);
});

test('tokenDuration: only a string is read; an array of one value is ignored like any other', () => {
  assert.equal(tokenDuration(['60'], 3600), 3600);
  assert.equal(tokenDuration(60, 3600), 3600);
});

test('apiEndpoint: every trailing slash of the node goes', () => {
  assert.equal(apiEndpoint('https://node.example//', '1.5', 42), 'https://node.example/1.5/42');
  assert.equal(apiEndpoint('https://node.example/base///', '1.5', 42), 'https://node.example/base/1.5/42');
});
