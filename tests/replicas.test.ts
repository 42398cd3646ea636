// Every service as two replicas, each its own process from its entry point
// (transpiled, under plain node, as production runs it), so that SIGKILL is
// real: two logins reach two directories and two nodeassigns on one MongoDB
// database through a fixed list of addresses (grpc-js round robin); two
// gateways of one node share their nonces in Redis, behind a relay that spreads
// the node URL's connections over them; the demo application behind them
// records the user deletes of `users purge`. The operator CLI runs in this
// process. The properties are tests/support/replicas.ts's, which a docker
// compose stack with replicas can run too.
//
// REPLICAS_BREAK checks that the properties can fail: `nonces` gives each
// gateway its own nonce memory (d fails), `store` puts the second directory on
// a database of its own whose uids start elsewhere (a fails, and the rest),
// `one-target` gives the logins only the first directory and nodeassign (e fails).
// REPLICAS_LOGS=1 prints the warnings and errors the services logged, at the end.
import { after, before, describe, test } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Env } from '../lib/config.js';
import { DirectoryClient } from '../lib/gen/directory.js';
import { call, grpcClient } from '../lib/grpc.js';
import { loadOrCreateDevIdp } from '../lib/idp.js';
import { buildParts } from '../scripts/stack-part.js';
import { isUserDelete, startDemoApp } from '../services/demo-app/server.js';
import { jsonOrUndefined } from '../services/login/testkit.js';
import { runCli } from '../cli/run.js';
import { startServiceProcess, trustedIssuersFile, type LogLine, type ServiceName, type ServiceProcess, type ServiceProgram } from './support/login-process.js';
import { envMongo, freshDatabase } from './support/mongo.js';
import { signingKey, writeJwks } from './support/oauth.js';
import { redisSkipReason, startRedis } from './support/redis.js';
import { eventSigner, PROPERTIES, type CliResult, type ReplicaStack, type ReplicatedService } from './support/replicas.js';
import { freePort, newSecret, serveTcp, TEST_AUTH } from './support/services.js';

const APP = 'sync';
const VERSION = '1.5';
const AUDIENCE = 'https://token.replicas.test';
const WEBHOOK_AUDIENCE = 'https://token.replicas.test/webhook';
const REPLICAS = 2;
const NODE_CAPACITY = 10_000;
const ENTRY: Record<ReplicatedService, ServiceName> = { login: 'login', directory: 'directory', nodeassign: 'nodeassign', gateway: 'node-gateway' };
const BREAK = new Set((process.env.REPLICAS_BREAK ?? '').split(',').filter(Boolean));

const mongo = envMongo();
const skip = mongo.url ? redisSkipReason() : mongo.skipReason;
if (skip) console.log(`# skipped: the replica properties: ${skip}`);
if (BREAK.size > 0) console.log(`# REPLICAS_BREAK=${[...BREAK].join(',')}: a deliberately broken deployment; properties are expected to fail`);

