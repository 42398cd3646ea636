// Request ids: the caller's X-Request-Id when it is sane (so a client's or a
// proxy's id follows the request through every log line), else a new one.
import { randomUUID } from 'node:crypto';

export const REQUEST_ID_HEADER = 'X-Request-Id';

/** Short, and safe to put in a log line or a header as is. */
const SANE = /^[A-Za-z0-9._-]{1,64}$/;

export function isSaneRequestId(value: unknown): value is string {
  return typeof value === 'string' && SANE.test(value);
}

/** `given` when sane, else a fresh UUID. */
export function requestIdFrom(given: unknown): string {
  return isSaneRequestId(given) ? given : randomUUID();
}
