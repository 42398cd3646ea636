// A logger whose lines a test reads back, as pino writes them.
import { pino } from 'pino';
import type { Logger } from '../../lib/log.js';

export function capturedLog(level = 'debug'): { log: Logger; lines: Array<Record<string, any>> } {
  const lines: Array<Record<string, any>> = [];
  return { log: pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line)) }), lines };
}
