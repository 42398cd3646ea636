// The replicated stack, end to end: docker-compose.yml with compose.scale.yml on a real
// container engine (two of every service, HAProxy in front of the logins and the gateways,
// Redis for the gateways' nonces), with only the test overrides on top (the local stand-in
// images, each login and gateway replica also on a host port of its own, the webhook on).
// The checks are the properties every replicated deployment must keep
// (tests/support/replicas.ts, also run on processes by tests/replicas.test.ts), plus what only
// this stack has: the load balancer and DNS-named replicas. `npm run test:containers` runs
// this file after tests/containers.test.ts; without an engine every check is skipped with
// the reason. KEEP_STACK=1 leaves the stack up.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { hawkHeader } from '../lib/hawk.js';
import { loadOrCreateDevIdp, type DevIdp } from '../lib/idp.js';
import { jsonOrUndefined } from '../services/login/testkit.js';
import { buildImages, ComposeProject, composeChecks, findEngine, freePort, ROOT, type Run } from './support/compose.js';
import { signingKey, type SigningKey } from './support/oauth.js';
import { eventSigner, PROPERTIES, type CliResult, type ReplicaStack, type ReplicatedService } from './support/replicas.js';

const APP = 'sync';
const VERSION = '1.5';
const WEBHOOK_AUDIENCE = 'tokenserver-containers';
/** The compose service of replica i of each replicated service. */
const REPLICAS: Record<ReplicatedService, [string, string]> = {
  login: ['login-1', 'login-2'],
  directory: ['directory', 'directory-2'],
  nodeassign: ['nodeassign', 'nodeassign-2'],
  gateway: ['node-gateway-1', 'node-gateway-2'],
};
const LONG_RUNNING = ['mongo', 'redis', 'demo-app', 'lb', ...Object.values(REPLICAS).flat()];
/** The cli container the checks run the operator CLI in (started once, then `docker exec`). */
const CLI_CONTAINER = `tscli${process.pid}`;

const engine = findEngine();
const skipReason = 'skip' in engine ? engine.skip : '';
const projectDir = mkdtempSync(path.join(tmpdir(), 'compose-scale-'));
const project =
  'skip' in engine
    ? undefined
    : new ComposeProject(engine, `tsscale${process.pid}`, projectDir, [
        // The user's files from a copy of the checkout's (their relative paths resolve there).
        path.join(projectDir, 'docker-compose.yml'),
        path.join(projectDir, 'compose.scale.yml'),
        path.join(ROOT, 'tests/containers/compose.test.yml'),
        path.join(ROOT, 'tests/containers/compose.scale.test.yml'),
      ]);
let stackStarted = false;
let lbLogin = '';
let lbGateway = '';
let stack: ReplicaStack;
let idp: DevIdp;

const { check, anyFailed } = composeChecks(skipReason, () => stackStarted);

/** Runs the health probe of a service's own compose file inside its container until it passes. */
async function answersAgain(service: string, withinMs = 60_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  // A restart keeps the container (and its id and health check).
  const id = await project!.containerId(service);
  const probe = await project!.docker(['inspect', '-f', '{{json .Config.Healthcheck.Test}}', id]);
  const [, ...cmd] = JSON.parse(probe.stdout) as string[];
  let last: Run | undefined;
  while (Date.now() < deadline) {
    last = await project!.docker(['exec', id, ...cmd], 15_000);
    if (last.code === 0) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.fail(`${service} does not answer within ${withinMs / 1000} s: ${last?.stdout}${last?.stderr}`);
}

/** SIGKILL to the service's process inside its container (not to the container): a crash, which the restart policy answers. */
async function crash(service: string): Promise<void> {
  const id = await project!.containerId(service);
  const before = (await project!.state(service)).StartedAt;
  // `kill -9 -1` from an exec'd shell: every process of the container's user but the shell (and init).
  await project!.docker(['exec', id, 'sh', '-c', 'kill -9 -1']);
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const st = await project!.state(service);
    if (st.StartedAt !== before || st.Status !== 'running') return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`${service} did not die`);
}

