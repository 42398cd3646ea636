// `npm start` and the development IdP (issue #13 item 9): trusted, and said
// loudly, only when TRUSTED_ISSUERS is unset. Runs scripts/start.ts as a
// child process, as `npm start` does, on ephemeral ports in a temp folder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEV_IDP_FILE, generateKey, loadOrCreateDevIdp } from '../lib/idp.js';
import { httpRequest } from '../services/login/testkit.js';
import { startNpmStart } from './support/npm-start.js';
import { isRunning } from './support/children.js';
import { eventually } from './support/services.js';

const start = startNpmStart;

test('npm start without TRUSTED_ISSUERS: the development IdP is trusted and the start says so loudly', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'start-dev-'));
  const s = await start({ DATA_DIR: dir, MASTER_SECRETS: randomBytes(32).toString('hex') });
  try {
    assert.match(s.stdout, /!! DEVELOPMENT MODE: a development IdP key .* is TRUSTED/);
    assert.match(s.stdout, /"level":40.*development IdP \(dev-idp\.localhost\) is TRUSTED/, 'login logs a warning');
    assert.match(await s.stderrMatching(/WARNING/), /^WARNING: the development IdP/m);
    const idp = await loadOrCreateDevIdp(dir);
    const res = await httpRequest(`${s.loginUrl}/1.0/sync/1.5`, { headers: { Authorization: `Assertion ${await idp.makeAssertion('alice@example.com', { audience: s.loginUrl })}` } });
    assert.equal(res.status, 200, res.text);
  } finally {
    await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('npm start with TRUSTED_ISSUERS: only those issuers; no development IdP, no warning', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'start-issuers-'));
  const issuer = await generateKey('ES256');
  const file = path.join(dir, 'trusted-issuers.json');
  writeFileSync(file, JSON.stringify({ 'corp.example': { keys: [issuer.publicJwk] } }));
  const s = await start({ DATA_DIR: dir, MASTER_SECRETS: randomBytes(32).toString('hex'), TRUSTED_ISSUERS: file });
  try {
    assert.doesNotMatch(s.stdout, /DEVELOPMENT MODE|development IdP \(dev-idp\.localhost\) is TRUSTED/);
    assert.match(s.stdout, /Trusted issuers: the TRUSTED_ISSUERS file only/);
    assert.equal(existsSync(path.join(dir, DEV_IDP_FILE)), false, 'no development key is made');
    // A development IdP key, even one in the data folder, is not trusted.
    const idp = await loadOrCreateDevIdp(dir);
    const res = await httpRequest(`${s.loginUrl}/1.0/sync/1.5`, { headers: { Authorization: `Assertion ${await idp.makeAssertion('alice@example.com', { audience: s.loginUrl })}` } });
    assert.equal(res.status, 401, res.text);
    assert.equal(res.json?.status, 'invalid-credentials');
  } finally {
    await s.stop();
    // Everything start.ts wrote to stderr is in by the time it has exited.
    assert.doesNotMatch(s.stderr(), /WARNING|development IdP/);
    rmSync(dir, { recursive: true, force: true });
  }
});

