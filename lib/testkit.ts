// Assertions shared by the configuration tests.
import assert from 'node:assert/strict';
import { ConfigError } from './errors.js';

/** `fn` stops with a ConfigError naming `variable` (and saying `message`, when given). */
export function refused(fn: () => unknown, variable: string, message?: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.equal(e.variable, variable);
    if (message) assert.match(e.message, message);
    return true;
  });
}
