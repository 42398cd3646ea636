// The embedded stack (`npm start`): every service over real gRPC and HTTP on
// loopback, SQLite under DATA_DIR, a development IdP that is trusted in this
// mode only (and not when TRUSTED_ISSUERS names the issuers), and a demo
// application behind the gateway. The services run in this process (tests),
// or each in a child process of its own (`npm start`: scripts/stack-part.ts).
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { DEFAULTS, MIN_MASTER_SECRET_LENGTH, applications, clientStateChangesPerDay, gatewayConfig, grpcAuth, loginConfig, metricsListener, port, str, storeUrl, type Env, type GrpcAuth } from '../lib/config.js';
import { loadOrCreateDevSecrets } from '../lib/dev-secrets.js';
import { call, grpcClient } from '../lib/grpc.js';
import { logger } from '../lib/log.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import type { ServiceMetrics } from '../lib/metrics.js';
import type { StartLoginOptions } from '../services/login/server.js';
import { loadOrCreateDevIdp, trustsDevIdp } from '../lib/idp.js';

export interface Stack {
  loginUrl: string;
  gatewayUrl: string;
  demoAppUrl: string;
  /** /metrics of login and the gateway, when LOGIN_METRICS_PORT / GATEWAY_METRICS_PORT are set. */
  metricsUrls: { login?: string; gateway?: string };
  directoryAddr: string;
  nodeAssignAddr: string;
  audience: string;
  dataDir: string;
  /** Whether login trusts the development IdP (start.ts warns loudly when it does). */
  devIdpTrusted: boolean;
  close(): Promise<void>;
}

const NODE_CAPACITY = 10_000;

/** The stack's services, each startable on its own (in this process or in a child: scripts/stack-part.ts). */
export type PartName = 'directory' | 'nodeassign' | 'demo-app' | 'node-gateway' | 'login';

/** Where the parts started before this one listen. */
export interface PartLinks {
  directoryAddr?: string;
  nodeAssignAddr?: string;
  demoAppUrl?: string;
}

/** What a running part tells the stack (plain data: it crosses the IPC channel). */
export interface PartInfo {
  port: number;
  url?: string;
  metricsUrl?: string;
  audience?: string;
  devIdpTrusted?: boolean;
}

export interface RunningPart {
  info: PartInfo;
  /** Login's metrics (a login cluster worker hands them to its primary). */
  metrics?: ServiceMetrics;
  close(graceMs?: number): Promise<void>;
}

/** What every part derives from the environment and DATA_DIR (secrets and the development IdP are made once, then read). */
interface StackContext {
  env: Env;
  dataDir: string;
  host: string;
  masterSecrets: string[];
  internalSecret: string;
  auth: GrpcAuth;
  devIdp: Awaited<ReturnType<typeof loadOrCreateDevIdp>> | null;
  store: string;
}

async function stackContext(env: Env): Promise<StackContext> {
  const dataDir = path.resolve(str(env, 'DATA_DIR', DEFAULTS.DATA_DIR));
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  // Whichever secret the environment does not give comes from DATA_DIR/secrets.json (generated once).
  const dev = loadOrCreateDevSecrets(dataDir);
  if (dev.replacedMaster) {
    logger('stack').warn(`${path.join(dataDir, 'secrets.json')} held a master secret refused now (under ${MIN_MASTER_SECRET_LENGTH} characters, or a published sample): replaced by a new one (tokens issued before no longer verify)`);
  }
  return {
    env,
    dataDir,
    host: str(env, 'BIND_HOST', DEFAULTS.BIND_HOST),
    masterSecrets: dev.masterSecrets,
    internalSecret: dev.internalSecret,
    auth: grpcAuth(env, dev.internalSecret),
    // An operator who sets TRUSTED_ISSUERS means exactly those issuers.
    devIdp: env.TRUSTED_ISSUERS?.trim() ? null : await loadOrCreateDevIdp(dataDir),
    store: storeUrl({ ...env, DATA_DIR: dataDir }),
  };
}

