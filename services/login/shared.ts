// Middleware shared by the login endpoints, and what every endpoint gets.
import type { Middleware } from 'koa';
import type { LoginConfig } from '../../lib/config.js';
import { MethodNotAllowed, ServiceUnavailable, type ProtocolError } from '../../lib/errors.js';
import { decideLoad, type LoopDelay } from '../../lib/load.js';
import { accessLog, type Logger } from '../../lib/log.js';
import { statusStringOf, type LoginMetrics } from '../../lib/metrics.js';
import { REQUEST_ID_HEADER, requestIdFrom } from '../../lib/request-id.js';
import type { Backends } from './backends.js';
import type { KeySource } from './jwks-source.js';
import type { Authenticator } from './schemes.js';

export interface LoginDeps {
  config: LoginConfig;
  /** The enabled login schemes (schemes.ts). */
  auth: Authenticator;
  backends: Backends;
  log: Logger;
  metrics: LoginMetrics;
  loopDelay: LoopDelay;
  /** The key sets of Bearer and of the webhook, when they are on (jwks-source.ts). */
  keySources: LoginKeySources;
}

export interface LoginKeySources {
  oauth?: KeySource;
  webhook?: KeySource;
}

export const GET_HEAD = ['GET', 'HEAD'] as const;

/** 405 with `Allow` for any other method (the path is known by now). */
export function allowMethods(methods: readonly string[]): Middleware {
  // A plain function returning next(): no async frame of its own per request.
  return function checkMethod(ctx, next) {
    if (!methods.includes(ctx.method)) throw new MethodNotAllowed([...methods]);
    return next();
  };
}

/** A path for the access line: unknown paths are whatever the client sent, so cut short. */
const MAX_LOGGED_PATH = 200;
/** A refusal's reason on the access line: it may quote what the client sent. */
const MAX_LOGGED_REASON = 200;

/**
 * The request's logger: carries its request id. Made when a line other than
 * the access line is logged (errors), not for every request.
 */
export function requestLog(ctx: { state: { requestId?: string } }, log: Logger): Logger {
  return ctx.state.requestId ? log.child({ requestId: ctx.state.requestId }) : log;
}

/**
 * Outermost: a request id (the caller's X-Request-Id when sane, in
 * `ctx.state.requestId`), X-Timestamp and X-Content-Type-Options on every
 * response, one access line and the request metrics per request. The access
 * line never holds headers or the query; for a 4xx refusal it holds the
 * reason, which the body (Mozilla's wording, DESIGN §11.2) often leaves out.
 */
export function requestContext(log: Logger, metrics: LoginMetrics): Middleware {
  const access = accessLog(log);
  return async function trackRequest(ctx, next) {
    const requestId = requestIdFrom(ctx.get(REQUEST_ID_HEADER));
    ctx.state.requestId = requestId;
    ctx.set(REQUEST_ID_HEADER, requestId);
    ctx.set('X-Timestamp', String(Math.floor(Date.now() / 1000)));
    // Every body is JSON: no browser may read one as anything else (DESIGN §11.2).
    ctx.set('X-Content-Type-Options', 'nosniff');
    const started = performance.now();
    try {
      await next();
    } finally {
      const seconds = (performance.now() - started) / 1000;
      const statusString = statusStringOf(ctx.status, ctx.state.error);
      // A route template, so a label never holds what a client typed.
      const route = typeof ctx._matchedRoute === 'string' ? ctx._matchedRoute : 'unmatched';
      metrics.observeRequest({ route, method: ctx.method, status: ctx.status, statusString, seconds });
      const uid = (ctx.state.user as { uid?: number } | undefined)?.uid;
      const error = ctx.state.error as ProtocolError | undefined;
      // 5xx messages may hold internals; errorHandler logs those on their own line.
      const reason = error?.expose ? error.message.slice(0, MAX_LOGGED_REASON) : undefined;
      // The request id as a field rather than through a child logger made per request;
      // the fields that are undefined are left out.
      access.write({ requestId, method: ctx.method, path: ctx.path.slice(0, MAX_LOGGED_PATH), status: ctx.status, statusString, reason, ms: Math.round(seconds * 1000), uid: uid || undefined });
    }
  };
}

/**
 * The overload signal on token requests: X-Backoff above the in-flight or
 * event-loop thresholds, 503 + Retry-After beyond the hard cap (lib/load.ts).
 * One counter per endpoint instance, so each login instance counts its own.
 */
export function shedLoad(deps: Pick<LoginDeps, 'config' | 'metrics' | 'loopDelay'>): Middleware {
  let inFlight = 0;
  return async function shedLoad(ctx, next) {
    inFlight++;
    deps.metrics.tokenRequestsInFlight.inc();
    try {
      const decision = decideLoad({ inFlight, loopDelayMs: deps.loopDelay.ms() }, deps.config.overload);
      if (decision.action !== 'serve') {
        deps.metrics.overload.inc({ action: decision.action });
        ctx.set('X-Backoff', String(decision.backoffSeconds));
      }
      if (decision.action === 'reject') throw new ServiceUnavailable('too many requests in flight', decision.retryAfter);
      await next();
    } finally {
      inFlight--;
      deps.metrics.tokenRequestsInFlight.dec();
    }
  };
}
