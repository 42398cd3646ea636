// The embedded stack (`npm start`): every service in one process over real
// gRPC and HTTP on loopback, SQLite under DATA_DIR, a development IdP that is
// trusted in this mode only (and not when TRUSTED_ISSUERS names the issuers),
// and a demo application behind the gateway.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { DEFAULTS, MIN_MASTER_SECRET_LENGTH, applications, clientStateChangesPerDay, gatewayConfig, grpcAuth, loginConfig, metricsListener, port, str, storeUrl, type Env, type GrpcAuth } from '../lib/config.js';
import { loadOrCreateDevSecrets } from '../lib/dev-secrets.js';
import { call, grpcClient } from '../lib/grpc.js';
import { logger } from '../lib/log.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { loadOrCreateDevIdp, trustsDevIdp } from '../lib/idp.js';
import { startDirectory } from '../services/directory/server.js';
import { startNodeAssign } from '../services/nodeassign/server.js';
import { startLogin } from '../services/login/server.js';
import { startGateway } from '../services/node-gateway/server.js';
import { startDemoApp } from '../services/demo-app/server.js';

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

export async function startStack(env: Env): Promise<Stack> {
  const dataDir = path.resolve(str(env, 'DATA_DIR', DEFAULTS.DATA_DIR));
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const host = str(env, 'BIND_HOST', DEFAULTS.BIND_HOST);
  // Whichever secret the environment does not give comes from DATA_DIR/secrets.json (generated once).
  const dev = loadOrCreateDevSecrets(dataDir);
  if (dev.replacedMaster) {
    logger('stack').warn(`${path.join(dataDir, 'secrets.json')} held a master secret refused now (under ${MIN_MASTER_SECRET_LENGTH} characters, or a published sample): replaced by a new one (tokens issued before no longer verify)`);
  }
  const masterSecrets = dev.masterSecrets;
  const auth = grpcAuth(env, dev.internalSecret);
  // An operator who sets TRUSTED_ISSUERS means exactly those issuers.
  const devIdp = env.TRUSTED_ISSUERS?.trim() ? null : await loadOrCreateDevIdp(dataDir);
  const store = storeUrl({ ...env, DATA_DIR: dataDir });
  const apps = applications(env);
  const closers: Array<() => Promise<void>> = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
  };
  try {
    const directory = await startDirectory({
      storeUrl: store,
      host,
      port: port(env, 'DIRECTORY_PORT', DEFAULTS.DIRECTORY_PORT),
      clientStateChangesPerDay: clientStateChangesPerDay(env),
      auth,
      metrics: metricsListener(env, 'DIRECTORY_METRICS_PORT'),
    });
    closers.push(directory.close);
    const nodeAssign = await startNodeAssign({ storeUrl: store, host, port: port(env, 'NODEASSIGN_PORT', DEFAULTS.NODEASSIGN_PORT), auth });
    closers.push(nodeAssign.close);
    const directoryAddr = `${host}:${directory.port}`;
    const nodeAssignAddr = `${host}:${nodeAssign.port}`;

    const demo = await startDemoApp({ host, port: port(env, 'DEMO_APP_PORT', DEFAULTS.DEMO_APP_PORT) });
    closers.push(demo.close);

    // The gateway's public URL is the node URL; with GATEWAY_PORT=0 it is known only once bound,
    // so the gateway makes it from its port (the stand-in below only passes the config check).
    const gatewayEnv: Env = { ...env, UPSTREAM_URL: env.UPSTREAM_URL ?? demo.url, NODE_URL: env.NODE_URL ?? 'http://127.0.0.1' };
    const gwConfig = gatewayConfig(gatewayEnv, { masterSecrets });
    const gateway = await startGateway(gwConfig, env.NODE_URL ? undefined : (p) => `http://${displayHost(host)}:${p}`);
    closers.push(gateway.close);

    const loginPort = port(env, 'LOGIN_PORT', DEFAULTS.LOGIN_PORT);
    const loginEnv: Env = { ...env, DIRECTORY_ADDR: directoryAddr, NODEASSIGN_ADDR: nodeAssignAddr };
    // The audience is the login URL a client talks to; with LOGIN_PORT=0 it is known once bound.
    let lgConfig = loginConfig(loginEnv, {
      masterSecrets,
      internalSecret: dev.internalSecret,
      trustedIssuers: devIdp?.trustedIssuers,
      audiences: [`http://${displayHost(host)}:${loginPort}`],
    });
    let login = await startLogin(lgConfig);
    if (!env.AUDIENCES?.trim() && loginPort === 0) {
      await login.close();
      lgConfig = { ...lgConfig, port: login.port, audiences: [`http://${displayHost(host)}:${login.port}`] };
      login = await startLogin(lgConfig);
    }
    closers.push(login.close);

    await registerNodes(nodeAssignAddr, auth, [...apps.keys()], gateway.nodeUrl);

    const metricsUrl = (port: number | undefined, where: { host: string } | undefined) =>
      port === undefined || !where ? undefined : `http://${displayHost(where.host)}:${port}/metrics`;
    return {
      loginUrl: `http://${displayHost(host)}:${login.port}`,
      gatewayUrl: gateway.nodeUrl,
      demoAppUrl: demo.url,
      metricsUrls: { login: metricsUrl(login.metricsPort, lgConfig.metrics), gateway: metricsUrl(gateway.metricsPort, gwConfig.metrics) },
      directoryAddr,
      nodeAssignAddr,
      audience: lgConfig.audiences[0],
      dataDir,
      devIdpTrusted: trustsDevIdp(lgConfig.trustedIssuers),
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

function displayHost(host: string): string {
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
