// One error type per protocol error. Code throws these; one place per
// transport turns them into responses (services/login/error-handler.ts and
// services/node-gateway/respond.ts for HTTP, lib/grpc.ts for gRPC), so status codes and status strings live only here.

export type ErrorLocation = 'header' | 'url' | 'body' | 'internal';

export interface ErrorDetail {
  location: ErrorLocation;
  name: string;
  description: string;
}

export class ProtocolError extends Error {
  /** HTTP status. */
  readonly status: number = 500;
  /** The DESIGN §3 status string. */
  readonly statusString: string = 'error';
  /** Where the problem is; a class's default comes from its static `location`. */
  readonly location: ErrorLocation;
  readonly field: string;
  /** Extra response headers (Retry-After, Allow, WWW-Authenticate ...). */
  readonly headers: Record<string, string> = {};
  /**
   * The login service's `errors` entry when it is not the one its class gives
   * there (loginAnswer): one of MOZILLA_ERRORS. The message stays for the logs.
   */
  readonly answer?: ErrorDetail;

  // Class defaults are statics, not instance fields: a subclass's field
  // initializer would run after this constructor and overwrite the caller's value.
  static readonly location: ErrorLocation = 'internal';
  static readonly field: string = '';

  constructor(description: string, opts: { location?: ErrorLocation; field?: string; headers?: Record<string, string>; answer?: ErrorDetail } = {}) {
    super(description);
    this.name = new.target.name;
    const cls = new.target as unknown as typeof ProtocolError;
    this.location = opts.location ?? cls.location;
    this.field = opts.field ?? cls.field;
    if (opts.headers) this.headers = { ...opts.headers };
    if (opts.answer) this.answer = opts.answer;
  }

  /** 4xx descriptions are shown to the caller; 5xx ones only in logs. */
  get expose(): boolean {
    return this.status < 500;
  }

  detail(): ErrorDetail {
    return {
      location: this.location,
      name: this.field,
      description: this.expose ? this.message : 'the service is unavailable, try again later',
    };
  }
}

// 400: malformed request.
export class BadRequest extends ProtocolError {
  override readonly status = 400;
}

// 401 with status "error": missing or unparseable Authorization, unknown scheme.
export class Unauthorized extends ProtocolError {
  override readonly status = 401;
  static override readonly location: ErrorLocation = 'header';
  static override readonly field: string = 'Authorization';
}

export class InvalidCredentials extends ProtocolError {
  override readonly status = 401;
  override readonly statusString = 'invalid-credentials';
  static override readonly location: ErrorLocation = 'header';
  static override readonly field: string = 'Authorization';
}

export class InvalidTimestamp extends ProtocolError {
  override readonly status = 401;
  override readonly statusString = 'invalid-timestamp';
  static override readonly location: ErrorLocation = 'header';
  static override readonly field: string = 'Authorization';
}

export class InvalidGeneration extends ProtocolError {
  override readonly status = 401;
  override readonly statusString = 'invalid-generation';
  static override readonly location: ErrorLocation = 'body';
  static override readonly field: string = 'generation';
}

export class InvalidClientState extends ProtocolError {
  override readonly status = 401;
  override readonly statusString = 'invalid-client-state';
  static override readonly location: ErrorLocation = 'header';
  static override readonly field: string = 'X-Client-State';
}

/** DESIGN §9.2: keys_changed_at went backwards, ahead of the generation, or missing once recorded. */
export class InvalidKeysChangedAt extends ProtocolError {
  override readonly status = 401;
  override readonly statusString = 'invalid-keysChangedAt';
  static override readonly location: ErrorLocation = 'header';
  static override readonly field: string = 'X-KeyID';
}

/** DESIGN §9.1: X-KeyID missing or not visible ASCII (other malformations are invalid-credentials). */
export class InvalidKeyId extends ProtocolError {
  override readonly status = 401;
  override readonly statusString = 'invalid-key-id';
  static override readonly location: ErrorLocation = 'header';
  static override readonly field: string = 'X-KeyID';
}

export class NewUsersDisabled extends ProtocolError {
  override readonly status = 403;
  override readonly statusString = 'new-users-disabled';
  static override readonly location: ErrorLocation = 'body';
  static override readonly field: string = 'email';
}

/** ALLOWED_USERS is set and this user is not in it (issue #10). */
export class UserNotAllowed extends ProtocolError {
  override readonly status = 403;
  override readonly statusString = 'user-not-allowed';
  static override readonly location: ErrorLocation = 'body';
  static override readonly field: string = 'email';
}

export class NotFound extends ProtocolError {
  override readonly status = 404;
  static override readonly location: ErrorLocation = 'url';
}

export class MethodNotAllowed extends ProtocolError {
  override readonly status = 405;
  static override readonly location: ErrorLocation = 'url';
  constructor(allowed: string[]) {
    super(`method not allowed; allowed: ${allowed.join(', ')}`, { headers: { Allow: allowed.join(', ') } });
  }
}

