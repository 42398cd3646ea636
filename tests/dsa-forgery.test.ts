// A BrowserID DSA key that admits forgeries, through the login endpoint of the
// embedded stack: q even (2^159 + 2, 2^255 + 2), p = q·2^k + 1, g = y = p − 1.
// (p − 1)^q ≡ 1 mod p, so the subgroup checks pass, and a signature r = s = 1
// made without any private key verifies whenever the digest is odd. A trusted
// issuer certifying such a key must not let anyone holding the certificate in.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { importJWK, type CryptoKey, type JWK } from 'jose';
import { DSA_SIZES, DsaPublicKey, dsaKeyObject, type BrowserIdDsaPublicKey, type DsaAlgorithm } from '../lib/dsa.js';
import { bundle, DEV_IDP_FILE, generateDsaKey, signAssertion, signCertificate, type KeyPair } from '../lib/idp.js';
import { isErrorBody, startTestStack, type TestStack } from './support/stack.js';

let stack: TestStack;
/** The trusted development issuer's own key, read from its file: it certifies whatever key it is given. */
let issuerKey: Pick<KeyPair, 'alg' | 'privateKey'>;

before(async () => {
  stack = await startTestStack();
  const stored = JSON.parse(readFileSync(path.join(stack.dataDir, DEV_IDP_FILE), 'utf8')) as { alg: KeyPair['alg']; privateJwk: JWK };
  issuerKey = { alg: stored.alg, privateKey: (await importJWK(stored.privateJwk, stored.alg)) as CryptoKey };
});

after(async () => {
  await stack?.close();
});

const hex = (v: bigint) => v.toString(16);

function evenQKey(alg: DsaAlgorithm): BrowserIdDsaPublicKey {
  const { pBits, qBits } = DSA_SIZES[alg];
  const q = (1n << BigInt(qBits - 1)) + 2n;
  const p = q * (1n << BigInt(pBits - qBits)) + 1n;
  return { algorithm: 'DS', p: hex(p), q: hex(q), g: hex(p - 1n), y: hex(p - 1n) };
}

/** An assertion for the stack's audience "signed" r = s = 1: its expiry moved until the signing input's digest is odd. */
function forgedAssertion(alg: DsaAlgorithm, key: BrowserIdDsaPublicKey): string {
  const { digest, qBits } = DSA_SIZES[alg];
  const one = Buffer.concat([Buffer.alloc(qBits / 8 - 1), Buffer.from([1])]);
  const signature = Buffer.concat([one, one]);
  const header = Buffer.from(JSON.stringify({ alg })).toString('base64url');
  for (let exp = Date.now() + 120_000; ; exp++) {
    const input = `${header}.${Buffer.from(JSON.stringify({ aud: stack.audience, exp })).toString('base64url')}`;
    if ((createHash(digest).update(input).digest().at(-1)! & 1) === 0) continue;
    // The forgery is real: OpenSSL verifies it with this key.
    const big = (h: string) => BigInt(`0x${h}`);
    const keyObject = dsaKeyObject(new DsaPublicKey(alg, big(key.p), big(key.q), big(key.g), big(key.y)));
    assert.equal(verify(digest, Buffer.from(input), { key: keyObject, dsaEncoding: 'ieee-p1363' }, signature), true, `${alg}: OpenSSL verifies r = s = 1`);
    return `${input}.${signature.toString('base64url')}`;
  }
}

test('a genuine DS128 key certified by the trusted issuer logs in (the control)', async () => {
  const user = await generateDsaKey('DS128');
  const email = 'dsa-genuine@example.com';
  const cert = await signCertificate(issuerKey, { issuer: stack.idp.issuer, email, publicKey: user.publicKey });
  const res = await stack.login(email, { headers: { Authorization: `Assertion ${bundle(cert, await signAssertion(user, { audience: stack.audience }))}` } });
  assert.equal(res.status, 200, res.text);
});

for (const alg of ['DS128', 'DS256'] as const) {
  test(`${alg}: a certified key with an even q and an assertion with r = 1 made without a private key → 401 invalid-credentials`, async () => {
    const email = `dsa-forged-${alg}@example.com`;
    const key = evenQKey(alg);
    const cert = await signCertificate(issuerKey, { issuer: stack.idp.issuer, email, publicKey: key });
    const res = await stack.login(email, { headers: { Authorization: `Assertion ${bundle(cert, forgedAssertion(alg, key))}` } });
    assert.equal(res.status, 401, res.text);
    assert.ok(isErrorBody(res.json, 'invalid-credentials'), res.text);
    // The body is Mozilla's generic entry (DESIGN §11.2); why it was refused ("q must be an odd prime") is in lib/dsa.test.ts.
  });
}