export const metricsUrl = (port: number | undefined, where: { host: string } | undefined): string | undefined =>
  port === undefined || !where ? undefined : `http://${displayHost(where.host)}:${port}/metrics`;

/**
 * Starts one part of the stack in this process, loading only that service's
 * code (a process per part stays small). Login is one process here whatever
 * LOGIN_WORKERS says: `npm start` runs its workers (scripts/stack-part.ts),
 * each of which starts login through here with `loginOptions`.
 */
export async function startPart(name: PartName, env: Env, links: PartLinks = {}, loginOptions: StartLoginOptions = {}): Promise<RunningPart> {
  const ctx = await stackContext(env);
  const { host, auth } = ctx;
  switch (name) {
    case 'directory': {
      const { startDirectory } = await import('../services/directory/server.js');
      const d = await startDirectory({
        storeUrl: ctx.store,
        host,
        port: port(env, 'DIRECTORY_PORT', DEFAULTS.DIRECTORY_PORT),
        clientStateChangesPerDay: clientStateChangesPerDay(env),
        auth,
        metrics: metricsListener(env, 'DIRECTORY_METRICS_PORT'),
      });
      return { info: { port: d.port }, close: d.close };
    }
    case 'nodeassign': {
      const { startNodeAssign } = await import('../services/nodeassign/server.js');
      const n = await startNodeAssign({
        storeUrl: ctx.store,
        host,
        port: port(env, 'NODEASSIGN_PORT', DEFAULTS.NODEASSIGN_PORT),
        auth,
        metrics: metricsListener(env, 'NODEASSIGN_METRICS_PORT'),
      });
      return { info: { port: n.port }, close: n.close };
    }
    case 'demo-app': {
      const { startDemoApp } = await import('../services/demo-app/server.js');
      const demo = await startDemoApp({ host, port: port(env, 'DEMO_APP_PORT', DEFAULTS.DEMO_APP_PORT) });
      return { info: { port: demo.port, url: demo.url }, close: demo.close };
    }
    case 'node-gateway': {
      const { startGateway } = await import('../services/node-gateway/server.js');
      // The gateway's public URL is the node URL; with GATEWAY_PORT=0 it is known only once bound,
      // so the gateway makes it from its port (the stand-in below only passes the config check).
      const gatewayEnv: Env = { ...env, UPSTREAM_URL: env.UPSTREAM_URL ?? links.demoAppUrl, NODE_URL: env.NODE_URL ?? 'http://127.0.0.1' };
      const config = gatewayConfig(gatewayEnv, { masterSecrets: ctx.masterSecrets });
      const gateway = await startGateway(config, env.NODE_URL ? undefined : (p) => `http://${displayHost(host)}:${p}`);
      return { info: { port: gateway.port, url: gateway.nodeUrl, metricsUrl: metricsUrl(gateway.metricsPort, config.metrics) }, close: gateway.close };
    }
    case 'login': {
      const { startLogin } = await import('../services/login/server.js');
      const loginPort = port(env, 'LOGIN_PORT', DEFAULTS.LOGIN_PORT);
      const loginEnv: Env = {
        ...env,
        DIRECTORY_ADDR: links.directoryAddr,
        NODEASSIGN_ADDR: links.nodeAssignAddr,
        // Key sets fetched from the provider are kept under DATA_DIR, so a restart while it is down still logs in (DESIGN §13.1).
        OAUTH_JWKS_CACHE: env.OAUTH_JWKS_CACHE?.trim() || path.join(ctx.dataDir, 'oauth-jwks.json'),
        WEBHOOK_JWKS_CACHE: env.WEBHOOK_JWKS_CACHE?.trim() || path.join(ctx.dataDir, 'webhook-jwks.json'),
      };
      // The audience is the login URL a client talks to; with LOGIN_PORT=0 it is known once bound.
      let config = loginConfig(loginEnv, {
        masterSecrets: ctx.masterSecrets,
        internalSecret: ctx.internalSecret,
        trustedIssuers: ctx.devIdp?.trustedIssuers,
        audiences: [`http://${displayHost(host)}:${loginPort}`],
      });
      let login = await startLogin(config, loginOptions);
      if (!env.AUDIENCES?.trim() && loginPort === 0) {
        await login.close();
        config = { ...config, port: login.port, audiences: [`http://${displayHost(host)}:${login.port}`] };
        login = await startLogin(config, loginOptions);
      }
      return {
        info: {
          port: login.port,
          url: `http://${displayHost(host)}:${login.port}`,
          metricsUrl: metricsUrl(login.metricsPort, config.metrics),
          audience: config.audiences[0],
          devIdpTrusted: trustsDevIdp(config.trustedIssuers),
        },
        metrics: login.metrics,
        close: login.close,
      };
    }
  }
}

