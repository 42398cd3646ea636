import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureSecrets, parseShares, secretContent, shareSecrets } from './init-secrets.js';
import { deriveNodeSecret } from '../lib/token.js';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'init-secrets-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const read = (dir: string, f: string) => readFileSync(path.join(dir, f), 'utf8');
const MASTER = 'a'.repeat(40) + 'b'.repeat(40);
const INTERNAL = 'c'.repeat(16) + 'd'.repeat(16);

test('ensureSecrets: generates both secrets, long enough, hex, readable by the owner only', (t) => {
  const dir = tempDir(t);
  assert.deepEqual(ensureSecrets(dir), { master_secrets: 'generated', internal_secret: 'generated' });
  assert.match(read(dir, 'master_secrets'), /^[0-9a-f]{128}$/);
  assert.match(read(dir, 'internal_secret'), /^[0-9a-f]{64}$/);
  for (const f of ['master_secrets', 'internal_secret']) assert.equal(statSync(path.join(dir, f)).mode & 0o777, 0o600, f);
});

test('ensureSecrets: a second run keeps the existing secrets and generates only the missing one', (t) => {
  const dir = tempDir(t);
  ensureSecrets(dir);
  const before = read(dir, 'master_secrets');
  rmSync(path.join(dir, 'internal_secret'));
  assert.deepEqual(ensureSecrets(dir), { master_secrets: 'kept', internal_secret: 'generated' });
  assert.equal(read(dir, 'master_secrets'), before);
});

test('ensureSecrets: values from the environment win over the files, written with mode 0600', (t) => {
  const dir = tempDir(t);
  ensureSecrets(dir);
  const env = { MASTER_SECRETS: ` ${MASTER} `, INTERNAL_SECRET: INTERNAL };
  assert.deepEqual(ensureSecrets(dir, env), { master_secrets: 'from the environment', internal_secret: 'from the environment' });
  assert.equal(read(dir, 'master_secrets'), MASTER);
  assert.equal(read(dir, 'internal_secret'), INTERNAL);
  assert.equal(statSync(path.join(dir, 'master_secrets')).mode & 0o777, 0o600);
  // Unchanged values are not rewritten; empty values count as unset.
  assert.deepEqual(ensureSecrets(dir, env).master_secrets, 'from the environment');
  assert.deepEqual(ensureSecrets(dir, { MASTER_SECRETS: '', INTERNAL_SECRET: '  ' }), { master_secrets: 'kept', internal_secret: 'kept' });
  assert.equal(read(dir, 'master_secrets'), MASTER);
});

test('ensureSecrets: a value from the environment that the services would refuse stops it, naming the variable', (t) => {
  const dir = tempDir(t);
  assert.throws(() => ensureSecrets(dir, { MASTER_SECRETS: 'short' }), /MASTER_SECRETS: .*64 characters/);
  assert.throws(() => ensureSecrets(dir, { MASTER_SECRETS: `${MASTER},dev-only-not-secret-0123456789abcdef` }), /MASTER_SECRETS: .*sample/);
  assert.throws(() => ensureSecrets(dir, { INTERNAL_SECRET: 'short' }), /INTERNAL_SECRET: .*32 bytes/);
});

test('ensureSecrets: a folder it cannot write is an error, not a silent success', (t) => {
  const dir = tempDir(t);
  assert.throws(() => ensureSecrets(path.join(dir, 'missing')), /ENOENT/);
  writeFileSync(path.join(dir, 'file'), '');
  assert.throws(() => ensureSecrets(path.join(dir, 'file'), { MASTER_SECRETS: MASTER }), /ENOTDIR/);
});

test('shareSecrets: each named file, and only it, into its own folder, mode 0600; rewritten only when it changed, a link replaced, not followed', (t) => {
  const dir = tempDir(t);
  const store = path.join(dir, 'store');
  const master = path.join(dir, 'master');
  const internal = path.join(dir, 'internal');
  for (const d of [store, master, internal]) mkdirSync(d);
  ensureSecrets(store);
  const shares = parseShares([`master_secrets=${master}`, `internal_secret=${internal}`]);
  assert.deepEqual(shareSecrets(store, shares), ['master_secrets', 'internal_secret']);
  assert.equal(read(master, 'master_secrets'), read(store, 'master_secrets'));
  assert.equal(read(internal, 'internal_secret'), read(store, 'internal_secret'));
  assert.throws(() => read(master, 'internal_secret'), /ENOENT/, 'the master folder holds the master secrets only');
  assert.throws(() => read(internal, 'master_secrets'), /ENOENT/);
  for (const f of [path.join(master, 'master_secrets'), path.join(internal, 'internal_secret')]) assert.equal(statSync(f).mode & 0o777, 0o600, f);
  assert.deepEqual(shareSecrets(store, shares), [], 'unchanged: nothing rewritten');

  ensureSecrets(store, { MASTER_SECRETS: MASTER });
  const outside = path.join(dir, 'outside');
  writeFileSync(outside, 'untouched');
  rmSync(path.join(master, 'master_secrets'));
  symlinkSync(outside, path.join(master, 'master_secrets'));
  assert.deepEqual(shareSecrets(store, shares), ['master_secrets']);
  assert.equal(read(master, 'master_secrets'), MASTER);
  assert.ok(!lstatSync(path.join(master, 'master_secrets')).isSymbolicLink());
  assert.equal(readFileSync(outside, 'utf8'), 'untouched');
});

