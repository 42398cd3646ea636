// JWTs checked locally against a JWKS file with jose (DESIGN §9.1 access
// tokens, §9.4 security event tokens). Never a network call. Every key is
// checked once at start with the assertion verifier's own rules (RSA ≥ 2048
// bits, a sane exponent, P-256), so a bad file stops the service.
import { createLocalJWKSet, errors, jwtVerify, type JWK, type JWTPayload, type JWTVerifyOptions } from 'jose';
import type { JsonWebKeyLike } from '../../lib/config.js';
import { ConfigError, InvalidCredentials, InvalidTimestamp } from '../../lib/errors.js';
import { importVerifyKey } from './assertion.js';

export type JwtAlgorithm = 'RS256' | 'ES256';

/** The algorithm a key verifies, by its type. */
const ALGORITHM_OF: Record<string, JwtAlgorithm> = { RSA: 'RS256', EC: 'ES256' };

/** Private members, dropped so a pasted key pair still imports as a public key. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

export type JwtVerify = (token: string, options: Omit<JWTVerifyOptions, 'algorithms'>) => Promise<JWTPayload>;

/**
 * A verifier for JWTs signed by one of `jwks` with one of `algorithms`: the
 * payload, or InvalidTimestamp (expired) / InvalidCredentials (anything else).
 * A key is matched by `kid` when the token names one; otherwise each key that
 * suits the algorithm is tried.
 */
export function localJwtVerifier(jwks: JsonWebKeyLike[], variable: string, algorithms: readonly JwtAlgorithm[]): JwtVerify {
  const keys = jwks.map((jwk, i) => {
    const alg = ALGORITHM_OF[jwk.kty];
    if (!alg || !algorithms.includes(alg)) throw new ConfigError(variable, `key ${i}: kty ${jwk.kty} is not one of ${algorithms.join(', ')}`);
    const pub = Object.fromEntries(Object.entries(jwk).filter(([k]) => !PRIVATE_MEMBERS.includes(k)));
    try {
      importVerifyKey(pub as JsonWebKeyLike, alg);
    } catch (e) {
      throw new ConfigError(variable, `key ${i}: unusable: ${(e as Error).message}`);
    }
    return pub as JWK;
  });
  const keySet = createLocalJWKSet({ keys });
  return async (token, options) => {
    const opts = { ...options, algorithms: [...algorithms] };
    try {
      try {
        return (await jwtVerify(token, keySet, opts)).payload;
      } catch (e) {
        if (!(e instanceof errors.JWKSMultipleMatchingKeys)) throw e;
        // No kid and several candidate keys: the first that verifies wins.
        for await (const key of e as unknown as AsyncIterable<CryptoKey>) {
          try {
            return (await jwtVerify(token, key, opts)).payload;
          } catch (inner) {
            if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner;
          }
        }
        throw new errors.JWSSignatureVerificationFailed();
      }
    } catch (e) {
      if (e instanceof errors.JWTExpired) throw new InvalidTimestamp('token has expired');
      if (e instanceof errors.JOSEError) throw new InvalidCredentials(`token refused: ${e.code}`);
      throw new InvalidCredentials('token refused');
    }
  };
}
