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

  // Class defaults are statics, not instance fields: a subclass's field
  // initializer would run after this constructor and overwrite the caller's value.
  static readonly location: ErrorLocation = 'internal';
  static readonly field: string = '';

  constructor(description: string, opts: { location?: ErrorLocation; field?: string; headers?: Record<string, string> } = {}) {
    super(description);
    this.name = new.target.name;
    const cls = new.target as unknown as typeof ProtocolError;
    this.location = opts.location ?? cls.location;
    this.field = opts.field ?? cls.field;
    if (opts.headers) this.headers = { ...opts.headers };
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
  GatewayTimeout,
  RecordNotFound,
  Conflict,
};

/** Invalid configuration: the service stops at start with this message. */
export class ConfigError extends Error {
  constructor(readonly variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}
