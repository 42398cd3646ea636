// The loggers' real output: a child process logs through them at info (the
// root logger writes to stdout), and its lines are compared.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { isoTime } from './log.js';
import { fileURLToPath } from 'node:url';

const LOG_MODULE = fileURLToPath(new URL('./log.ts', import.meta.url));

function linesOf(script: string): Array<Record<string, unknown>> {
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    env: { ...process.env, LOG_LEVEL: 'info' },
    encoding: 'utf8',
  });
  return out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .map(({ time: _time, ...rest }) => rest);
}

test('flatLogger writes a flat line exactly as logger() does, top-level secret names redacted, and leaves its parent as it was', () => {
  const [viaLogger, viaFlat, parentAfter] = linesOf(`
    import { logger, flatLogger } from ${JSON.stringify(LOG_MODULE)};
    const log = logger('svc');
    const line = { requestId: 'r-1', method: 'GET', path: '/1.5/7/x', status: 200, ms: 3, gone: undefined, uid: 7, key: 'K', id: 'I', token: 'T', secret: 'S', authorization: 'A', assertion: 'X', masterSecrets: 'M' };
    log.info(line, 'request');
    flatLogger(log).info(line, 'request');
    log.info({ nested: { key: 'K2', authorization: 'A2' } }, 'nested');
  `);
  assert.deepEqual(viaFlat, viaLogger);
  assert.equal(viaFlat.service, 'svc');
  assert.equal(viaFlat.uid, 7);
  assert.equal('gone' in viaFlat, false);
  for (const name of ['key', 'id', 'token', 'secret', 'authorization', 'assertion', 'masterSecrets']) assert.equal(viaFlat[name], '[redacted]', name);
  // The parent keeps its full list, nested paths included.
  assert.deepEqual(parentAfter.nested, { key: '[redacted]', authorization: '[redacted]' });
});

test('isoTime is pino’s isoTime, whatever the millisecond, and in any order', () => {
  const times = [0, 1, 9, 10, 99, 100, 999, 1000, 1_700_000_000_000, 1_700_000_000_007, 1_700_000_000_042, 1_700_000_000_999, 1_700_000_001_000, 1_699_999_999_999, 4_102_444_800_123];
  for (const t of [...times, ...times.reverse()]) assert.equal(isoTime(t), `,"time":"${new Date(t).toISOString()}"`, String(t));
  assert.match(isoTime(), /^,"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"$/);
});