before(async () => {
  if (skipReason) {
    console.log(`containers-scale: skipped: ${skipReason}`);
    return;
  }
  await buildImages(project!.engine.env);
  for (const f of ['docker-compose.yml', 'compose.scale.yml', 'deploy']) cpSync(path.join(ROOT, f), path.join(projectDir, f), { recursive: true });
  const taken = new Set<number>();
  const port = async () => {
    const p = await freePort(taken);
    taken.add(p);
    return p;
  };
  const [loginPort, gatewayPort] = [await port(), await port()];
  const replicaPorts = { 'login-1': await port(), 'login-2': await port(), 'node-gateway-1': await port(), 'node-gateway-2': await port() };
  lbLogin = `http://127.0.0.1:${loginPort}`;
  lbGateway = `http://127.0.0.1:${gatewayPort}`;
  const audience = `http://localhost:${loginPort}`;
  // The node's URL names the load balancer as the containers know it, so that the operator CLI
  // (purge) reaches the gateways from inside the network; the checks send each request to a
  // replica's own host port and sign it for this URL, as the gateways expect.
  const nodeUrl = 'http://lb:8080';
  const hook: SigningKey = await signingKey('RS256', 'containers-hook');
  const webhookDir = path.join(projectDir, 'webhook');
  mkdirSync(webhookDir);
  writeFileSync(path.join(webhookDir, 'jwks.json'), JSON.stringify({ keys: [hook.publicJwk] }));
  const dotenv =
    readFileSync(path.join(ROOT, '.env.example'), 'utf8')
      .replace(/^LOGIN_PORT=.*$/m, `LOGIN_PORT=${loginPort}`)
      .replace(/^GATEWAY_PORT=.*$/m, `GATEWAY_PORT=${gatewayPort}`)
      .replace(/^AUDIENCES=.*$/m, `AUDIENCES=${audience}`)
      .replace(/^NODE_URL=.*$/m, `NODE_URL=${nodeUrl}`)
      // Room for every user the checks make (the load check alone makes hundreds); the capacity check sets its own.
      .replace(/^NODE_CAPACITY=.*$/m, 'NODE_CAPACITY=100000') +
    [
      `TEST_WEBHOOK_DIR=${webhookDir}`,
      `WEBHOOK_AUDIENCE=${WEBHOOK_AUDIENCE}`,
      // As tests/replicas.test.ts: on a loaded test machine the default 2 s ends logins that are only slow,
      // and the kill check counts every failure.
      'GRPC_DEADLINE_MS=5000',
      ...Object.entries(replicaPorts).map(([s, p]) => `TEST_PORT_${s.toUpperCase().replace(/-/g, '_')}=${p}`),
      '',
    ].join('\n');
  writeFileSync(path.join(projectDir, '.env'), dotenv);

  await project!.mustCompose(['up', '-d', '--no-build'], 300_000);
  stackStarted = true;
  await project!.waitHealthy(LONG_RUNNING);
  const idpDir = path.join(projectDir, 'idp');
  const copied = await project!.docker(['cp', `${await project!.containerId('login-1')}:/idp`, idpDir]);
  assert.equal(copied.code, 0, copied.stderr);
  idp = await loadOrCreateDevIdp(idpDir);
  // One long-lived cli container: `docker exec` in it is quicker than `run --rm` per command.
  await project!.mustCompose(['run', '-d', '--name', CLI_CONTAINER, '--entrypoint', 'sleep', 'cli', 'infinity']);

  stack = {
    app: APP,
    version: VERSION,
    logins: [`http://127.0.0.1:${replicaPorts['login-1']}`, `http://127.0.0.1:${replicaPorts['login-2']}`],
    gateways: [`http://127.0.0.1:${replicaPorts['node-gateway-1']}`, `http://127.0.0.1:${replicaPorts['node-gateway-2']}`],
    nodeUrl,
    accountDomain: 'api.accounts.firefox.com',
    authorization: async (email, generation) => `Assertion ${await idp.makeAssertion(email, { audience, generation })}`,
    async cli(argv: string[]): Promise<CliResult> {
      const r = await project!.docker(['exec', CLI_CONTAINER, 'node', 'dist/cli/main.js', ...argv], 120_000);
      return { code: r.code ?? -1, stdout: r.stdout, stderr: r.stderr, json: jsonOrUndefined(r.stdout) };
    },
    kill: (service, index) => crash(REPLICAS[service][index]),
    revive: (service, index) => answersAgain(REPLICAS[service][index]),
    signEvent: eventSigner(hook, WEBHOOK_AUDIENCE),
  };
});

after(async () => {
  if (!skipReason && anyFailed()) await project!.printErrorLines();
  if (!skipReason && process.env.KEEP_STACK !== '1') {
    await project!.docker(['rm', '-f', CLI_CONTAINER]);
    await project!.compose(['down', '-v', '--remove-orphans'], 180_000);
  }
  rmSync(projectDir, { recursive: true, force: true });
});

