// docker compose up, end to end, as a user would: the real Dockerfile and docker-compose.yml
// on a real container engine, with only tests/containers/compose.test.yml on top (the local
// mongo stand-in image) and a .env with free host ports. Each check is one test, in order;
// `npm run test:containers` (scripts/test-containers.sh) counts them.
//
// The engine is the one `scripts/engine.sh env` finds (DOCKER_HOST); without one every check
// is skipped with the reason. Images come from scripts/images.sh (cached; a rebuild after a
// source change takes the build's last layers only). KEEP_STACK=1 leaves the stack up.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { hawkFetch, TokenClient } from '../sdk/index.js';
import { buildImages, ComposeProject, composeChecks, findEngine, freePort, ROOT, type ContainerState, type Run } from './support/compose.js';

const OVERRIDE = path.join(ROOT, 'tests/containers/compose.test.yml');
const LONG_RUNNING = ['mongo', 'directory', 'nodeassign', 'login', 'demo-app', 'node-gateway'];

const engine = findEngine();
const skipReason = 'skip' in engine ? engine.skip : '';
const projectDir = mkdtempSync(path.join(tmpdir(), 'compose-project-'));
const project = 'skip' in engine ? undefined : new ComposeProject(engine, `tscontainers${process.pid}`, projectDir, [path.join(ROOT, 'docker-compose.yml'), OVERRIDE]);
let loginPort = 0;
let gatewayPort = 0;
let loginUrl = '';
let nodeUrl = '';
let stackStarted = false;
/** Everything secret this run saw, to look for in the logs. */
const secrets: Array<[string, string]> = [];
let firstUid: number | undefined;

const compose = (args: string[], timeoutMs?: number): Promise<Run> => project!.compose(args, timeoutMs);
const mustCompose = (args: string[], timeoutMs?: number): Promise<string> => project!.mustCompose(args, timeoutMs);
const containerId = (service: string): Promise<string> => project!.containerId(service);
const state = (service: string): Promise<ContainerState> => project!.state(service);
const waitHealthy = (services = LONG_RUNNING): Promise<void> => project!.waitHealthy(services);
const env = 'skip' in engine ? process.env : engine.env;

/** An assertion from the development IdP that `setup` created in the idp volume. */
async function devAssertion(email: string): Promise<string> {
  const out = await mustCompose(['run', '--rm', '-T', 'setup', 'node', 'dist/cli/main.js', 'dev', 'assertion', email, '--data-dir', '/idp', '--audience', loginUrl]);
  const assertion = out.trim().split('\n').pop()!.trim();
  assert.match(assertion, /^[\w-]+\.[\w-]+\.[\w-]+~[\w-]+\.[\w-]+\.[\w-]+$/, 'dev assertion prints a cert~assertion bundle');
  secrets.push([`assertion for ${email}`, assertion]);
  return assertion;
}

async function login(assertion: string): Promise<Response> {
  return fetch(`${loginUrl}/1.0/sync/1.5`, { headers: { Authorization: `Assertion ${assertion}` } });
}

/** Exit status of a TCP connect attempt from inside a service's container: 0 connected, 1 refused/failed/timed out. */
async function connectFrom(service: string, host: string, port: number): Promise<Run> {
  const script =
    `const s=require('net').connect(${port},${JSON.stringify(host)});` +
    `s.setTimeout(3000,()=>{console.log('timeout');process.exit(1)});` +
    `s.on('connect',()=>{console.log('connected');process.exit(0)});` +
    `s.on('error',(e)=>{console.log(e.code||e.message);process.exit(1)});`;
  return compose(['exec', '-T', service, 'node', '-e', script]);
}

const { check, anyFailed } = composeChecks(skipReason, () => stackStarted);

before(async () => {
  if (skipReason) {
    console.log(`containers: skipped: ${skipReason}`);
    return;
  }
  await buildImages(env);
  loginPort = await freePort(new Set());
  gatewayPort = await freePort(new Set([loginPort]));
  loginUrl = `http://localhost:${loginPort}`;
  nodeUrl = `http://localhost:${gatewayPort}`;
  // The user's steps: cp .env.example .env, then set ports, the audience and the node URL to match.
  const dotenv = readFileSync(path.join(ROOT, '.env.example'), 'utf8')
    .replace(/^LOGIN_PORT=.*$/m, `LOGIN_PORT=${loginPort}`)
    .replace(/^GATEWAY_PORT=.*$/m, `GATEWAY_PORT=${gatewayPort}`)
    .replace(/^AUDIENCES=.*$/m, `AUDIENCES=${loginUrl}`)
    .replace(/^NODE_URL=.*$/m, `NODE_URL=${nodeUrl}`);
  writeFileSync(path.join(projectDir, '.env'), dotenv);
});