test('npm start prints "node-gateway listening" once, with the real URL (issue #12 item 10c)', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'start-gateway-'));
  const s = await start({ DATA_DIR: dir, MASTER_SECRETS: randomBytes(32).toString('hex'), LOG_LEVEL: 'info' });
  try {
    const lines = s.stdout.split('\n').filter((l) => l.includes('node-gateway listening'));
    assert.equal(lines.length, 1, lines.join('\n'));
    const gateway = /node-gateway:\s+(http:\/\/\S+)/.exec(s.stdout)![1];
    assert.equal(JSON.parse(lines[0]).nodeUrl, gateway);
    assert.doesNotMatch(s.stdout, /placeholder\.invalid/);
  } finally {
    await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

interface LogLine {
  msg: string;
  pid: number;
  port?: number;
  workers?: number;
  worker?: number;
}

/** The JSON log lines of a process's output, whole lines only: the output may end in the middle of one. */
function logLines(output: string): LogLine[] {
  return output
    .split('\n')
    .filter((l) => l.startsWith('{') && l.endsWith('}'))
    .map((l) => JSON.parse(l) as LogLine);
}

/** The pid on the first JSON log line whose msg matches. */
function pidOf(stdout: string, msg: RegExp): number {
  const line = logLines(stdout).find((l) => msg.test(l.msg));
  assert.ok(line, `no line ${msg} in:\n${stdout}`);
  return line.pid;
}

test('npm start runs the services in processes of their own, and Ctrl-C stops every one (issue #11 item 4)', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'start-processes-'));
  const s = await start({ DATA_DIR: dir, MASTER_SECRETS: randomBytes(32).toString('hex'), LOG_LEVEL: 'info' });
  let pids: number[] = [];
  try {
    pids = [pidOf(s.stdout, /^login listening$/), pidOf(s.stdout, /^node-gateway listening$/)];
    assert.notEqual(pids[0], pids[1], 'login and the gateway in one process');
    assert.ok(!pids.includes(s.pid), 'a service in the process npm start runs in');
    for (const pid of pids) assert.ok(isRunning(pid));
  } finally {
    await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  for (const pid of pids) assert.equal(isRunning(pid), false, `process ${pid} still running after Ctrl-C: ${existsSync(`/proc/${pid}/status`) ? readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').slice(0, 8).join(' | ') : 'gone'}`);
});

test('npm start with LOGIN_WORKERS=2: login is a primary and two workers on one port; logins work; Ctrl-C stops every one', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'start-workers-'));
  const s = await start({ DATA_DIR: dir, MASTER_SECRETS: randomBytes(32).toString('hex'), LOG_LEVEL: 'info', LOGIN_WORKERS: '2' });
  let pids: number[] = [];
  try {
    const workerLines = () => logLines(s.output()).filter((l) => l.msg === 'login worker listening');
    // The primary says "login listening" when its workers listen, which can be before their own lines are written.
    await eventually('both workers\' "login worker listening" lines', () => workerLines().length >= 2);
    const primary = logLines(s.output()).filter((l) => l.msg === 'login listening');
    const workers = workerLines();
    pids = [...primary, ...workers].map((l) => l.pid);
    assert.equal(primary.length, 1);
    assert.equal(primary[0].workers, 2);
    assert.equal(workers.length, 2);
    assert.equal(new Set(pids).size, 3);
    assert.ok(workers.every((l) => l.port === primary[0].port && l.worker !== undefined));
    assert.equal(s.loginUrl, `http://127.0.0.1:${primary[0].port}`);
    const idp = await loadOrCreateDevIdp(dir);
    for (let i = 0; i < 2; i++) {
      const authorization = `Assertion ${await idp.makeAssertion(`user${i}@example.com`, { audience: s.loginUrl })}`;
      const res = await httpRequest(`${s.loginUrl}/1.0/sync/1.5`, { headers: { Authorization: authorization, Connection: 'close' } });
      assert.equal(res.status, 200, res.text);
    }
  } finally {
    await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  for (const pid of pids) assert.equal(isRunning(pid), false, `process ${pid} still running after Ctrl-C`);
});

test('npm start: a service that cannot start stops the others, and says why', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'start-fails-'));
  try {
    await assert.rejects(start({ DATA_DIR: dir, MASTER_SECRETS: randomBytes(32).toString('hex'), NONCE_CACHE_SIZE: 'lots' }), /configuration error: NONCE_CACHE_SIZE/);
    await assert.rejects(start({ DATA_DIR: dir, MASTER_SECRETS: randomBytes(32).toString('hex'), LOGIN_WORKERS: '0' }), /configuration error: LOGIN_WORKERS: must be between 1 and 64/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
