// What a login scheme is (DESIGN §4, §9.1): the types every scheme module
// implements and schemes.ts assembles, in a file of their own so that neither
// imports the other.
import type { LoginConfig } from '../../lib/config.js';
import type { KeySet } from './jwks.js';

/** Who logged in, as the directory's rules need it. */
export interface Identity {
  /** Normalised (lib/email.ts). */
  email: string;
  /** Absent when the credentials carry none. */
  generation?: number;
  /** DESIGN §9.2, ms; absent when none. */
  keysChangedAt?: number;
  /** The client state the credentials name (Bearer's X-KeyID), lowercase hex; replaces X-Client-State. */
  clientState?: string;
  /** DESIGN §9.2's reading of a missing generation (Bearer); otherwise #13's "counts as 0" (BrowserID). */
  missingGenerationIsNone?: boolean;
}

/** What a scheme may read of the request. */
export interface AuthRequest {
  /** The whole Authorization header. */
  authorization: string;
  /** A request header; undefined when absent. */
  header(name: string): string | undefined;
  nowMs?: number;
}

export interface AuthScheme {
  /** Names it answers to in the Authorization header (case-insensitive); each is one WWW-Authenticate challenge. */
  readonly names: readonly string[];
  verify(credentials: string, request: AuthRequest): Promise<Identity>;
}

/** Key sets login keeps up to date (jwks-source.ts): Bearer's, when Bearer is on. */
export interface SchemeKeys {
  oauth?: KeySet;
}

/** Builds the scheme from the configuration, or null when the configuration leaves it off. */
export type SchemeFactory = (config: LoginConfig, keys: SchemeKeys) => Promise<AuthScheme | null>;