after(async () => {
  if (!skipReason && anyFailed()) await project!.printErrorLines();
  if (!skipReason && process.env.KEEP_STACK !== '1') await compose(['down', '-v', '--remove-orphans'], 120_000);
  rmSync(projectDir, { recursive: true, force: true });
});

check('docker compose up: every service healthy, one-shots completed, depends_on order held', async () => {
  await mustCompose(['up', '-d', '--no-build'], 300_000);
  stackStarted = true;
  await waitHealthy();
  const st: Record<string, ContainerState> = {};
  for (const s of [...LONG_RUNNING, 'secrets', 'setup']) st[s] = await state(s);
  for (const s of ['secrets', 'setup']) {
    assert.equal(st[s].Status, 'exited', `${s} ran once`);
    assert.equal(st[s].ExitCode, 0, `${s} completed successfully`);
  }
  const t = (s: string, k: 'StartedAt' | 'FinishedAt') => Date.parse(st[s][k]);
  for (const s of ['directory', 'nodeassign']) {
    assert.ok(t(s, 'StartedAt') >= t('secrets', 'FinishedAt'), `${s} started after secrets completed`);
    assert.ok(t(s, 'StartedAt') > t('mongo', 'StartedAt'), `${s} started after mongo`);
    assert.ok(t('setup', 'StartedAt') > t(s, 'StartedAt'), `setup started after ${s}`);
  }
  assert.ok(t('login', 'StartedAt') >= t('setup', 'FinishedAt'), 'login started after setup completed');
  assert.ok(t('node-gateway', 'StartedAt') > t('demo-app', 'StartedAt'), 'node-gateway started after demo-app');
}, true);

check('secrets: generated once, mode 0600, uid 1000, long enough; each in the volume of the services that need it only', async () => {
  const out = await mustCompose([
    'exec', '-T', 'login', 'sh', '-c',
    'stat -c "%n %a %u" /master-secrets/master_secrets /internal-secret/internal_secret && wc -c < /master-secrets/master_secrets && wc -c < /internal-secret/internal_secret',
  ]);
  const [m, i, mLen, iLen] = out.trim().split('\n');
  assert.equal(m, '/master-secrets/master_secrets 600 1000');
  assert.equal(i, '/internal-secret/internal_secret 600 1000');
  assert.ok(Number(mLen) >= 64, `MASTER_SECRETS holds ${mLen} characters`);
  assert.ok(Number(iLen) >= 64, `INTERNAL_SECRET holds ${iLen} hex characters (32 bytes)`);
  for (const f of ['/master-secrets/master_secrets', '/internal-secret/internal_secret']) {
    secrets.push([path.basename(f), (await mustCompose(['exec', '-T', 'login', 'cat', f])).trim()]);
  }
  // The gateway has no internal secret and no master secret (its node's secrets only), directory no master secret, the application neither.
  const absent = async (service: string, files: string[]) => {
    const listing = await mustCompose(['exec', '-T', service, 'sh', '-c', `ls ${files.join(' ')} 2>&1; true`]);
    for (const f of files) assert.match(listing, new RegExp(`${f}.*No such file`), `${service} has no ${f}`);
  };
  await absent('node-gateway', ['/internal-secret/internal_secret', '/master-secrets/master_secrets', '/secrets/master_secrets']);
  await absent('directory', ['/master-secrets/master_secrets', '/secrets/master_secrets']);
  await absent('demo-app', ['/master-secrets/master_secrets', '/internal-secret/internal_secret', '/secrets/master_secrets']);
});

check('login over HTTP: a token for an assertion of the development IdP', async () => {
  const res = await login(await devAssertion('alice@example.com'));
  const body = (await res.json()) as { id: string; key: string; uid: number; api_endpoint: string };
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.ok(body.api_endpoint.startsWith(`${nodeUrl}/1.5/`), body.api_endpoint);
  secrets.push(['token', body.id], ['key', body.key]);
  firstUid = body.uid;
});

