// The client SDK: fetch a token from the login service, keep it, and sign
// requests to the application node with Hawk.
//
//   import { TokenClient, hawkFetch } from './sdk/index.js';
//   const tokens = new TokenClient({ loginUrl: 'http://127.0.0.1:8000', app: 'sync', version: '1.5',
//     assertion: (audience) => myIdp.assertionFor(audience) });   // a `cert~assertion` bundle
//   const api = hawkFetch(tokens);                                  // fetch, signed, under api_endpoint
//   const res = await api('storage/notes', { method: 'POST', body: JSON.stringify(note) });
export { TokenClient, type AccessTokenProvider, type AssertionProvider, type TokenClientOptions } from './token-client.js';
export { hawkFetch, type HawkFetch } from './hawk-fetch.js';
export type { Token } from './policy.js';
export {
  LoginError,
  InvalidCredentialsError,
  InvalidTimestampError,
  InvalidGenerationError,
  InvalidClientStateError,
  InvalidKeysChangedAtError,
  InvalidKeyIdError,
  NewUsersDisabledError,
  UserNotAllowedError,
  RetryLaterError,
  ServiceUnavailableError,
  TooManyRequestsError,
  BackoffError,
} from './errors.js';