export class NotAcceptable extends ProtocolError {
  override readonly status = 406;
  static override readonly location: ErrorLocation = 'header';
  static override readonly field: string = 'Accept';
}

export class PayloadTooLarge extends ProtocolError {
  override readonly status = 413;
  static override readonly location: ErrorLocation = 'body';
}

/** 429 with Retry-After (seconds): a per-user rate limit, e.g. client-state changes per day. */
export class TooManyRequests extends ProtocolError {
  override readonly status = 429;
  readonly retryAfter: number;
  constructor(description: string, retryAfter = 1) {
    super(description, { headers: { 'Retry-After': String(retryAfter) } });
    this.retryAfter = retryAfter;
  }
}

/** An internal fault. Its message goes to the logs only. */
export class InternalError extends ProtocolError {
  override readonly status = 500;
}

export class BadGateway extends ProtocolError {
  override readonly status = 502;
}

/** 503 with Retry-After: a backend down or too slow, maintenance, no node room. */
export class ServiceUnavailable extends ProtocolError {
  override readonly status = 503;
  readonly retryAfter: number;
  constructor(description: string, retryAfter = 10) {
    super(description, { headers: { 'Retry-After': String(retryAfter) } });
    this.retryAfter = retryAfter;
  }
}

/** No node has room for a new user. */
export class NoNodeAvailable extends ServiceUnavailable {}

/** DESIGN §13.1: no key set from the provider yet (nothing fetched, nothing cached), so no token can be checked. */
export class KeysUnavailable extends ServiceUnavailable {}

export class GatewayTimeout extends ProtocolError {
  override readonly status = 504;
}

/** Admin-side errors (CLI, admin RPCs): a missing record or a conflicting one. */
export class RecordNotFound extends ProtocolError {
  override readonly status = 404;
}
export class Conflict extends ProtocolError {
  override readonly status = 409;
}

/** Every error class by name, so an error that crossed gRPC is rebuilt as itself. */
export const errorClasses: Record<string, new (description: string) => ProtocolError> = {
  BadRequest,
  Unauthorized,
  InvalidCredentials,
  InvalidTimestamp,
  InvalidGeneration,
  InvalidClientState,
  InvalidKeysChangedAt,
  InvalidKeyId,
  NewUsersDisabled,
  UserNotAllowed,
  NotFound,
  NotAcceptable,
  PayloadTooLarge,
  TooManyRequests,
  InternalError,
  BadGateway,
  ServiceUnavailable,
  NoNodeAvailable,
  KeysUnavailable,
  GatewayTimeout,
  RecordNotFound,
  Conflict,
};

/**
 * One refusal that Mozilla's Rust tokenserver makes too, and its `errors`
 * entry (DESIGN §11.2), which the login service gives byte for byte. The HTTP
 * status and the status string are those of `error`, our class (DESIGN §3);
 * where Mozilla's status string differs, docs/compatibility.md says so.
 */
export interface MozillaError {
  /** The class the login service throws for it. */
  error: new (description: string) => ProtocolError;
  entry: ErrorDetail;
}

const mozilla = (error: MozillaError['error'], location: ErrorLocation, name: string, description: string): MozillaError => ({
  error,
  entry: { location, name, description },
});

/** Client-state refusals (DESIGN §9.2 steps 2 to 5): Mozilla names the reason after this prefix. */
const CLIENT_STATE_REFUSED = 'Unacceptable client-state value';

/**
 * Every such refusal, from Mozilla's tokenserver-common/src/error.rs and the
 * extractors and handlers that raise it. tests/mozilla-errors.test.ts makes
 * each one happen over HTTP.
 */