test('parseShares: <file>=<folder> with a known file name, anything else refused', () => {
  assert.deepEqual(parseShares(['master_secrets=/m', 'internal_secret=/i', 'node_secrets=/n', 'sync_master_secret=/s', 'storage_db_password=/s']), [
    { name: 'master_secrets', dir: '/m' },
    { name: 'internal_secret', dir: '/i' },
    { name: 'node_secrets', dir: '/n' },
    { name: 'sync_master_secret', dir: '/s' },
    { name: 'storage_db_password', dir: '/s' },
  ]);
  for (const bad of ['master_secrets', 'master_secrets=', 'other=/x', '=/x']) assert.throws(() => parseShares([bad]), /expected <file>=<folder>/, bad);
});

test('ensureSecrets: METRICS_HASH_SECRET and the storage database password only when asked for; the first from the environment when set there', (t) => {
  const dir = tempDir(t);
  assert.deepEqual(Object.keys(ensureSecrets(dir)), ['master_secrets', 'internal_secret']);
  assert.throws(() => read(dir, 'metrics_hash_secret'), /ENOENT/);
  assert.deepEqual(ensureSecrets(dir, {}, ['metrics_hash_secret', 'storage_db_password', 'node_secrets']), {
    master_secrets: 'kept',
    internal_secret: 'kept',
    metrics_hash_secret: 'generated',
    storage_db_password: 'generated',
  });
  assert.match(read(dir, 'metrics_hash_secret'), /^[0-9a-f]{64}$/);
  // Hex: it goes into a database URL as is.
  assert.match(read(dir, 'storage_db_password'), /^[0-9a-f]{32}$/);
  const password = read(dir, 'storage_db_password');
  assert.equal(ensureSecrets(dir, { METRICS_HASH_SECRET: 'mozillas-fxa-metrics-hash-secret' }, ['metrics_hash_secret', 'storage_db_password']).metrics_hash_secret, 'from the environment');
  assert.equal(read(dir, 'metrics_hash_secret'), 'mozillas-fxa-metrics-hash-secret');
  assert.equal(read(dir, 'storage_db_password'), password, 'kept');
});

test('derived files: node_secrets and sync_master_secret for NODE_URL, as `cli nodes secret` prints them; recomputed from the master secrets on every run', (t) => {
  const dir = tempDir(t);
  const older = 'e'.repeat(64);
  ensureSecrets(dir, { MASTER_SECRETS: `${MASTER},${older}` });
  const env = { NODE_URL: 'https://sync.example.com/', TOKEN_SECRETS: 'derived' };
  // NODE_URL as setup registers it: without the trailing slash.
  const newest = deriveNodeSecret(MASTER, 'https://sync.example.com');
  assert.equal(secretContent(dir, 'node_secrets', env), `${newest}\n${deriveNodeSecret(older, 'https://sync.example.com')}\n`);
  assert.equal(secretContent(dir, 'sync_master_secret', env), newest);
  assert.equal(secretContent(dir, 'sync_master_secret', { ...env, TOKEN_SECRETS: 'master' }), MASTER, 'TOKEN_SECRETS=master: the newest master secret itself');

  const node = path.join(dir, 'node');
  mkdirSync(node);
  const shares = parseShares([`sync_master_secret=${node}`, `storage_db_password=${node}`]);
  ensureSecrets(dir, {}, shares.map((s) => s.name));
  assert.deepEqual(shareSecrets(dir, shares, env), ['sync_master_secret', 'storage_db_password']);
  assert.equal(read(node, 'sync_master_secret'), newest);
  assert.equal(statSync(path.join(node, 'sync_master_secret')).mode & 0o777, 0o600);
  assert.ok(!readFileSync(path.join(dir, 'master_secrets'), 'utf8').includes(read(node, 'sync_master_secret')));
  assert.throws(() => read(dir, 'sync_master_secret'), /ENOENT/, 'derived files are not kept in the secrets folder');
  // A rotation reaches the node at the next run.
  const rotated = 'f'.repeat(80);
  ensureSecrets(dir, { MASTER_SECRETS: `${rotated},${MASTER}` });
  assert.deepEqual(shareSecrets(dir, shares, env), ['sync_master_secret']);
  assert.equal(read(node, 'sync_master_secret'), deriveNodeSecret(rotated, 'https://sync.example.com'));
});

test('derived files: a missing or bad NODE_URL, and node_secrets with TOKEN_SECRETS=master, stop it naming the variable', (t) => {
  const dir = tempDir(t);
  ensureSecrets(dir);
  assert.throws(() => secretContent(dir, 'sync_master_secret', {}), /NODE_URL: is required/);
  assert.throws(() => secretContent(dir, 'node_secrets', { NODE_URL: 'sync.example.com' }), /NODE_URL: must be an absolute URL/);
  assert.throws(() => secretContent(dir, 'node_secrets', { NODE_URL: 'https://sync.example.com', TOKEN_SECRETS: 'master' }), /TOKEN_SECRETS: is master/);
  assert.throws(() => secretContent(dir, 'node_secrets', { NODE_URL: 'https://sync.example.com', TOKEN_SECRETS: 'both' }), /TOKEN_SECRETS: must be derived or master/);
});
