// Structured JSON logs. Secrets (tokens, keys, assertions, master secrets)
// are never passed to the logger; the redact list is a second line of defence.
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
];

const root = pino({
  level: process.env.LOG_LEVEL ?? DEFAULTS.LOG_LEVEL,
  base: { pid: process.pid },
  redact: { paths: REDACT, censor: '[redacted]' },
  timestamp: pino.stdTimeFunctions.isoTime,
});

export function logger(service: string): Logger {
  return root.child({ service });
}
