// The SDK logging in with Bearer (access-token provider + key id) against the
// embedded stack with OAUTH_JWKS set, and its typed errors for the §9.1/§9.2 refusals.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { hawkFetch, InvalidKeyIdError, InvalidKeysChangedAtError, TokenClient } from '../sdk/index.js';
import { APP, startTestStack, VERSION, type TestStack } from './support/stack.js';
import { accessToken, keyIdHeader, signingKey, writeJwks, type SigningKey } from './support/oauth.js';

const dir = mkdtempSync(path.join(tmpdir(), 'sdk-bearer-'));
let stack: TestStack;
let key: SigningKey;

before(async () => {
  key = await signingKey('RS256', 'k1');
  stack = await startTestStack({ OAUTH_JWKS: writeJwks(dir, 'jwks.json', [key]), METRICS_HASH_SECRET: 'sdk-test-metrics-secret' });
});
after(async () => {
  await stack?.close();
  rmSync(dir, { recursive: true, force: true });
});

function client(sub: string, kca: () => number, keyId?: string): TokenClient {
  return new TokenClient({
    loginUrl: stack.loginUrl,
    app: APP,
    version: VERSION,
    accessToken: async () => ({ accessToken: await accessToken(key, sub, { 'fxa-generation': 2000 }), keyId: keyId ?? keyIdHeader(kca(), 'abcd') }),
  });
}

test('TokenClient with an access-token provider: a token, hashed_fxa_uid, and a signed request through the gateway', async () => {
  const tokens = client('sdkuser1', () => 1000);
  const token = await tokens.getToken();
  assert.match(token.hashed_fxa_uid ?? '', /^[0-9a-f]{32}$/);
  const res = await hawkFetch(tokens)('storage/x');
  assert.equal(res.status, 200, await res.text());
});

test('typed errors: invalid-keysChangedAt after kca went back, invalid-key-id without a usable key id', async () => {
  let kca = 2000;
  assert.ok(await client('sdkuser2', () => kca).getToken());
  kca = 1500;
  await assert.rejects(client('sdkuser2', () => kca).getToken(), InvalidKeysChangedAtError);
  await assert.rejects(client('sdkuser3', () => 1000, '').getToken(), InvalidKeyIdError);
});

test('TokenClient refuses both or neither of assertion and accessToken', () => {
  const base = { loginUrl: 'http://127.0.0.1:1', app: APP, version: VERSION };
  assert.throws(() => new TokenClient(base as never), TypeError);
  assert.throws(() => new TokenClient({ ...base, assertion: async () => 'a~b', accessToken: async () => ({ accessToken: 'x', keyId: 'y' }) } as never), TypeError);
});
