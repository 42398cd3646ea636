// The assertion schemes (DESIGN §4): `Assertion` and `BrowserID`, on when
// TRUSTED_ISSUERS (or the development IdP under `npm start`) names issuers.
// The verifier itself is assertion.ts, unchanged.
import { createAssertionVerifier, SCHEMES } from './assertion.js';
import type { SchemeFactory } from './scheme.js';

export const assertionScheme: SchemeFactory = async (config) => {
  if (config.trustedIssuers.size === 0) return null;
  const verifier = await createAssertionVerifier({
    trustedIssuers: config.trustedIssuers,
    audiences: config.audiences,
    skewSeconds: config.assertionSkew,
    maxAssertionLifetime: config.maxAssertionLifetime,
    maxCertificateLifetime: config.maxCertificateLifetime,
    generationClaim: config.generationClaim,
  });
  return {
    names: SCHEMES,
    async verify(credentials, request) {
      // BrowserID never supplies keys_changed_at (DESIGN §9.2), and keeps #13's missing-generation rule.
      // The header is split already (schemes.ts): not a second pass over its ~1.5 KB.
      const { email, generation } = await verifier.verifyCredentials(credentials, request.nowMs);
      return generation === undefined ? { email } : { email, generation };
    },
  };
};
