// Fuzzing the assertion verifier with real signatures: mutations of a valid
// Authorization header, and certificates/assertions with arbitrary claims
// signed by trusted, untrusted and uncertified keys. verify() either accepts
// exactly what it should or throws one of the four documented 401 classes.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { InvalidCredentials, InvalidGeneration, InvalidTimestamp, Unauthorized } from '../lib/errors.js';
import { bundle, generateKey, legacyRsaPublicKey, signAssertion, signCertificate, signJws, type KeyPair } from '../lib/idp.js';
import { normalizeEmail } from '../lib/email.js';
import { createAssertionVerifier, type AssertionVerifier } from '../services/login/assertion.js';
import { fuzzParams, mutate, mutationsArb, outcomeAsync } from './support/fuzz.js';

const ISSUER = 'fuzz-idp.example';
const AUDIENCE = 'https://token.fuzz.example';
const VERIFY_ERRORS = [Unauthorized, InvalidCredentials, InvalidTimestamp, InvalidGeneration] as const;

let verifier: AssertionVerifier;
let keys: { issuer: KeyPair; rogue: KeyPair; es: KeyPair; rs: KeyPair; ed: KeyPair };
let valid: string;

before(async () => {
  const [issuer, rogue, es, rs, ed] = await Promise.all([
    generateKey('ES256'),
    generateKey('ES256'),
    generateKey('ES256'),
    generateKey('RS256'),
    generateKey('EdDSA'),
  ]);
  keys = { issuer, rogue, es, rs, ed };
  verifier = await createAssertionVerifier({ trustedIssuers: new Map([[ISSUER, { keys: [issuer.publicJwk], domains: ['*'] }]]), audiences: [AUDIENCE], skewSeconds: 60, generationClaim: 'fxa-generation' });
  const cert = await signCertificate(issuer, { issuer: ISSUER, email: 'fuzz@example.com', publicKey: es.publicJwk, generation: 3 });
  valid = bundle(cert, await signAssertion(es, { audience: AUDIENCE }));
  assert.deepEqual(await verifier.verify(`Assertion ${valid}`), { email: 'fuzz@example.com', issuer: ISSUER, generation: 3 });
});

test('a mutated valid Authorization header is refused with a documented 401, unless only the scheme’s spelling or spacing changed', async () => {
  await fc.assert(
    fc.asyncProperty(mutationsArb, async (ms) => {
      const header = mutate(`Assertion ${valid}`, ms);
      const ok = await outcomeAsync(() => verifier.verify(header), VERIFY_ERRORS, header);
      if (ok) {
        const m = /^(\S+)[ \t]+(\S+)[ \t]*$/.exec(header);
        assert.ok(m && m[2] === valid && ['assertion', 'browserid'].includes(m[1].toLowerCase()), `a changed assertion verified: ${header}`);
      }
    }),
    fuzzParams(2000),
  );
});