/** Starts one part: in this process, or in a child process of its own (scripts/stack-part.ts). */
export type PartStarter = (name: PartName, env: Env, links: PartLinks) => Promise<RunningPart>;

/**
 * Every part, each started by `start` (default: all in this process, which
 * tests use; `npm start` gives each its own process, so they use every core).
 */
export async function startStack(env: Env, start: PartStarter = startPart): Promise<Stack> {
  // Made here once (secrets, the development IdP key), read by every part.
  const ctx = await stackContext(env);
  const closers: Array<() => Promise<void>> = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
  };
  const starting: Array<Promise<unknown>> = [];
  const started = (p: Promise<RunningPart>): Promise<RunningPart> => {
    const up = p.then((part) => {
      closers.push(part.close);
      return part;
    });
    starting.push(up);
    return up;
  };
  try {
    // One after the other on one SQLite file: two processes turning it to WAL at once can meet "database is locked".
    const directoryP = started(start('directory', env, {}));
    const nodeAssignP = directoryP.then(() => started(start('nodeassign', env, {})));
    const demoP = started(start('demo-app', env, {}));
    const gatewayP = demoP.then((demo) => started(start('node-gateway', env, { demoAppUrl: demo.info.url })));
    // Awaited below; a failure before then is not an unhandled rejection.
    gatewayP.catch(() => undefined);
    const [directory, nodeAssign] = await Promise.all([directoryP, nodeAssignP]);
    const directoryAddr = `${ctx.host}:${directory.info.port}`;
    const nodeAssignAddr = `${ctx.host}:${nodeAssign.info.port}`;
    const [login, demo, gateway] = await Promise.all([started(start('login', env, { directoryAddr, nodeAssignAddr })), demoP, gatewayP]);

    await registerNodes(nodeAssignAddr, ctx.auth, [...applications(env).keys()], gateway.info.url!);

    return {
      loginUrl: login.info.url!,
      gatewayUrl: gateway.info.url!,
      demoAppUrl: demo.info.url!,
      metricsUrls: { login: login.info.metricsUrl, gateway: gateway.info.metricsUrl },
      directoryAddr,
      nodeAssignAddr,
      audience: login.info.audience!,
      dataDir: ctx.dataDir,
      devIdpTrusted: login.info.devIdpTrusted!,
      close,
    };
  } catch (e) {
    // Parts still starting register their closers once up (and may start the next): let them, then close all.
    for (let settled = 0; settled < starting.length; ) {
      settled = starting.length;
      await Promise.allSettled(starting);
    }
    await close();
    throw e;
  }
}

export function displayHost(host: string): string {
  return host === '0.0.0.0' || host === '::' ? 'localhost' : host;
}

/** One node per application, unless that application has nodes already. */
async function registerNodes(nodeAssignAddr: string, auth: GrpcAuth, apps: string[], nodeUrl: string): Promise<void> {
  const client = grpcClient(NodeAssignClient, nodeAssignAddr, auth);
  const opts = { deadlineMs: 5000, retryAfter: DEFAULTS.RETRY_AFTER };
  try {
    for (const service of apps) {
      const { nodes } = await call(client, client.listNodes, { service }, opts);
      if (nodes.length === 0) await call(client, client.addNode, { service, url: nodeUrl, capacity: NODE_CAPACITY }, opts);
    }
  } finally {
    client.close();
  }
}
