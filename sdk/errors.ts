// What the SDK throws when the login service says no. The status strings come
// from lib/errors.ts (the server's own vocabulary), so client and server can
// never disagree on a spelling.
import { InvalidClientState, InvalidCredentials, InvalidGeneration, InvalidKeyId, InvalidKeysChangedAt, InvalidTimestamp, NewUsersDisabled, UserNotAllowed } from '../lib/errors.js';

/** A login answer other than 200: HTTP status, the body's `status` string and the parsed body. */
export class LoginError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly statusString: string,
    readonly body: unknown,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** 401 invalid-credentials: the assertion was refused (signature, issuer, audience, malformed). */
export class InvalidCredentialsError extends LoginError {}
/** 401 invalid-timestamp: the assertion has expired by the server's clock. */
export class InvalidTimestampError extends LoginError {}
/** 401 invalid-generation: the generation is older than the one on record. */
export class InvalidGenerationError extends LoginError {}
/** 401 invalid-client-state: the client state was seen before or came without a generation increase. */
export class InvalidClientStateError extends LoginError {}
/** 401 invalid-keysChangedAt: the key id's keys_changed_at went backwards, ran ahead of the generation, or is missing (DESIGN §9.2). */
export class InvalidKeysChangedAtError extends LoginError {}
/** 401 invalid-key-id: no usable X-KeyID with a Bearer token. */
export class InvalidKeyIdError extends LoginError {}
/** 403 new-users-disabled: this user is unknown and the service takes no new users. */
export class NewUsersDisabledError extends LoginError {}
/** 403 user-not-allowed: the service admits only the users of its ALLOWED_USERS list. */
export class UserNotAllowedError extends LoginError {}

/** An answer that says when to ask again: `retryAfter` seconds (from Retry-After). */
export abstract class RetryLaterError extends LoginError {
  constructor(
    message: string,
    status: number,
    body: unknown,
    readonly retryAfter: number,
  ) {
    super(message, status, statusStringOf(body) ?? 'error', body);
  }
}

/** 503: the login service (or a backend, or node room) is unavailable; no request before `retryAfter` seconds. */
export class ServiceUnavailableError extends RetryLaterError {
  constructor(message: string, body: unknown, retryAfter: number) {
    super(message, 503, body, retryAfter);
  }
}

/** 429: too many client-state changes for this user today; the next is allowed after `retryAfter` seconds. */
export class TooManyRequestsError extends RetryLaterError {
  constructor(message: string, body: unknown, retryAfter: number) {
    super(message, 429, body, retryAfter);
  }
}

/**
 * The server asked for quiet (X-Backoff) and no unexpired token is cached.
 * No request was made; try again after `retryAfter` seconds.
 */
export class BackoffError extends Error {
  constructor(readonly retryAfter: number) {
    super(`login service asked to back off; retry after ${retryAfter} s`);
    this.name = 'BackoffError';
  }
}

type LoginErrorClass = new (message: string, status: number, statusString: string, body: unknown) => LoginError;

// Server error class → SDK error class, keyed by the server's status string.
const BY_STATUS_STRING = new Map<string, LoginErrorClass>(
  (
    [
      [InvalidCredentials, InvalidCredentialsError],
      [InvalidTimestamp, InvalidTimestampError],
      [InvalidGeneration, InvalidGenerationError],
      [InvalidClientState, InvalidClientStateError],
      [InvalidKeysChangedAt, InvalidKeysChangedAtError],
      [InvalidKeyId, InvalidKeyIdError],
      [NewUsersDisabled, NewUsersDisabledError],
      [UserNotAllowed, UserNotAllowedError],
    ] as const
  ).map(([server, sdk]) => [new server('').statusString, sdk]),
);

/** The protocol body's `status` field, when there is one. */
export function statusStringOf(body: unknown): string | undefined {
  const s = (body as { status?: unknown } | null)?.status;
  return typeof s === 'string' ? s : undefined;
}

function describe(status: number, statusString: string, body: unknown): string {
  const first = (body as { errors?: Array<{ description?: unknown }> } | null)?.errors?.[0]?.description;
  return `login failed: ${status} ${statusString}` + (typeof first === 'string' && first !== '' ? `: ${first}` : '');
}

/** The typed error for a non-200 login answer. `retryAfter` (seconds) is used for a 503 and a 429. */
export function loginErrorFrom(status: number, body: unknown, retryAfter: number): LoginError {
  const statusString = statusStringOf(body) ?? 'error';
  if (status === 503) return new ServiceUnavailableError(describe(status, statusString, body), body, retryAfter);
  if (status === 429) return new TooManyRequestsError(describe(status, statusString, body), body, retryAfter);
  const Class = BY_STATUS_STRING.get(statusString) ?? LoginError;
  return new Class(describe(status, statusString, body), status, statusString, body);
}
