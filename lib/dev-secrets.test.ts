import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { internalSecret, masterSecrets } from './config.js';
import { loadOrCreateDevSecrets, readDevInternalSecret } from './dev-secrets.js';

function inTempDir(fn: (dir: string, file: string) => void): void {
  const dir = mkdtempSync(path.join(tmpdir(), 'dev-secrets-'));
  try {
    fn(path.join(dir, 'data'), path.join(dir, 'data', 'secrets.json'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('generates secrets the config accepts, in a 0600 file in a 0700 folder, and reuses them', () => {
  inTempDir((dir, file) => {
    assert.equal(readDevInternalSecret(dir), undefined);
    const first = loadOrCreateDevSecrets(dir);
    assert.deepEqual(masterSecrets({ MASTER_SECRETS: first.masterSecrets.join(',') }), first.masterSecrets);
    assert.equal(internalSecret({ INTERNAL_SECRET: first.internalSecret }), first.internalSecret);
    assert.equal(first.replacedMaster, false);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.deepEqual(loadOrCreateDevSecrets(dir), first);
    assert.equal(readDevInternalSecret(dir), first.internalSecret);
  });
});

test("an older version's file (short master secret, no internal secret, 0644) is brought up to date", () => {
  inTempDir((dir, file) => {
    loadOrCreateDevSecrets(dir);
    writeFileSync(file, JSON.stringify({ masterSecrets: ['0123456789abcdef0123456789abcdef'] }), { mode: 0o644 });
    const secrets = loadOrCreateDevSecrets(dir);
    assert.equal(secrets.replacedMaster, true);
    assert.equal(secrets.masterSecrets[0].length, 64);
    assert.deepEqual(JSON.parse(readFileSync(file, 'utf8')), { masterSecrets: secrets.masterSecrets, internalSecret: secrets.internalSecret });
    assert.equal(statSync(file).mode & 0o777, 0o600);
    // A good master secret is kept while the missing internal secret is added.
    writeFileSync(file, JSON.stringify({ masterSecrets: secrets.masterSecrets }));
    const again = loadOrCreateDevSecrets(dir);
    assert.deepEqual(again.masterSecrets, secrets.masterSecrets);
    assert.equal(again.replacedMaster, false);
    writeFileSync(file, '{not json');
    assert.throws(() => loadOrCreateDevSecrets(dir), /not valid JSON/);
  });
});
