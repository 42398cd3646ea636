// The Bearer scheme (DESIGN §9.1): an OAuth access token (JWT, typ at+jwt)
// signed by a key of the provider's set, plus `X-KeyID: <keys_changed_at>-<client
// state>`. On when OAUTH_JWKS (a file or a URL) or OAUTH_ISSUER (discovery) is
// set; the set is kept by jwks-source.ts (§13.1). The signature and the JWT
// claims are checked by jwks.ts; scope, sub, lifetime and X-KeyID by the pure
// functions here.
import { InvalidClientState, InvalidCredentials, InvalidKeyId, MOZILLA_ERRORS } from '../../lib/errors.js';
import { checkTimes, parseGeneration } from './assertion.js';
import { jwtVerifier } from './jwks.js';
import { base64UrlDecode } from './jws.js';
import type { SchemeFactory } from './scheme.js';

export const KEY_ID_HEADER = 'X-KeyID';
/** DESIGN §9.1: the account id. */
const SUB = /^[A-Za-z0-9_-]{1,64}$/;
/** Visible ASCII only (RFC 5234 VCHAR). */
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;
/** At most 16 decimal digits, so a safe integer is checked by Number.isSafeInteger. */
const KCA = /^[0-9]{1,16}$/;
/** The record's client state is at most 32 hex characters: 16 bytes. */
const MAX_CLIENT_STATE_BYTES = 16;
const MAX_KEY_ID_LENGTH = 64;

export interface KeyId {
  /** Absent for 0: none. */
  keysChangedAt?: number;
  /** Lowercase hex of the client state's bytes. */
  clientState: string;
}

/** `X-KeyID: <kca>-<base64url client state>`: missing or not visible ASCII → invalid-key-id; other malformations → invalid-credentials. */
export function parseKeyId(value: string | undefined): KeyId {
  if (value === undefined || value === '') throw new InvalidKeyId('X-KeyID is required: <keys_changed_at>-<client state>', { answer: MOZILLA_ERRORS.missingKeyId.entry });
  if (!VISIBLE_ASCII.test(value)) throw new InvalidKeyId('X-KeyID must be visible ASCII', { answer: MOZILLA_ERRORS.invalidKeyId.entry });
  if (value.length > MAX_KEY_ID_LENGTH) throw new InvalidCredentials('X-KeyID is too long', { field: KEY_ID_HEADER });
  const dash = value.indexOf('-');
  const kca = value.slice(0, dash);
  // No dash: no state (null), so refused below.
  const state = dash < 0 ? null : base64UrlDecode(value.slice(dash + 1));
  if (state === null || !KCA.test(kca) || !Number.isSafeInteger(Number(kca)) || state.length > MAX_CLIENT_STATE_BYTES) {
    throw new InvalidCredentials('X-KeyID must be <keys_changed_at>-<base64url client state>', { field: KEY_ID_HEADER });
  }
  const keysChangedAt = Number(kca);
  return { ...(keysChangedAt > 0 ? { keysChangedAt } : {}), clientState: state.toString('hex') };
}

/** X-Client-State, when sent, must name the same state as X-KeyID. */
export function checkClientStateHeader(sent: string | undefined, keyId: KeyId): void {
  if (sent !== undefined && sent !== '' && sent.toLowerCase() !== keyId.clientState) {
    throw new InvalidClientState('X-Client-State does not match X-KeyID', { answer: MOZILLA_ERRORS.clientStateMismatch.entry });
  }
}

/** The account id and generation of a verified access token; InvalidCredentials when its scope or sub is wrong. */
export function accessTokenClaims(payload: Record<string, unknown>, scope: string): { sub: string; generation?: number } {
  const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ') : [];
  if (!scopes.includes(scope)) throw new InvalidCredentials(`token scope must include ${scope}`);
  const sub = payload.sub;
  if (typeof sub !== 'string' || !SUB.test(sub)) throw new InvalidCredentials('token "sub" must be 1 to 64 characters of [A-Za-z0-9_-]');
  // fxa-generation is in ms; 0 means none.
  const generation = parseGeneration(payload['fxa-generation']);
  return generation ? { sub, generation } : { sub };
}

/** The algorithms of access tokens (and so the keys of their set). */
export const ACCESS_TOKEN_ALGORITHMS = ['RS256', 'ES256'] as const;

export const bearerScheme: SchemeFactory = async (config, keys) => {
  const bearer = config.bearer;
  if (!bearer) return null;
  // The set login keeps (jwks-source.ts startKeySource): a file's, or the provider's.
  if (!keys.oauth) throw new Error('Bearer needs its key set (startKeySource)');
  const verifyJwt = jwtVerifier(
    keys.oauth,
    'file' in bearer.jwks ? 'OAUTH_JWKS' : bearer.jwks.remote.variable,
    ACCESS_TOKEN_ALGORITHMS,
    { typ: 'at+jwt', issuer: bearer.issuer, requiredClaims: ['exp'], skewSeconds: config.assertionSkew },
    'access token',
  );
  return {
    names: ['Bearer'],
    async verify(credentials, request) {
      const nowMs = request.nowMs ?? Date.now();
      const { claims: payload } = await verifyJwt(credentials, nowMs);
      // The verifier checked the types and that exp has not passed; these bound the token's life from the other side.
      checkTimes(
        { expMs: (payload.exp as number) * 1000, iatMs: payload.iat === undefined ? undefined : (payload.iat as number) * 1000 },
        nowMs,
        config.assertionSkew * 1000,
        bearer.maxLifetime * 1000,
        'access token',
      );
      const { sub, generation } = accessTokenClaims(payload, bearer.scope);
      const keyId = parseKeyId(request.header(KEY_ID_HEADER));
      checkClientStateHeader(request.header('X-Client-State'), keyId);
      return {
        email: `${sub}@${config.oauthEmailDomain}`,
        ...(generation !== undefined ? { generation } : {}),
        ...(keyId.keysChangedAt !== undefined ? { keysChangedAt: keyId.keysChangedAt } : {}),
        clientState: keyId.clientState,
        missingGenerationIsNone: true,
      };
    },
  };
};
