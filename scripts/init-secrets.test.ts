import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureSecrets } from './init-secrets.js';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'init-secrets-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('ensureSecrets: creates both secrets, long enough, hex, readable by the owner only', (t) => {
  const dir = tempDir(t);
  assert.deepEqual(ensureSecrets(dir).sort(), ['internal_secret', 'master_secrets']);
  const master = readFileSync(path.join(dir, 'master_secrets'), 'utf8');
  const internal = readFileSync(path.join(dir, 'internal_secret'), 'utf8');
  assert.match(master, /^[0-9a-f]{128}$/);
  assert.match(internal, /^[0-9a-f]{64}$/);
  for (const f of ['master_secrets', 'internal_secret']) assert.equal(statSync(path.join(dir, f)).mode & 0o777, 0o600, f);
});

test('ensureSecrets: a second run keeps the existing secrets', (t) => {
  const dir = tempDir(t);
  ensureSecrets(dir);
  const before = readFileSync(path.join(dir, 'master_secrets'), 'utf8');
  rmSync(path.join(dir, 'internal_secret'));
  assert.deepEqual(ensureSecrets(dir), ['internal_secret']);
  assert.equal(readFileSync(path.join(dir, 'master_secrets'), 'utf8'), before);
  assert.deepEqual(ensureSecrets(dir), []);
});

test('ensureSecrets: a folder it cannot write is an error, not a silent success', (t) => {
  const dir = tempDir(t);
  assert.throws(() => ensureSecrets(path.join(dir, 'missing')), /ENOENT/);
});