check('Hawk-signed GET and POST through the node-gateway, answered by the demo app', async () => {
  const assertion = await devAssertion('bob@example.com');
  const tokens = new TokenClient({ loginUrl, app: 'sync', version: '1.5', assertion: async () => assertion });
  const token = await tokens.getToken();
  secrets.push(['token (bob)', token.id], ['key (bob)', token.key]);
  const api = hawkFetch(tokens);
  const got = await api('hello?from=containers');
  const getReply = (await got.json()) as { uid: string; method: string };
  assert.equal(got.status, 200, JSON.stringify(getReply));
  assert.deepEqual([String(getReply.uid), getReply.method], [String(token.uid), 'GET']);
  const body = JSON.stringify({ note: 'from the container tests' });
  const posted = await api('notes', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  const postReply = (await posted.json()) as { uid: string; method: string; bodyBytes: number };
  assert.equal(posted.status, 200, JSON.stringify(postReply));
  assert.deepEqual([String(postReply.uid), postReply.method, postReply.bodyBytes], [String(token.uid), 'POST', Buffer.byteLength(body)]);
});

check('directory restarted: login answers 503 + Retry-After while it is down, 200 again after, login not restarted', async () => {
  const assertion = await devAssertion('carol@example.com');
  const loginStarted = (await state('login')).StartedAt;
  // `restart` as stop + start, so that "while it is down" is observed for certain.
  await mustCompose(['stop', 'directory']);
  const down = await login(assertion);
  assert.equal(down.status, 503, await down.text());
  assert.match(down.headers.get('retry-after') ?? '', /^\d+$/, 'Retry-After seconds');
  await mustCompose(['start', 'directory']);
  await waitHealthy(['directory']);
  let status = 0;
  for (let i = 0; i < 15 && status !== 200; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 1000));
    status = (await login(assertion)).status;
  }
  assert.equal(status, 200, 'login answers 200 again');
  assert.equal((await state('login')).StartedAt, loginStarted, 'login was not restarted');
});

check('networks: the demo app cannot reach directory:50051 (by name or address); login can', async () => {
  const fromLogin = await connectFrom('login', 'directory', 50051);
  assert.equal(fromLogin.code, 0, `login → directory:50051: ${fromLogin.stdout}${fromLogin.stderr}`);
  const byName = await connectFrom('demo-app', 'directory', 50051);
  assert.equal(byName.code, 1, `demo-app → directory:50051 must fail: ${byName.stdout}${byName.stderr}`);
  const id = await containerId('directory');
  const ip = (await project!.docker(['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}', id])).stdout.trim().split(/\s+/)[0];
  assert.ok(ip, 'directory has an address');
  const byAddress = await connectFrom('demo-app', ip, 50051);
  assert.equal(byAddress.code, 1, `demo-app → ${ip}:50051 must fail: ${byAddress.stdout}${byAddress.stderr}`);
});

check('down (volumes kept) and up again: the same user keeps its uid', async () => {
  assert.ok(firstUid !== undefined, 'the login check ran');
  await mustCompose(['down'], 120_000);
  await mustCompose(['up', '-d', '--no-build'], 300_000);
  await waitHealthy();
  const res = await login(await devAssertion('alice@example.com'));
  const body = (await res.json()) as { uid: number; id: string; key: string };
  assert.equal(res.status, 200, JSON.stringify(body));
  secrets.push(['token (after up)', body.id], ['key (after up)', body.key]);
  assert.equal(body.uid, firstUid);
});

check('docker compose run --rm cli: nodes list, and nodes secret for the registered node, which is what the gateway holds', async () => {
  const out = await mustCompose(['run', '--rm', '-T', 'cli', 'node', 'dist/cli/main.js', 'nodes', 'list']);
  assert.ok(out.includes(nodeUrl), `nodes list names ${nodeUrl}:\n${out}`);
  const printed = (await mustCompose(['run', '--rm', '-T', 'cli', 'node', 'dist/cli/main.js', 'nodes', 'secret', 'sync', nodeUrl])).trim();
  const secret = printed.split('\n')[0];
  assert.match(secret, /^[0-9a-f]{128}$/, '64 bytes (half the master secret\'s length), in hex');
  secrets.push(['node secret', secret]);
  // What the gateway holds is exactly that: its node's secrets, as the secrets one-shot derived them.
  const held = await mustCompose(['exec', '-T', 'node-gateway', 'sh', '-c', 'stat -c "%a %u" /node-secrets/node_secrets && cat /node-secrets/node_secrets']);
  assert.equal(held.trim(), `600 1000\n${printed}`);
});

check('docker compose logs contain no secret, token, key or assertion', async () => {
  const logs = (await mustCompose(['logs', '--no-color'])).toString();
  assert.ok(logs.includes('init-secrets'), 'the logs were read');
  assert.ok(secrets.length >= 6, `secrets collected: ${secrets.map(([n]) => n).join(', ')}`);
  for (const [name, value] of secrets) {
    // The value and a fragment from its middle (a token or key split across fields still leaks).
    const fragment = value.slice(Math.floor(value.length / 2) - 8, Math.floor(value.length / 2) + 8);
    assert.ok(!logs.includes(value) && !logs.includes(fragment), `${name} appears in the logs`);
  }
});
