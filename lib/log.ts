// Structured JSON logs. Secrets (tokens, keys, assertions, master secrets)
// are never passed to the logger; the redact list is a second line of defence.
import cluster from 'node:cluster';
import { pino, type Logger } from 'pino';
import { DEFAULTS } from './config.js';

export type { Logger };

const REDACT = [
  'authorization',
  '*.authorization',
  'req.headers.authorization',
  'headers.authorization',
  'assertion',
  '*.assertion',
  'token',
  '*.token',
  'id',
  'key',
  '*.key',
  'secret',
  '*.secret',
  'masterSecrets',
  '*.masterSecrets',
  'nodeSecrets',
  '*.nodeSecrets',
];

const CENSOR = '[redacted]';
/** The names a flat line could hold: the rest are paths into nested objects. */
const TOP_LEVEL_REDACT = REDACT.filter((p) => !p.includes('.'));

let timeSecond = NaN;
let timePrefix = '';

/**
 * pino's isoTime (`,"time":"<ISO 8601>"`), but the date and time up to the
 * second are formatted once a second rather than on every line.
 */
export function isoTime(now = Date.now()): string {
  const second = Math.floor(now / 1000);
  if (second !== timeSecond) {
    timeSecond = second;
    // "2026-11-22T15:02:18." of "2026-11-22T15:02:18.145Z"
    timePrefix = `,"time":"${new Date(second * 1000).toISOString().slice(0, -4)}`;
  }
  const ms = now - second * 1000;
  return `${timePrefix}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`;
}

const root = pino({
  level: process.env.LOG_LEVEL ?? DEFAULTS.LOG_LEVEL,
  // A cluster worker's lines say which worker (LOGIN_WORKERS): its id, new for each worker the primary starts.
  base: cluster.worker ? { pid: process.pid, worker: cluster.worker.id } : { pid: process.pid },
  redact: { paths: REDACT, censor: CENSOR },
  timestamp: isoTime,
});

export function logger(service: string): Logger {
  return root.child({ service });
}

/**
 * `log` for lines whose every value is a string or a number (an access line
 * per request): the same output, but only the top-level names are redacted,
 * since a path into a nested object cannot match such a line. With the
 * wildcard paths pino runs every value through the redactor (~8 µs a line).
 */
export function flatLogger(log: Logger): Logger {
  return log.child({}, { redact: { paths: TOP_LEVEL_REDACT, censor: CENSOR } });
}
