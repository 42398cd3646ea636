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

/** What JSON must escape, and what it need not (U+2028). */
const AWKWARD_PATH = '/1.5/7/"x\\\u2028\u0001\u00e9';

test('accessLog writes a line exactly as logger() does, top-level secret names redacted, and leaves its parent as it was', () => {
  const [viaLogger, viaAccess, second, parentAfter] = linesOf(`
    import { logger, accessLog } from ${JSON.stringify(LOG_MODULE)};
    const log = logger('svc');
    const line = { requestId: 'r-1', method: 'GET', path: ${JSON.stringify(AWKWARD_PATH)}, status: 200, ms: 3, gone: undefined, uid: 7, key: 'K', id: 'I', token: 'T', secret: 'S', authorization: 'A', assertion: 'X', masterSecrets: 'M' };
    log.info(line, 'request');
    const access = accessLog(log);
    access.write(line);
    access.write({ requestId: 'r-2', status: 503 });
    // pino writes this line at once; the access lines went out at the end of the turn before.
    setImmediate(() => log.info({ nested: { key: 'K2', authorization: 'A2' } }, 'nested'));
  `);
  assert.deepEqual(viaAccess, viaLogger);
  assert.equal(viaAccess.service, 'svc');
  assert.equal(viaAccess.uid, 7);
  assert.equal(viaAccess.path, AWKWARD_PATH);
  assert.equal('gone' in viaAccess, false);
  for (const name of ['key', 'id', 'token', 'secret', 'authorization', 'assertion', 'masterSecrets']) assert.equal(viaAccess[name], '[redacted]', name);
  assert.deepEqual(second, { level: 30, pid: viaLogger.pid, service: 'svc', requestId: 'r-2', status: 503, msg: 'request' });
  // The parent keeps its full list, nested paths included.
  assert.deepEqual(parentAfter.nested, { key: '[redacted]', authorization: '[redacted]' });
});

test('accessLog: the lines of the last turn are written when the process exits within it, and none above info', () => {
  const lines = linesOf(`
    import { logger, accessLog } from ${JSON.stringify(LOG_MODULE)};
    const access = accessLog(logger('svc'));
    access.write({ requestId: 'last-1' });
    access.write({ requestId: 'last-2' });
    process.exit(0);
  `);
  assert.deepEqual(lines.map((l) => l.requestId), ['last-1', 'last-2']);
  const quiet = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `
    import { logger, accessLog } from ${JSON.stringify(LOG_MODULE)};
    const log = logger('svc');
    accessLog(log).write({ requestId: 'not-written' });
    log.warn('a warning');
  `], { env: { ...process.env, LOG_LEVEL: 'warn' }, encoding: 'utf8' });
  assert.deepEqual(quiet.trim().split('\n').map((l) => JSON.parse(l).msg), ['a warning']);
});

test('isoTime is pino’s isoTime, whatever the millisecond, and in any order', () => {
  const times = [0, 1, 9, 10, 99, 100, 999, 1000, 1_700_000_000_000, 1_700_000_000_007, 1_700_000_000_042, 1_700_000_000_999, 1_700_000_001_000, 1_699_999_999_999, 4_102_444_800_123];
  for (const t of [...times, ...times.reverse()]) assert.equal(isoTime(t), `,"time":"${new Date(t).toISOString()}"`, String(t));
  assert.match(isoTime(), /^,"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"$/);
});
