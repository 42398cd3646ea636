// The one place the login service turns errors into responses (DESIGN §3):
// `{"status", "errors": [{location, name, description}]}` as application/json,
// with the error's own headers (Retry-After, Allow, ...). The entry is
// Mozilla's wherever Mozilla's tokenserver refuses the same thing (DESIGN
// §11.2, lib/errors.ts loginAnswer); the error's message goes to the access
// line. Anything that is not a ProtocolError is logged and answered with a generic 500.
import type { Context, Middleware } from 'koa';
import { BadRequest, InternalError, loginAnswer, NotFound, PayloadTooLarge, ProtocolError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import { requestLog } from './shared.js';

/** Sends `body` as exactly `application/json` (no charset parameter, as Mozilla's servers). */
export function sendJson(ctx: Context, status: number, body: unknown): void {
  ctx.status = status;
  // Set before the body, so Koa does not look up a text/plain type first.
  ctx.set('Content-Type', 'application/json');
  ctx.body = JSON.stringify(body);
}

/** Koa's own http errors (bad URL encoding, ...) mapped onto our classes by status. */
function fromHttpError(err: unknown): ProtocolError {
  const status = (err as { status?: unknown })?.status;
  const message = 'the request could not be processed';
  if (status === 404) return new NotFound('no such endpoint');
  if (status === 413) return new PayloadTooLarge(message);
  if (typeof status === 'number' && status >= 400 && status < 500) return new BadRequest(message);
  return new InternalError(err instanceof Error ? err.message : String(err));
}

export interface ErrorHandlerOptions {
  log: Logger;
  /** WWW-Authenticate challenges sent with every 401, one header each. */
  challenges: readonly string[];
}

export function errorHandler(opts: ErrorHandlerOptions): Middleware {
  return async function handleErrors(ctx, next) {
    try {
      await next();
    } catch (caught) {
      const err = caught instanceof ProtocolError ? caught : fromHttpError(caught);
      // The access line (requestContext) reads the status string from here.
      ctx.state.error = err;
      if (!(caught instanceof ProtocolError) && err.status >= 500) {
        requestLog(ctx, opts.log).error({ err: caught, path: ctx.path }, 'request failed unexpectedly');
      } else if (!err.expose) {
        requestLog(ctx, opts.log).warn({ err: err.message, class: err.name, path: ctx.path }, 'request failed');
      }
      for (const [name, value] of Object.entries(err.headers)) ctx.set(name, value);
      if (err.status === 401) ctx.set('WWW-Authenticate', [...opts.challenges]);
      sendJson(ctx, err.status, { status: err.statusString, errors: [loginAnswer(err)] });
    }
  };
}
