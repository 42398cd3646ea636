// Every security refusal in one place, each through the real interface (the
// embedded stack over HTTP) with its documented status and body. Other suites
// test some of these in more depth; this file is the list.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { bundle, generateKey, signAssertion, signCertificate } from '../lib/idp.js';
import { derivedSecret, makeToken, newSalt, nodeSecrets } from '../lib/token.js';
import type { HttpResponse } from '../services/login/testkit.js';
import { isErrorBody, startTestStack, type GatewayResponse, type TestStack, type Token } from './support/stack.js';

let stack: TestStack;
let token: Token;
let emails = 0;
const newEmail = () => `security-${++emails}@example.com`;

before(async () => {
  stack = await startTestStack();
  const res = await stack.login(newEmail());
  assert.equal(res.status, 200, res.text);
  token = res.json;
});

after(async () => {
  await stack?.close();
});

function assertLoginRefused(res: HttpResponse, statusString: string): void {
  assert.equal(res.status, 401, res.text);
  assert.equal(res.header('content-type'), 'application/json');
  assert.ok(isErrorBody(res.json, statusString), res.text);
  assert.deepEqual(res.headers.get('www-authenticate'), ['Assertion', 'BrowserID']);
  assert.match(res.header('x-timestamp') ?? '', /^\d+$/);
}

function assertGatewayRefused(res: GatewayResponse, statusString: string): void {
  assert.equal(res.status, 401, res.text);
  assert.equal(res.headers.get('content-type'), 'application/json');
  assert.ok(isErrorBody(res.json, statusString), res.text);
  assert.match(res.headers.get('www-authenticate') ?? '', /^Hawk/);
  assert.match(res.headers.get('x-timestamp') ?? '', /^\d+$/);
}

/** A token for this stack's user, minted with chosen payload fields and secret. */
function forgedToken(o: { node?: string; expires?: number; secretFor?: string }): Pick<Token, 'id' | 'key' | 'api_endpoint'> {
  const node = o.node ?? stack.nodeUrl;
  const secret = nodeSecrets(stack.masterSecrets, o.secretFor ?? node)[0];
  const { id, key } = makeToken({ uid: token.uid, node, expires: o.expires ?? Math.floor(Date.now() / 1000) + 600, salt: newSalt() }, secret);
  return { id, key, api_endpoint: token.api_endpoint };
}

describe('node-gateway refusals', () => {
  test('a valid signed request passes (the control for the refusals below)', async () => {
    const res = await stack.signed(token, { path: 'storage/control' });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.uid, String(token.uid));
  });

  test('a replayed Hawk request: 401 invalid-credentials', async () => {
    const nonce = `replay-${Date.now()}`;
    const ts = Math.floor(Date.now() / 1000);
    assert.equal((await stack.signed(token, { path: 'storage/replay', nonce, ts })).status, 200);
    assertGatewayRefused(await stack.signed(token, { path: 'storage/replay', nonce, ts }), 'invalid-credentials');
  });

  test('a token from another node: 401 invalid-credentials, whether signed with that node’s secret or ours', async () => {
    const other = 'https://another-node.example';
    assertGatewayRefused(await stack.signed(forgedToken({ node: other })), 'invalid-credentials');
    assertGatewayRefused(await stack.signed(forgedToken({ node: other, secretFor: stack.nodeUrl })), 'invalid-credentials');
  });

  test('a token with a flipped byte (payload or signature): 401 invalid-credentials', async () => {
    const raw = Buffer.from(token.id, 'base64url');
    const secret = nodeSecrets(stack.masterSecrets, stack.nodeUrl)[0];
    // A payload byte whose flip leaves a well-formed payload for this node (the salt's first
    // character), and a signature byte: only the token's signature check can refuse either.
    const saltAt = raw.indexOf('"salt":"') + '"salt":"'.length;
    assert.ok(saltAt > 8 && saltAt < raw.length - 32, 'the salt is in the payload');
    for (const at of [saltAt, raw.length - 5]) {
      const flipped = Buffer.from(raw);
      flipped[at] ^= 0x01;
      // Same alphabet and padding as the real token, so only the byte differs.
      const id = flipped.toString('base64').replace(/\+/g, '-').replace(/\//g, '_');
      assert.notEqual(id, token.id);
      // Signed with the key the gateway derives for the tampered token, so the MAC cannot fail first.
      const salt = JSON.parse(flipped.subarray(0, flipped.length - 32).toString('utf8')).salt;
      assertGatewayRefused(await stack.signed(token, { id, key: derivedSecret(id, salt, secret) }), 'invalid-credentials');
    }
  });

  test('an expired token: 401 invalid-timestamp', async () => {
    assertGatewayRefused(await stack.signed(forgedToken({ expires: Math.floor(Date.now() / 1000) - 5 })), 'invalid-timestamp');
  });

  test('a request signed with another key, or for another uid’s path: 401 invalid-credentials', async () => {
    assertGatewayRefused(await stack.signed(token, { key: forgedToken({}).key }), 'invalid-credentials');
    assertGatewayRefused(await stack.signed(token, { path: `/${'1.5'}/${token.uid + 1}/storage` }), 'invalid-credentials');
  });

  test('a stale Hawk timestamp: 401 invalid-timestamp with a signed server time', async () => {
    const res = await stack.signed(token, { ts: Math.floor(Date.now() / 1000) - 3600 });
    assertGatewayRefused(res, 'invalid-timestamp');
    assert.match(res.headers.get('www-authenticate') ?? '', /^Hawk ts="\d+", tsm="[^"]+", error="Stale timestamp"$/);
  });
});

describe('login refusals', () => {
  test('an assertion for another audience: 401 invalid-credentials', async () => {
    assertLoginRefused(await stack.login(newEmail(), { audience: 'https://elsewhere.example' }), 'invalid-credentials');
  });

  test('a certificate from an untrusted issuer: 401 invalid-credentials', async () => {
    const [issuer, user] = await Promise.all([generateKey('ES256'), generateKey('ES256')]);
    const cert = await signCertificate(issuer, { issuer: 'untrusted.example', email: newEmail(), publicKey: user.publicJwk });
    const assertion = await signAssertion(user, { audience: stack.audience });
    assertLoginRefused(await stack.login(newEmail(), { headers: { Authorization: `Assertion ${bundle(cert, assertion)}` } }), 'invalid-credentials');
  });

  test('a certificate claiming the trusted issuer but signed by another key: 401 invalid-credentials', async () => {
    const [rogue, user] = await Promise.all([generateKey('ES256'), generateKey('ES256')]);
    const cert = await signCertificate(rogue, { issuer: stack.idp.issuer, email: newEmail(), publicKey: user.publicJwk });
    const assertion = await signAssertion(user, { audience: stack.audience });
    assertLoginRefused(await stack.login(newEmail(), { headers: { Authorization: `Assertion ${bundle(cert, assertion)}` } }), 'invalid-credentials');
  });

  test('an assertion signed by a key other than the certified one: 401 invalid-credentials', async () => {
    const genuine = (await stack.authorization(newEmail())).slice('Assertion '.length);
    const other = await generateKey('ES256');
    const forged = bundle(genuine.split('~')[0], await signAssertion(other, { audience: stack.audience }));
    assertLoginRefused(await stack.login(newEmail(), { headers: { Authorization: `Assertion ${forged}` } }), 'invalid-credentials');
  });
});
