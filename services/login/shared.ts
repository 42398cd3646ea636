// Middleware shared by the login endpoints, and what every endpoint gets.
import type { Middleware } from 'koa';
import { randomUUID } from 'node:crypto';
import type { LoginConfig } from '../../lib/config.js';
import { MethodNotAllowed } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { AssertionVerifier } from './assertion.js';
import type { Backends } from './backends.js';

export interface LoginDeps {
  config: LoginConfig;
  verifier: AssertionVerifier;
  backends: Backends;
  log: Logger;
}

export const GET_HEAD = ['GET', 'HEAD'] as const;

/** 405 with `Allow` for any other method (the path is known by now). */
export function allowMethods(methods: readonly string[]): Middleware {
  return async function checkMethod(ctx, next) {
    if (!methods.includes(ctx.method)) throw new MethodNotAllowed([...methods]);
    await next();
  };
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Outermost: a request id (the caller's X-Request-Id when sane), X-Timestamp
 * on every response, one log line per request. Never logs headers or query.
 */
export function requestContext(log: Logger): Middleware {
  return async function trackRequest(ctx, next) {
    const given = ctx.get('X-Request-Id');
    const requestId = REQUEST_ID.test(given) ? given : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    ctx.set('X-Timestamp', String(Math.floor(Date.now() / 1000)));
    const started = performance.now();
    try {
      await next();
    } finally {
      log.info({ requestId, method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - started) }, 'request');
    }
  };
}
