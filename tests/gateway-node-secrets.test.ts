// A gateway holding only its own node's secrets (NODE_SECRETS), over real HTTP:
// the secrets come from `cli nodes secret` itself (one line each, newest first),
// given once as NODE_SECRETS_FILE to the gateway's entry point as its own
// process (two secrets: a rotation under way) and once as NODE_SECRETS to a
// gateway in this process (the newest alone). Both accept node A's tokens and
// refuse node B's, and tokens signed with any secret but A's node secrets.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gatewayConfig } from '../lib/config.js';
import { hawkHeader } from '../lib/hawk.js';
import { makeToken, nodeSecrets } from '../lib/token.js';
import { startGateway, type Gateway } from '../services/node-gateway/server.js';
import { startServiceProcess, type ServiceProcess } from './support/login-process.js';
import { CountingUpstream, newSecret } from './support/services.js';

const NODE_A = 'http://node-a.example:8443';
const NODE_B = 'http://node-b.example:8443';
/** Login's MASTER_SECRETS during a rotation: the new one first. */
const MASTERS = [newSecret(), newSecret()];
const CLI = fileURLToPath(new URL('../cli/main.ts', import.meta.url));

/** `cli nodes secret sync <url>` as its own process: its stdout. */
function cliNodeSecret(url: string, masters: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CLI, 'nodes', 'secret', 'sync', url], {
      env: { ...process.env, MASTER_SECRETS: masters.join(','), TOKEN_SECRETS: 'derived' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (err += d));
    child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`cli exited with ${code}: ${err}`))));
  });
}

const upstream = new CountingUpstream();

let dir: string;
/** Holds A's two node secrets (from the file the CLI printed). */
let rotating: ServiceProcess;
/** Holds A's newest node secret alone. */
let newestOnly: Gateway;
let printed: string;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'node-secrets-'));
  const upstreamUrl = await upstream.start();
  printed = await cliNodeSecret(NODE_A, MASTERS);
  const file = path.join(dir, 'node_secrets');
  writeFileSync(file, printed);
  const env = { NODE_URL: NODE_A, UPSTREAM_URL: upstreamUrl, GATEWAY_PORT: '0', TOKEN_SECRETS: 'derived', MASTER_SECRETS: '', MASTER_SECRETS_FILE: '' };
  rotating = await startServiceProcess('node-gateway', { ...env, NODE_SECRETS_FILE: file });
  newestOnly = await startGateway(gatewayConfig({ ...env, NODE_SECRETS: printed.split('\n')[0] }));
});

after(async () => {
  await rotating?.stop();
  await newestOnly?.close();
  await upstream.stop();
  rmSync(dir, { recursive: true, force: true });
});

function send(port: number, pathName: string, authorization: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: pathName, headers: { Authorization: authorization }, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(body) }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A fresh request under a token for `node` signed with `secret`, sent to the gateway at `port` (which guards NODE_A). */
async function request(port: number, node: string, secret: string): Promise<{ status: number; body: any }> {
  const t = makeToken({ uid: 7, node, expires: Math.floor(Date.now() / 1000) + 300, salt: 'c0ffee' }, secret);
  const pathName = '/1.5/7/info/collections';
  return send(port, pathName, hawkHeader({ id: t.id, key: t.key, method: 'GET', url: NODE_A + pathName }));
}

async function accepted(port: number, node: string, secret: string): Promise<void> {
  const before = upstream.reached;
  const r = await request(port, node, secret);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(upstream.reached, before + 1);
}

async function refused(port: number, node: string, secret: string, description: RegExp): Promise<void> {
  const before = upstream.reached;
  const r = await request(port, node, secret);
  assert.equal(r.status, 401, JSON.stringify(r.body));
  assert.equal(r.body.status, 'invalid-credentials');
  assert.match(r.body.errors[0].description, description);
  assert.equal(upstream.reached, before, 'nothing reaches the application');
}

test('`cli nodes secret` prints exactly the node secrets a NODE_SECRETS gateway needs: one a line, newest first', () => {
  assert.equal(printed, nodeSecrets(MASTERS, NODE_A).map((s) => `${s}\n`).join(''));
});

test("node A's gateways accept A's tokens: the newest secret's at both, the older one's only where it is still held", async () => {
  const [newest, older] = nodeSecrets(MASTERS, NODE_A);
  await accepted(rotating.port, NODE_A, newest);
  await accepted(rotating.port, NODE_A, older);
  await accepted(newestOnly.port, NODE_A, newest);
  await refused(newestOnly.port, NODE_A, older, /signature/);
});

test("node A's gateways refuse node B's tokens, and tokens for A signed with any secret but A's node secrets", async () => {
  for (const port of [rotating.port, newestOnly.port]) {
    for (const secret of nodeSecrets(MASTERS, NODE_B)) {
      await refused(port, NODE_B, secret, /signature/);
      // Claiming node A does not help: only A's node secrets sign A's tokens.
      await refused(port, NODE_A, secret, /signature/);
    }
    // A master secret itself (TOKEN_SECRETS=master signing), and an unrelated master's derivation for A.
    for (const secret of MASTERS) await refused(port, NODE_A, secret, /signature/);
    await refused(port, NODE_A, nodeSecrets([newSecret()], NODE_A)[0], /signature/);
    // Signed with A's secret but naming B: the node check refuses it.
    await refused(port, NODE_B, nodeSecrets(MASTERS, NODE_A)[0], /another node/);
  }
});

test('the gateway process says it holds node secrets, and logs none of them', () => {
  const listening = rotating.lines.find((l) => l.msg === 'node-gateway listening');
  assert.equal(listening?.holds, 'node secrets');
  const logged = JSON.stringify(rotating.lines);
  for (const s of [...nodeSecrets(MASTERS, NODE_A), ...MASTERS]) assert.ok(!logged.includes(s), 'a secret in the log');
});
