import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { compactVerify, decodeProtectedHeader, importJWK } from 'jose';
import { bundle, DEV_IDP_FILE, generateKey, legacyRsaPublicKey, loadOrCreateDevIdp, signAssertion, signCertificate } from './idp.js';

const payloadOf = (jws: string) => JSON.parse(Buffer.from(jws.split('.')[1], 'base64url').toString('utf8'));

async function verifiedPayload(jws: string, jwk: Record<string, unknown>) {
  const { alg } = decodeProtectedHeader(jws);
  const { payload } = await compactVerify(jws, await importJWK(jwk as never, alg!), { algorithms: [alg!] });
  return JSON.parse(new TextDecoder().decode(payload));
}

test('certificate: signed by the issuer, times in ms, principal, public-key and generation claim', async () => {
  const issuer = await generateKey('RS256');
  const user = await generateKey('ES256');
  const cert = await signCertificate(issuer, { issuer: 'idp.example', email: 'a@example.com', publicKey: user.publicJwk, generation: 42, iatMs: 1_000, ttlSeconds: 10 });
  assert.equal(decodeProtectedHeader(cert).alg, 'RS256');
  const p = await verifiedPayload(cert, issuer.publicJwk);
  assert.deepEqual(p, { iss: 'idp.example', iat: 1_000, exp: 11_000, principal: { email: 'a@example.com' }, 'public-key': user.publicJwk, 'fxa-generation': 42 });
  const other = await signCertificate(issuer, { issuer: 'i', email: 'a@b.c', publicKey: user.publicJwk, generation: 1, generationClaim: 'gen', expMs: 5 });
  assert.equal(payloadOf(other).gen, 1);
  assert.equal(payloadOf(other).exp, 5);
  assert.equal('fxa-generation' in payloadOf(await signCertificate(issuer, { issuer: 'i', email: 'a@b.c', publicKey: user.publicJwk })), false);
});

test('assertion: signed by the user key with aud and exp in ms; bundle joins with ~', async () => {
  const user = await generateKey('EdDSA');
  const before = Date.now();
  const a = await signAssertion(user, { audience: 'https://t.example', ttlSeconds: 30 });
  const p = await verifiedPayload(a, user.publicJwk);
  assert.equal(p.aud, 'https://t.example');
  assert.ok(p.exp >= before + 30_000 && p.exp <= Date.now() + 30_000);
  assert.equal(bundle('c', 'a'), 'c~a');
});

test('legacy RS public key: decimal n and e of the same RSA key', async () => {
  const { publicJwk } = await generateKey('RS256');
  const legacy = legacyRsaPublicKey(publicJwk);
  assert.equal(legacy.algorithm, 'RS');
  assert.equal(legacy.e, '65537');
  assert.match(legacy.n, /^[1-9][0-9]{600,}$/);
  assert.equal(BigInt(legacy.n).toString(16), Buffer.from(publicJwk.n as string, 'base64url').toString('hex').replace(/^0+/, ''));
  assert.throws(() => legacyRsaPublicKey({ kty: 'EC' }), TypeError);
});

test('development IdP: key created once with mode 0600, reused after, assertions verify', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'idp-'));
  try {
    const first = await loadOrCreateDevIdp(path.join(dir, 'data'));
    const file = path.join(dir, 'data', DEV_IDP_FILE);
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    const again = await loadOrCreateDevIdp(path.join(dir, 'data'));
    assert.equal(again.issuer, first.issuer);
    assert.deepEqual(again.trustedIssuers.get(again.issuer), first.trustedIssuers.get(first.issuer));

    const issuerJwk = first.trustedIssuers.get(first.issuer)!.keys[0];
    const [cert, assertion] = (await again.makeAssertion('dev@example.com', { audience: 'http://localhost:8000', generation: 3 })).split('~');
    const c = await verifiedPayload(cert, issuerJwk);
    assert.equal(c.iss, first.issuer);
    assert.equal(c.principal.email, 'dev@example.com');
    assert.equal(c['fxa-generation'], 3);
    assert.equal((await verifiedPayload(assertion, c['public-key'])).aud, 'http://localhost:8000');

    const custom = await loadOrCreateDevIdp(path.join(dir, 'data'), { generationClaim: 'gen' });
    const [cert2] = (await custom.makeAssertion('dev@example.com', { audience: 'x', generation: 9 })).split('~');
    assert.equal(payloadOf(cert2).gen, 9);

    await writeFile(file, '{broken');
    await assert.rejects(loadOrCreateDevIdp(path.join(dir, 'data')), /dev-idp\.json/);
    assert.equal(await readFile(file, 'utf8'), '{broken', 'an unreadable key file is never overwritten');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
