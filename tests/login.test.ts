// The login suite on temp SQLite files (tests/login-mongo.test.ts runs it on MongoDB).
import { after } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loginSuite } from './login.suite.js';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

loginSuite('SQLite', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'login-test-'));
  dirs.push(dir);
  return `sqlite:${path.join(dir, 'tokenserver.db')}`;
});