test('arbitrary signed claims: only documented 401s; an accepted one is exactly a trusted, certified, unexpired assertion for our audience', async () => {
  const now = Date.now();
  /** Mostly the valid value, so that accepted cases are common enough to check what is accepted. */
  const mostly = <T>(good: fc.Arbitrary<T>, ...bad: fc.Arbitrary<unknown>[]) =>
    fc.oneof({ arbitrary: good as fc.Arbitrary<unknown>, weight: 3 * bad.length }, ...bad.map((arbitrary) => ({ arbitrary, weight: 1 })));
  const badTime = [
    fc.integer({ min: now - 3_600_000, max: now + 3_600_000 }),
    fc.constantFrom(now - 120_000, 0, -1, 1e300, Number.MAX_SAFE_INTEGER + 2),
    fc.double(),
    fc.string({ maxLength: 5 }),
    fc.constant(undefined),
  ];
  const userKey = fc.constantFrom('es', 'rs', 'ed', 'rs-legacy') as fc.Arbitrary<'es' | 'rs' | 'ed' | 'rs-legacy'>;
  const certArb = fc.record({
    issuerKey: mostly(fc.constant('issuer'), fc.constant('rogue')) as fc.Arbitrary<'issuer' | 'rogue'>,
    iss: mostly(fc.constant(ISSUER), fc.string({ maxLength: 10 }), fc.integer()),
    iat: mostly(fc.constant(now - 1000), ...badTime),
    exp: mostly(fc.constant(now + 600_000), ...badTime),
    email: mostly(fc.constant('user@example.com'), fc.emailAddress(), fc.string({ maxLength: 20 }), fc.integer(), fc.constant('a'.repeat(300) + '@x.example')),
    userKey,
    publicKeyOverride: fc.option(fc.jsonValue(), { freq: 8 }),
    generation: mostly(fc.oneof(fc.constant(undefined), fc.nat()), fc.integer(), fc.double(), fc.string({ maxLength: 3 }), fc.constant(null)),
    extra: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
  });
  const assertionArb = fc.record({
    signer: mostly(fc.constant('certified'), fc.constantFrom('es', 'rs', 'ed')) as fc.Arbitrary<'certified' | 'es' | 'rs' | 'ed'>,
    aud: mostly(fc.constant(AUDIENCE), fc.string({ maxLength: 10 }), fc.integer(), fc.constant([AUDIENCE])),
    exp: mostly(fc.constant(now + 300_000), ...badTime),
    header: fc.option(fc.dictionary(fc.constantFrom('kid', 'typ', 'crit', 'jwk', 'b64'), fc.jsonValue({ maxDepth: 1 })), { freq: 4 }),
  });
  let accepted = 0;
  await fc.assert(
    fc.asyncProperty(certArb, assertionArb, async (c, a) => {
      const user = c.userKey === 'rs-legacy' ? keys.rs : keys[c.userKey];
      const publicKey = c.publicKeyOverride ?? (c.userKey === 'rs-legacy' ? legacyRsaPublicKey(keys.rs.publicJwk) : user.publicJwk);
      const claims: Record<string, unknown> = { ...c.extra, iss: c.iss, iat: c.iat, exp: c.exp, principal: { email: c.email }, 'public-key': publicKey };
      if (c.generation !== undefined) claims['fxa-generation'] = c.generation;
      const cert = await signJws(keys[c.issuerKey], claims);
      const signer = a.signer === 'certified' ? user : keys[a.signer];
      let assertion: string;
      try {
        assertion = await signJws(signer, { aud: a.aud, exp: a.exp }, a.header ?? {});
      } catch {
        // jose refuses to sign some headers (a malformed "crit", "b64"): not a case for the verifier.
        fc.pre(false);
        return;
      }
      const header = `Assertion ${bundle(cert, assertion)}`;
      const ok = await outcomeAsync(() => verifier.verify(header), VERIFY_ERRORS, { c, a });
      if (ok) {
        accepted++;
        assert.equal(c.issuerKey, 'issuer', 'certificate signed by the trusted key');
        assert.equal(c.iss, ISSUER);
        assert.equal(c.publicKeyOverride, null, 'the key the assertion was checked with is the certified one');
        assert.equal(signer, user, 'assertion signed by the certified key');
        assert.equal(a.aud, AUDIENCE);
        assert.equal(ok.email, normalizeEmail(c.email as string));
        assert.equal(ok.generation, c.generation);
        for (const t of [c.exp, a.exp]) assert.ok(typeof t === 'number' && t + 60_000 >= Date.now(), 'not expired');
        assert.ok((a.exp as number) - 60_000 <= Date.now() + 600_000 && (c.exp as number) - 60_000 <= Date.now() + 86_400_000, 'within the lifetime limits');
      }
    }),
    fuzzParams(400),
  );
  assert.ok(accepted > 0, 'some generated assertions are valid (the property is not vacuous)');
});

test('certificate and assertion swapped, duplicated or re-bundled: refused', async () => {
  const [cert, assertion] = valid.split('~');
  for (const creds of [`${assertion}~${cert}`, `${cert}~${cert}`, `${assertion}~${assertion}`, `${cert}~${assertion}~`, `~${cert}~${assertion}`]) {
    await outcomeAsync(() => verifier.verify(`Assertion ${creds}`), VERIFY_ERRORS, creds);
    await assert.rejects(verifier.verify(`Assertion ${creds}`));
  }
});

test('an assertion for any audience but ours is refused: 401 invalid-credentials', async () => {
  const cert = valid.split('~')[0];
  const verifyFor = async (aud: string) => {
    const header = `Assertion ${bundle(cert, await signJws(keys.es, { aud, exp: Date.now() + 300_000 }))}`;
    return outcomeAsync(() => verifier.verify(header), [InvalidCredentials], aud);
  };
  // The control: the same certificate and key with our audience verifies.
  assert.ok(await verifyFor(AUDIENCE));
  // Near misses, every run; then generated strings, every one of them another audience.
  const nearMisses = [`${AUDIENCE}/`, AUDIENCE.toUpperCase(), AUDIENCE.replace('https:', 'http:'), `${AUDIENCE}:443`, ` ${AUDIENCE}`, AUDIENCE.slice(0, -1), 'https://elsewhere.example', ''];
  for (const aud of nearMisses) assert.equal(await verifyFor(aud), undefined, `accepted audience ${JSON.stringify(aud)}`);
  const otherAudience = fc
    .oneof(fc.string({ maxLength: 30 }), fc.webUrl(), fc.tuple(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 })).map(([a, b]) => `${a}${AUDIENCE}${b}`))
    .filter((aud) => aud !== AUDIENCE);
  await fc.assert(
    fc.asyncProperty(otherAudience, async (aud) => {
      assert.equal(await verifyFor(aud), undefined, `accepted audience ${JSON.stringify(aud)}`);
    }),
    fuzzParams(100),
  );
});
