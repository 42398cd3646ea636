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

/** A line of the access log: flat, every value a string or a number; undefined ones are left out, as pino does. */
export type AccessFields = Record<string, string | number | undefined>;

export interface AccessLog {
  /** Writes one line at info with `msg: "request"`, unless the logger's level is above info. */
  write(fields: AccessFields): void;
}

const INFO = 30;

/** pino's destination (sonic-boom): asynchronous, so flushed by hand at exit. */
interface LogStream {
  write(s: string): unknown;
  flushSync?(): void;
}

const atExit: Array<() => void> = [];
/** Lines of the last turn are written when the process ends before the turn does (after pino's own flush, which leaves the stream open). */
function flushAtExit(flush: () => void): void {
  if (atExit.length === 0) process.once('exit', () => atExit.forEach((f) => f()));
  atExit.push(flush);
}
const TOP_LEVEL_REDACTED = new Set(TOP_LEVEL_REDACT);

/**
 * The access line of every request, as `log.info(fields, 'request')` would
 * write it (the same bindings, time and redacted names), but built directly
 * and written once per event-loop turn for all the lines of that turn, to
 * the logger's own stream. Through pino a line cost ~6 µs more: its
 * serializer, a redaction pass and a write to the stream per line. At low
 * traffic a line is written at the end of its turn, as soon as through pino.
 */
export function accessLog(log: Logger): AccessLog {
  const bindings = (log as unknown as Record<symbol, string>)[pino.symbols.chindingsSym];
  const stream = (log as unknown as Record<symbol, LogStream>)[pino.symbols.streamSym];
  let pending = '';
  const flush = () => {
    const lines = pending;
    pending = '';
    stream.write(lines);
  };
  flushAtExit(() => {
    if (pending === '') return;
    flush();
    stream.flushSync?.();
  });
  return {
    write(fields) {
      if (log.levelVal > INFO) return;
      let line = `{"level":30${isoTime()}${bindings}`;
      for (const name in fields) {
        const value = fields[name];
        if (value === undefined) continue;
        line += `,${JSON.stringify(name)}:${TOP_LEVEL_REDACTED.has(name) ? `"${CENSOR}"` : JSON.stringify(value)}`;
      }
      line += ',"msg":"request"}\n';
      if (pending === '') setImmediate(flush);
      pending += line;
    },
  };
}
