// The embedded stack (`npm start`): every service in one process over real
// gRPC and HTTP on loopback, SQLite under DATA_DIR, a development IdP that is
// trusted in this mode only, and a demo application behind the gateway.
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { DEFAULTS, applications, gatewayConfig, loginConfig, port, str, storeUrl, type Env } from '../lib/config.js';
import { call, CLIENT_OPTIONS, insecure } from '../lib/grpc.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { loadOrCreateDevIdp } from '../lib/idp.js';
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
  close(): Promise<void>;
}

/** Master secrets from MASTER_SECRETS, else generated once and kept under the data folder. */
export function loadOrCreateSecrets(dataDir: string): string[] {
  const file = path.join(dataDir, 'secrets.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')).masterSecrets as string[];
  const masterSecrets = [randomBytes(32).toString('hex')];
  writeFileSync(file, JSON.stringify({ masterSecrets }, null, 2) + '\n', { mode: 0o600 });
  return masterSecrets;
}

const NODE_CAPACITY = 10_000;

export async function startStack(env: Env): Promise<Stack> {
  const dataDir = path.resolve(str(env, 'DATA_DIR', DEFAULTS.DATA_DIR));
  mkdirSync(dataDir, { recursive: true });
  const host = str(env, 'BIND_HOST', DEFAULTS.BIND_HOST);
  const masterSecrets = env.MASTER_SECRETS?.trim() ? undefined : loadOrCreateSecrets(dataDir);
  const devIdp = await loadOrCreateDevIdp(dataDir);
  const store = storeUrl({ ...env, DATA_DIR: dataDir });
  const apps = applications(env);
  const closers: Array<() => Promise<void>> = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
  };
  try {
    const directory = await startDirectory({ storeUrl: store, host, port: port(env, 'DIRECTORY_PORT', DEFAULTS.DIRECTORY_PORT) });
    closers.push(directory.close);
    const nodeAssign = await startNodeAssign({ storeUrl: store, host, port: port(env, 'NODEASSIGN_PORT', DEFAULTS.NODEASSIGN_PORT) });
    closers.push(nodeAssign.close);
    const directoryAddr = `${host}:${directory.port}`;
    const nodeAssignAddr = `${host}:${nodeAssign.port}`;

    const demo = await startDemoApp({ host, port: port(env, 'DEMO_APP_PORT', DEFAULTS.DEMO_APP_PORT) });
    closers.push(demo.close);

    // The gateway's public URL is the node URL; with GATEWAY_PORT=0 it is known only once bound.
    const gatewayEnv: Env = { ...env, UPSTREAM_URL: env.UPSTREAM_URL ?? demo.url, NODE_URL: env.NODE_URL ?? 'http://placeholder.invalid' };
    let gwConfig = gatewayConfig(gatewayEnv, { masterSecrets });
    let gateway = await startGateway(gwConfig);
    if (!env.NODE_URL) {
      const nodeUrl = `http://${displayHost(host)}:${gateway.port}`;
      await gateway.close();
      gwConfig = { ...gwConfig, nodeUrl, port: gateway.port };
      gateway = await startGateway(gwConfig);
    }
    closers.push(gateway.close);

    const loginPort = port(env, 'LOGIN_PORT', DEFAULTS.LOGIN_PORT);
    const loginEnv: Env = { ...env, DIRECTORY_ADDR: directoryAddr, NODEASSIGN_ADDR: nodeAssignAddr };
    // The audience is the login URL a client talks to; with LOGIN_PORT=0 it is known once bound.
    let lgConfig = loginConfig(loginEnv, {
      masterSecrets,
      trustedIssuers: devIdp.trustedIssuers,
      audiences: [`http://${displayHost(host)}:${loginPort}`],
    });
    let login = await startLogin(lgConfig);
    if (!env.AUDIENCES?.trim() && loginPort === 0) {
      await login.close();
      lgConfig = { ...lgConfig, port: login.port, audiences: [`http://${displayHost(host)}:${login.port}`] };
      login = await startLogin(lgConfig);
    }
    closers.push(login.close);

    await registerNodes(nodeAssignAddr, [...apps.keys()], gwConfig.nodeUrl);

    const metricsUrl = (port: number | undefined, where: { host: string } | undefined) =>
      port === undefined || !where ? undefined : `http://${displayHost(where.host)}:${port}/metrics`;
    return {
      loginUrl: `http://${displayHost(host)}:${login.port}`,
      gatewayUrl: gwConfig.nodeUrl,
      demoAppUrl: demo.url,
      metricsUrls: { login: metricsUrl(login.metricsPort, lgConfig.metrics), gateway: metricsUrl(gateway.metricsPort, gwConfig.metrics) },
      directoryAddr,
      nodeAssignAddr,
      audience: lgConfig.audiences[0],
      dataDir,
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
async function registerNodes(nodeAssignAddr: string, apps: string[], nodeUrl: string): Promise<void> {
  const client = new NodeAssignClient(nodeAssignAddr, insecure(), CLIENT_OPTIONS);
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