/** A TCP relay on a port of its own that hands each connection to the next of `ports` that accepts it (a load balancer's part). */
function roundRobinRelay(ports: number[]): Promise<{ port: number; close(): Promise<void> }> {
  let next = 0;
  return serveTcp((client, track) => {
    track(client);
    client.pause();
    client.on('error', () => client.destroy());
    const attempt = (left: number): void => {
      const upstream = net.connect(ports[next++ % ports.length], '127.0.0.1');
      track(upstream);
      upstream.once('connect', () => {
        upstream.on('error', () => client.destroy());
        upstream.on('close', () => client.destroy());
        client.on('close', () => upstream.destroy());
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
      upstream.once('error', () => {
        if (upstream.connecting === false && upstream.readyState !== 'opening') return;
        if (left > 1) attempt(left - 1);
        else client.destroy();
      });
    };
    attempt(ports.length);
  });
}

interface Harness {
  stack: ReplicaStack;
  close(): Promise<void>;
}

async function startHarness(storeUrl: string, otherStoreUrl: string): Promise<Harness> {
  const closers: Array<() => Promise<unknown>> = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
  };
  try {
    const dir = mkdtempSync(path.join(tmpdir(), 'replicas-'));
    closers.push(async () => rmSync(dir, { recursive: true, force: true }));
    const built = buildParts();
    const program: ServiceProgram = { root: path.resolve(path.dirname(built.script), '..'), execArgv: built.execArgv, extension: '.js' };

    const redis = await startRedis();
    closers.push(() => redis.dispose());
    const demo = await startDemoApp();
    closers.push(() => demo.close());
    const deletes: string[] = [];
    demo.server.on('request', (req: IncomingMessage) => {
      const pathname = (req.url ?? '/').split('?')[0];
      if (isUserDelete(req.method, pathname)) deletes.push(pathname);
    });

    const idp = await loadOrCreateDevIdp(dir);
    const hook = await signingKey('RS256', 'hook-1');
    const masterSecrets = newSecret();
    // Fixed ports, so that a replica comes back where the others look for it.
    const free = new Set<number>();
    while (free.size < 4 * REPLICAS) free.add(await freePort());
    const list = [...free];
    const ports = Object.fromEntries((Object.keys(ENTRY) as ReplicatedService[]).map((s, i) => [s, list.slice(i * REPLICAS, (i + 1) * REPLICAS)])) as Record<
      ReplicatedService,
      number[]
    >;
    const relay = await roundRobinRelay(ports.gateway);
    closers.push(() => relay.close());
    const nodeUrl = `http://127.0.0.1:${relay.port}`;
    const targets = (ps: number[]) => (BREAK.has('one-target') ? `127.0.0.1:${ps[0]}` : `ipv4:${ps.map((p) => `127.0.0.1:${p}`).join(',')}`);
    const common: Env = { INTERNAL_SECRET: TEST_AUTH.internalSecret, BIND_HOST: '127.0.0.1' };
    const envs: Record<ReplicatedService, Env[]> = {
      directory: ports.directory.map((p, i) => ({ ...common, STORE_URL: BREAK.has('store') && i === 1 ? otherStoreUrl : storeUrl, DIRECTORY_PORT: String(p) })),
      nodeassign: ports.nodeassign.map((p) => ({ ...common, STORE_URL: storeUrl, NODEASSIGN_PORT: String(p) })),
      gateway: ports.gateway.map((p) => ({
        ...common,
        NODE_URL: nodeUrl,
        UPSTREAM_URL: demo.url,
        MASTER_SECRETS: masterSecrets,
        GATEWAY_PORT: String(p),
        NONCE_STORE: BREAK.has('nonces') ? 'memory' : redis.url,
      })),
      login: ports.login.map((p) => ({
        ...common,
        APPLICATIONS: `${APP}/${VERSION}`,
        AUDIENCES: AUDIENCE,
        TRUSTED_ISSUERS: trustedIssuersFile(dir, idp),
        MASTER_SECRETS: masterSecrets,
        DIRECTORY_ADDR: targets(ports.directory),
        NODEASSIGN_ADDR: targets(ports.nodeassign),
        LOGIN_PORT: String(p),
        LOGIN_WORKERS: '1',
        // Two cores shared with the test and MongoDB: a backend slower than the default 2 s is this machine, not a replica lost.
        GRPC_DEADLINE_MS: '5000',
        WEBHOOK_JWKS: writeJwks(dir, 'webhook-jwks.json', [hook]),
        WEBHOOK_AUDIENCE,
      })),
    };

    const running = new Map<string, ServiceProcess>();
    closers.push(() => Promise.all([...running.values()].map((p) => p.stop())));
    closers.push(async () => {
      // Errors and 500s always (a 5xx in a property is then explained in CI's output); warnings on request.
      const shown = (line: LogLine) => line.level >= (process.env.REPLICAS_LOGS ? 40 : 50) || line.class === 'InternalError';
      for (const [name, p] of running) for (const line of p.lines) if (shown(line)) console.log(`${name} ${JSON.stringify(line)}`);
    });
    const startOne = async (service: ReplicatedService, index: number): Promise<void> => {
      running.set(`${service}/${index}`, await startServiceProcess(ENTRY[service], envs[service][index], program));
    };
    const each = (service: ReplicatedService) => Array.from({ length: REPLICAS }, (_, i) => startOne(service, i));
    await Promise.all([...each('directory'), ...each('nodeassign')]);

    const cliEnv: Env = {
      DIRECTORY_ADDR: envs.login[0].DIRECTORY_ADDR,
      NODEASSIGN_ADDR: envs.login[0].NODEASSIGN_ADDR,
      INTERNAL_SECRET: TEST_AUTH.internalSecret,
      MASTER_SECRETS: masterSecrets,
      APPLICATIONS: `${APP}/${VERSION}`,
    };
    const cli = async (argv: string[]): Promise<CliResult> => {
      let stdout = '';
      let stderr = '';
      const code = await runCli(argv, cliEnv, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
      return { code, stdout, stderr, json: jsonOrUndefined(stdout) };
    };
    const added = await cli(['nodes', 'add', APP, nodeUrl, '--capacity', String(NODE_CAPACITY)]);
    if (added.code !== 0) throw new Error(`nodes add: ${added.stderr}`);
    if (BREAK.has('store')) {
      // The second directory's uids start far from the first's, so that a split shows.
      const client = grpcClient(DirectoryClient, `127.0.0.1:${ports.directory[1]}`, TEST_AUTH);
      await call(client, client.reserveUids, { upTo: 1_000_000, dryRun: false }, { deadlineMs: 5000, retryAfter: 1 }).finally(() => client.close());
    }
    await Promise.all([...each('login'), ...each('gateway')]);

    const stack: ReplicaStack = {
      app: APP,
      version: VERSION,
      logins: ports.login.map((p) => `http://127.0.0.1:${p}`),
      gateways: ports.gateway.map((p) => `http://127.0.0.1:${p}`),
      nodeUrl,
      accountDomain: 'api.accounts.firefox.com',
      authorization: async (email, generation) => `Assertion ${await idp.makeAssertion(email, { audience: AUDIENCE, generation })}`,
      cli,
      async kill(service, index) {
        const p = running.get(`${service}/${index}`)!;
        p.signal('SIGKILL');
        await p.exited;
      },
      revive: (service, index) => startOne(service, index),
      signEvent: eventSigner(hook, WEBHOOK_AUDIENCE),
      applicationDeletes: async () => [...deletes],
    };
    return { stack, close };
  } catch (err) {
    await close();
    throw err;
  }
}

describe('every service as two replicas on one MongoDB database', { skip }, () => {
  let harness: Harness;

  before(async () => {
    harness = await startHarness(freshDatabase(mongo, 'replicas'), freshDatabase(mongo, 'replicas_split'));
  });
  after(async () => {
    await harness?.close();
    await mongo.stop();
  });

  for (const [name, property] of PROPERTIES) test(name, (t) => property(harness.stack, t));
});