check(
  'docker compose up with compose.scale.yml: two of every service and the load balancer healthy; the single login and gateway left out',
  async () => {
    for (const s of ['login', 'node-gateway']) assert.equal(await project!.containerId(s), '', `${s} (profile single) is not started`);
    for (const s of LONG_RUNNING) assert.equal((await project!.state(s)).Health?.Status, 'healthy', s);
  },
  true,
);

/** Remote addresses (hex ip:port, as /proc/net/tcp has them) of a container's established connections. */
async function peers(service: string): Promise<Set<string>> {
  const r = await project!.docker(['exec', await project!.containerId(service), 'cat', '/proc/net/tcp']);
  const out = new Set<string>();
  for (const line of r.stdout.split('\n').slice(1)) {
    const [, , remote, state] = line.trim().split(/\s+/);
    if (state === '01') out.add(remote);
  }
  return out;
}

const hexAddress = (ip: string, port: number) =>
  `${ip.split('.').map((o) => Number(o).toString(16).padStart(2, '0').toUpperCase()).reverse().join('')}:${port.toString(16).toUpperCase().padStart(4, '0')}`;

check('each login spreads its gRPC calls over both directories and both nodeassigns (dns:/// names, round robin)', async () => {
  // Enough logins through each login replica that round robin has used every address.
  for (let i = 0; i < 8; i++) {
    for (const url of stack.logins) {
      const email = `rr-${i}-${randomBytes(4).toString('hex')}@example.com`;
      const res = await fetch(`${url}/1.0/${APP}/${VERSION}`, { headers: { Authorization: await stack.authorization(email) } });
      assert.equal(res.status, 200, await res.text());
    }
  }
  for (const login of REPLICAS.login) {
    const connected = await peers(login);
    for (const [service, port] of [...REPLICAS.directory.map((s) => [s, 50051] as const), ...REPLICAS.nodeassign.map((s) => [s, 50052] as const)]) {
      const ip = (await project!.docker(['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', await project!.containerId(service)])).stdout.trim();
      assert.ok(connected.has(hexAddress(ip, port)), `${login} holds a connection to ${service} (${ip}:${port}): ${[...connected].join(' ')}`);
    }
  }
});

check('the load balancer spreads logins and Hawk requests over both replicas, and routes around a crashed one', async () => {
  const email = `lb-${randomBytes(4).toString('hex')}@example.com`;
  const authorization = await stack.authorization(email);
  const viaLb = () => fetch(`${lbLogin}/1.0/${APP}/${VERSION}`, { headers: { Authorization: authorization } });
  const first = await viaLb();
  assert.equal(first.status, 200, await first.text());
  const served = async () => {
    const out: Record<string, number> = {};
    const logs = (await project!.mustCompose(['logs', '--no-color', 'lb'])).split('\n');
    for (const l of logs) {
      const m = /logins\/(login-\d)/.exec(l);
      if (m) out[m[1]] = (out[m[1]] ?? 0) + 1;
    }
    return out;
  };
  for (let i = 0; i < 10; i++) assert.equal((await viaLb()).status, 200);
  const spread = await served();
  assert.ok((spread['login-1'] ?? 0) > 0 && (spread['login-2'] ?? 0) > 0, `both logins served: ${JSON.stringify(spread)}`);
  // A crash of login-1: the balancer's probes take it out, every login still answers 200.
  await crash('login-1');
  const statuses: number[] = [];
  for (let i = 0; i < 20; i++) {
    statuses.push((await viaLb()).status);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(
    statuses.filter((s) => s !== 200),
    [],
    'no login fails while login-1 is down (a refused connection is retried on login-2)',
  );
  await answersAgain('login-1');
  // The gateway side: a Hawk request through the balancer reaches the application.
  const tokenRes = await viaLb();
  const token = (await tokenRes.json()) as { id: string; key: string; uid: number; api_endpoint: string };
  assert.ok(token.api_endpoint.startsWith(`${stack.nodeUrl}/`), token.api_endpoint);
  const url = new URL(`${token.api_endpoint}/storage/lb-check`);
  const res = await fetch(`${lbGateway}${url.pathname}`, { headers: { Authorization: hawkHeader({ id: token.id, key: token.key, method: 'GET', url }) } });
  const reply = (await res.json()) as { uid: string };
  assert.equal(res.status, 200, JSON.stringify(reply));
  assert.equal(String(reply.uid), String(token.uid));
});

for (const [name, property] of PROPERTIES) check(name, (t) => property(stack, t));
