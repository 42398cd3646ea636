import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { allowedUsers, allowListFile, isAllowedUser, parseAllowList } from './config.js';
import { ConfigError } from './errors.js';

test('parseAllowList: addresses and @domains, separated by commas, spaces or lines, # comments; normalised', () => {
  const list = parseAllowList('Alice@Example.COM, @Corp.Example\n# staff\nbob@x.example  @y.example # trailing\n\n');
  assert.deepEqual([...list.emails], ['Alice@example.com', 'bob@x.example']);
  assert.deepEqual([...list.domains], ['corp.example', 'y.example']);
});

test('parseAllowList refuses entries that are neither, naming the variable', () => {
  for (const bad of ['alice', 'alice@', '@', '@a@b', 'a@b, nope']) {
    assert.throws(() => parseAllowList(bad), (e: unknown) => e instanceof ConfigError && /^ALLOWED_USERS: expected name@domain or @domain/.test(e.message), bad);
  }
});

test('isAllowedUser: an exact address, or any address of a listed domain (not its subdomains)', () => {
  const list = parseAllowList('Alice@example.com, @corp.example');
  assert.equal(isAllowedUser(list, 'Alice@example.com'), true);
  assert.equal(isAllowedUser(list, 'alice@example.com'), false, 'the local part keeps its case');
  assert.equal(isAllowedUser(list, 'bob@example.com'), false);
  assert.equal(isAllowedUser(list, 'anyone@corp.example'), true);
  assert.equal(isAllowedUser(list, 'x@eu.corp.example'), false);
  assert.equal(isAllowedUser(parseAllowList(''), 'a@b.example'), false, 'an empty list admits nobody');
});

test('ALLOWED_USERS: inline, or @<path with a slash> read from a file; unset means no list', () => {
  assert.equal(allowListFile('@corp.example'), undefined);
  assert.equal(allowListFile('@./allowed.txt'), './allowed.txt');
  assert.equal(allowListFile('@/etc/ts/allowed'), '/etc/ts/allowed');
  assert.equal(allowedUsers({}), undefined);
  assert.equal(allowedUsers({ ALLOWED_USERS: '  ' }), undefined);
  assert.deepEqual([...allowedUsers({ ALLOWED_USERS: '@corp.example,a@b.example' })!.list.domains], ['corp.example']);
  const dir = mkdtempSync(path.join(tmpdir(), 'allow-'));
  try {
    const file = path.join(dir, 'allowed.txt');
    writeFileSync(file, 'a@b.example\n@c.example\n');
    const src = allowedUsers({ ALLOWED_USERS: `@${file}` })!;
    assert.equal(src.file, file);
    assert.deepEqual([...src.list.emails], ['a@b.example']);
    assert.throws(() => allowedUsers({ ALLOWED_USERS: `@${dir}/missing` }), /^ConfigError: ALLOWED_USERS: cannot read .*ENOENT/);
    writeFileSync(file, 'oops\n');
    assert.throws(() => allowedUsers({ ALLOWED_USERS: `@${file}` }), /ALLOWED_USERS \(.*allowed\.txt\): expected name@domain/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---- found missing by mutation testing (npm run mutation -- lib/config.ts) ----

test('ALLOWED_USERS: the file form starts with the @; an address with a slash after it is no path', () => {
  assert.equal(allowListFile('name@./allowed.txt'), undefined);
  assert.equal(allowListFile('a@corp.example/x'), undefined);
});
