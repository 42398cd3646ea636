// Login schemes (DESIGN §4, §9.1): the scheme named in the Authorization
// header picks the verifier. Each scheme is a module exporting one
// `SchemeFactory`; the list below is every scheme there is, and configuration
// decides which are on. A third scheme is one new file and one line here.
import type { LoginConfig } from '../../lib/config.js';
import { MOZILLA_ERRORS, Unauthorized } from '../../lib/errors.js';
import { splitAuthorization } from './authorization.js';
import type { AuthRequest, AuthScheme, Identity, SchemeFactory, SchemeKeys } from './scheme.js';
import { assertionScheme } from './scheme-assertion.js';
import { bearerScheme } from './scheme-bearer.js';

/** Every scheme, in challenge order. */
const FACTORIES: readonly SchemeFactory[] = [assertionScheme, bearerScheme];

export interface Authenticator {
  /** One per enabled scheme name, for every 401. */
  readonly challenges: readonly string[];
  authenticate(request: Omit<AuthRequest, 'authorization'> & { authorization: string | undefined }): Promise<Identity>;
}

/** The scheme for `name`, case-insensitively, among `schemes`. */
export function schemeFor(schemes: readonly AuthScheme[], name: string): AuthScheme | undefined {
  const lower = name.toLowerCase();
  return schemes.find((s) => s.names.some((n) => n.toLowerCase() === lower));
}

export function authenticator(schemes: readonly AuthScheme[]): Authenticator {
  const challenges = schemes.flatMap((s) => s.names);
  return {
    challenges,
    async authenticate(request) {
      const { name, credentials } = splitAuthorization(request.authorization);
      const scheme = schemeFor(schemes, name);
      if (!scheme) throw new Unauthorized(`unsupported authorization scheme; use ${challenges.join(' or ')}`, { answer: MOZILLA_ERRORS.unsupportedScheme.entry });
      if (credentials === '') throw new Unauthorized('missing credentials');
      return scheme.verify(credentials, { ...request, authorization: request.authorization! });
    },
  };
}

/** The enabled schemes (lib/config.ts guarantees at least one). */
export async function createAuthenticator(config: LoginConfig, keys: SchemeKeys): Promise<Authenticator> {
  const schemes = (await Promise.all(FACTORIES.map((f) => f(config, keys)))).filter((s): s is AuthScheme => s !== null);
  return authenticator(schemes);
}
