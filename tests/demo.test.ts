// `npm run demo` as a user runs it: a child process against the embedded
// stack (started in-process on ephemeral ports, data in a temp folder).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startStack, type Stack } from '../scripts/stack.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let dir: string;
let stack: Stack;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'demo-test-'));
  stack = await startStack({
    DATA_DIR: dir,
    APPLICATIONS: 'sync/1.5',
    MASTER_SECRETS: randomBytes(32).toString('hex'),
    LOGIN_PORT: '0',
    GATEWAY_PORT: '0',
    DIRECTORY_PORT: '0',
    NODEASSIGN_PORT: '0',
    DEMO_APP_PORT: '0',
  });
});

after(async () => {
  await stack?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `npm run demo` with the given environment; asynchronous, since the stack runs in this process. */
function runDemo(env: Record<string, string>, args: string[] = []): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      'npm',
      ['run', '--silent', 'demo', '--', ...args],
      { cwd: ROOT, env: { ...process.env, APPLICATIONS: 'sync/1.5', ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

test('npm run demo: token, then signed GET and POST answered by the demo app as the same uid', async () => {
  const run = await runDemo({ LOGIN_URL: stack.loginUrl, DATA_DIR: dir }, ['--email', 'alice@example.com']);
  assert.equal(run.code, 0, run.stderr);
  const out = run.stdout;
  assert.match(out, /assertion made for alice@example\.com/);
  const uid = /token received: uid=(\d+) api_endpoint=(\S+) duration=3600s/.exec(out);
  assert.ok(uid, out);
  assert.equal(uid[2], `${stack.gatewayUrl}/1.5/${uid[1]}`);
  const answers = [...out.matchAll(/demo app answered (\d+): uid=(\d+) method=(\w+)/g)].map((m) => [m[1], m[2], m[3]]);
  assert.deepEqual(answers, [
    ['200', uid[1], 'GET'],
    ['200', uid[1], 'POST'],
  ]);
  assert.match(out, /round trip complete/);
  // Neither the assertion nor the token or key is printed (they are long base64 runs).
  assert.doesNotMatch(out, /[A-Za-z0-9_=-]{40,}/);
});

test('npm run demo without a running stack exits 1 and says so', async () => {
  const run = await runDemo({ LOGIN_URL: `http://127.0.0.1:${await closedPort()}`, DATA_DIR: dir });
  assert.equal(run.code, 1);
  assert.match(run.stderr, /cannot reach the login service .*is `npm start` running\?/);
});

test('npm run demo with a data folder that has no development key exits 1 without creating one', async () => {
  const empty = mkdtempSync(path.join(tmpdir(), 'demo-empty-'));
  try {
    const run = await runDemo({ LOGIN_URL: stack.loginUrl, DATA_DIR: empty });
    assert.equal(run.code, 1);
    assert.match(run.stderr, /no development IdP key at .*dev-idp\.json: is `npm start` running/);
    assert.equal(existsSync(path.join(empty, 'dev-idp.json')), false);
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});
