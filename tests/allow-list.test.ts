// ALLOWED_USERS (issue #10 item 3) through the embedded stack: the list comes
// from a file, a user outside it gets 403 user-not-allowed before any record is
// made, existing users outside it are refused too, and SIGHUP reloads the file.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCli } from '../cli/run.js';
import { APP, isErrorBody, startTestStack, type TestStack } from './support/stack.js';

let stack: TestStack;
let dir: string;
let file: string;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'allow-list-'));
  file = path.join(dir, 'allowed.txt');
  writeFileSync(file, '# who may use it\nalice@example.com\n@corp.example\n');
  stack = await startTestStack({ ALLOWED_USERS: `@${file}` });
});
after(async () => {
  await stack.close();
  rmSync(dir, { recursive: true, force: true });
});

async function recordExists(email: string): Promise<boolean> {
  let out = '';
  const env = { ...stack.env, DIRECTORY_ADDR: stack.directoryAddr };
  const code = await runCli(['users', 'show', APP, email], env, { stdout: (t) => (out += t), stderr: (t) => (out += t) });
  if (code !== 0) assert.match(out, /no user/);
  return code === 0;
}

/** Lets the SIGHUP handler run and log before the next request. */
async function hangup(): Promise<void> {
  process.kill(process.pid, 'SIGHUP');
  await new Promise((r) => setTimeout(r, 50));
}

test('listed addresses and domains log in; anyone else gets 403 user-not-allowed and no record', async () => {
  assert.equal((await stack.login('alice@example.com')).status, 200);
  assert.equal((await stack.login('anyone@corp.example')).status, 200);
  const refused = await stack.login('mallory@example.com');
  assert.equal(refused.status, 403);
  assert.ok(isErrorBody(refused.json, 'user-not-allowed'), refused.text);
  assert.equal(await recordExists('mallory@example.com'), false, 'checked before any record is created');
  assert.equal(await recordExists('alice@example.com'), true);
});

test('SIGHUP reloads the file: a user taken off is refused although her record exists; a bad file keeps the last list', async () => {
  writeFileSync(file, '@corp.example\nbob@example.com\n');
  await hangup();
  const alice = await stack.login('alice@example.com');
  assert.equal(alice.status, 403);
  assert.ok(isErrorBody(alice.json, 'user-not-allowed'));
  assert.equal((await stack.login('bob@example.com')).status, 200);

  writeFileSync(file, 'not an entry\n');
  await hangup();
  assert.equal((await stack.login('bob@example.com')).status, 200, 'the previous list stays in force');
  assert.equal((await stack.login('alice@example.com')).status, 403);
});
