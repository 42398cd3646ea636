// The client SDK: fetch a token from the login service, keep it, and sign
// requests to the application node with Hawk.
//
//   const tokens = new TokenClient({ loginUrl, app: 'sync', version: '1.5', assertion: (aud) => myIdp.assertion(aud) });
//   const api = hawkFetch(tokens);
//   const res = await api('storage/meta', { method: 'GET' });
export { TokenClient, type AssertionProvider, type TokenClientOptions } from './token-client.js';
export { hawkFetch, type HawkFetch } from './hawk-fetch.js';
export type { Token } from './policy.js';
export {
  LoginError,
  InvalidCredentialsError,
  InvalidTimestampError,
  InvalidGenerationError,
  InvalidClientStateError,
  NewUsersDisabledError,
  ServiceUnavailableError,
  BackoffError,
} from './errors.js';