export const MOZILLA_ERRORS = {
  /** No Authorization header (the webhook's too). */
  missingAuthorization: mozilla(Unauthorized, 'body', '', 'Unauthorized'),
  /** An Authorization header that is not `<scheme> <credentials>`, or has no credentials. */
  malformedAuthorization: mozilla(Unauthorized, 'body', '', 'Unauthorized'),
  /** A scheme the token endpoint does not speak. */
  unsupportedScheme: mozilla(Unauthorized, 'body', '', 'Unsupported'),
  /** Anything but Bearer on the account-events webhook (our status: invalid-credentials, DESIGN §9.4). */
  webhookUnsupportedScheme: mozilla(InvalidCredentials, 'body', '', 'Unsupported'),
  /** Bad signature, key, issuer, audience, scope or claims; a malformed token or X-KeyID. */
  invalidCredentials: mozilla(InvalidCredentials, 'body', '', 'Unauthorized'),
  /** Expired credentials (Mozilla: invalid-timestamp for BrowserID, invalid-credentials for OAuth). */
  expired: mozilla(InvalidTimestamp, 'body', '', 'Unauthorized'),
  /** A generation that is not a non-negative integer (Mozilla: BrowserID's null fxa-generation). */
  malformedGeneration: mozilla(InvalidGeneration, 'body', '', 'Unauthorized'),
  /** Bearer without X-KeyID. */
  missingKeyId: mozilla(InvalidKeyId, 'header', '', 'Missing X-KeyID header'),
  /** An X-KeyID that is not visible ASCII. */
  invalidKeyId: mozilla(InvalidKeyId, 'header', '', 'Invalid X-KeyID header'),
  /** X-Client-State outside ^[a-zA-Z0-9._-]{1,32}$. */
  invalidClientStateHeader: mozilla(BadRequest, 'header', 'X-Client-State', 'Invalid client state value'),
  /** Bearer: X-Client-State names another state than X-KeyID. */
  clientStateMismatch: mozilla(InvalidClientState, 'body', '', 'Unauthorized'),
  /** DESIGN §9.2 step 1: keys_changed_at rose above the generation. */
  keysChangedAtAboveGeneration: mozilla(InvalidKeysChangedAt, 'body', '', 'Unauthorized'),
  /** Step 2: an empty client state after a non-empty one. */
  emptyClientState: mozilla(InvalidClientState, 'header', 'X-Client-State', `${CLIENT_STATE_REFUSED} empty string`),
  /** Step 3: a client state seen before. */
  staleClientState: mozilla(InvalidClientState, 'header', 'X-Client-State', `${CLIENT_STATE_REFUSED} stale value`),
  /** Step 4: a new client state without a new generation. */
  clientStateWithoutGeneration: mozilla(InvalidClientState, 'header', 'X-Client-State', `${CLIENT_STATE_REFUSED} new value with no generation change`),
  /** Step 5: a new client state without a new keys_changed_at. */
  clientStateWithoutKeysChangedAt: mozilla(InvalidClientState, 'header', 'X-Client-State', `${CLIENT_STATE_REFUSED} new value with no keys_changed_at change`),
  /** Step 6: a generation below the recorded one. */
  oldGeneration: mozilla(InvalidGeneration, 'body', '', 'Unauthorized'),
  /** Step 7: keys_changed_at below the recorded one. */
  oldKeysChangedAt: mozilla(InvalidKeysChangedAt, 'body', '', 'Unauthorized'),
  /** Step 8: no keys_changed_at once one is recorded. */
  missingKeysChangedAt: mozilla(InvalidKeysChangedAt, 'body', '', 'Unauthorized'),
  /** An application the service does not serve. */
  unsupportedApplication: mozilla(NotFound, 'url', 'application', 'Unsupported application'),
  /** A known application at a version it does not serve; the name is that version (unsupportedVersion()). */
  unsupportedVersion: mozilla(NotFound, 'url', '', 'Unsupported application version'),
  /** No node has room (Mozilla's status string: internal-error). */
  noNode: mozilla(NoNodeAvailable, 'internal', '', 'Unexpected error: unable to get a node'),
  /** A backend is down or too slow, maintenance, overload. */
  resourceUnavailable: mozilla(ServiceUnavailable, 'body', '', 'Resource is not available'),
  /** An unexpected fault (Mozilla's status string: internal-error). */
  serverError: mozilla(InternalError, 'internal', '', 'Server error'),
} as const satisfies Record<string, MozillaError>;

export type MozillaErrorKey = keyof typeof MOZILLA_ERRORS;

/** The entry of `unsupportedVersion`, whose name is the version asked for. */
export function unsupportedVersion(version: string): ErrorDetail {
  return { ...MOZILLA_ERRORS.unsupportedVersion.entry, name: version };
}

/**
 * The entry a class gives at the login service when its error carries no
 * `answer`: for these classes Mozilla has one entry whatever the reason.
 * Other classes keep their own detail() (InvalidClientState's message is
 * Mozilla's description: the directory throws it, and only the message crosses gRPC).
 */
const LOGIN_ANSWER_BY_CLASS: Partial<Record<string, MozillaErrorKey>> = {
  Unauthorized: 'missingAuthorization',
  InvalidCredentials: 'invalidCredentials',
  InvalidTimestamp: 'expired',
  InvalidGeneration: 'oldGeneration',
  InvalidKeysChangedAt: 'oldKeysChangedAt',
  NoNodeAvailable: 'noNode',
  ServiceUnavailable: 'resourceUnavailable',
  KeysUnavailable: 'resourceUnavailable',
  InternalError: 'serverError',
};

/** The `errors` entry the login service answers `err` with (DESIGN §11.2). */
export function loginAnswer(err: ProtocolError): ErrorDetail {
  if (err.answer) return err.answer;
  const key = LOGIN_ANSWER_BY_CLASS[err.name];
  return key ? MOZILLA_ERRORS[key].entry : err.detail();
}

/** Invalid configuration: the service stops at start with this message. */
export class ConfigError extends Error {
  constructor(readonly variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}
