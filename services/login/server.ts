// The login service: Koa over node:http, one gRPC client per backend.
// A request goes: requestContext (request id, access line, metrics) →
// handleErrors → router → one endpoint's middleware array (actions/*.ts) → response.
import Koa from 'koa';
import Router from '@koa/router';
import { createServer } from 'node:http';
import { listen, serverCloser } from '../../lib/listen.js';
import { answerClientErrors } from '../../lib/client-error.js';
import { readAllowListFile, type LoginConfig } from '../../lib/config.js';
import { NotFound } from '../../lib/errors.js';
import { watchLoopDelay } from '../../lib/load.js';
import { logger, type Logger } from '../../lib/log.js';
import { LoginMetrics } from '../../lib/metrics.js';
import { DEV_IDP_WARNING, trustsDevIdp } from '../../lib/idp.js';
import { serveMetrics, type RunningMetrics } from '../../lib/metrics-server.js';
import { heartbeatEndpoint, lbHeartbeatEndpoint } from './actions/heartbeat.js';
import { TOKEN_PATH, tokenEndpoint } from './actions/token.js';
import { versionEndpoint } from './actions/version.js';
import { WEBHOOK_ALGORITHMS, WEBHOOK_PATH, webhookEndpoint } from './actions/webhook.js';
import { connectBackends } from './backends.js';
import { errorHandler } from './error-handler.js';
import { startKeySource } from './jwks-source.js';
import { ACCESS_TOKEN_ALGORITHMS } from './scheme-bearer.js';
import { createAuthenticator, type Authenticator } from './schemes.js';
import { requestContext, type LoginDeps, type LoginKeySources } from './shared.js';

export interface RunningLogin {
  port: number;
  url: string;
  /** Where /metrics is served (LOGIN_METRICS_PORT), if anywhere. */
  metricsPort?: number;
  metrics: LoginMetrics;
  /** Stops: requests being answered get up to `graceMs` to finish (default none: cut at once). */
  close(graceMs?: number): Promise<void>;
}

/** How long a cluster worker waits for its backends before it opens anyway (and answers 503 until they are up), ms. */
const WORKER_CONNECT_MS = 5000;

export interface StartLoginOptions {
  /**
   * One of several cluster workers (lib/cluster.ts): it connects to its
   * backends, then waits for its turn before it listens, and says "login
   * worker listening" (the primary says "login listening" for the whole set).
   */
  worker?: { waitForTurn(): Promise<void> };
}

export function createApp(deps: LoginDeps): Koa {
  const router = new Router();
  // router.all: the endpoints answer 405 themselves, after their own 404 checks.
  router.all(TOKEN_PATH, ...(tokenEndpoint(deps) as Koa.Middleware[]));
  if (deps.config.webhook) router.all(WEBHOOK_PATH, ...webhookEndpoint(deps, deps.config.webhook));
  router.all('/__heartbeat__', ...heartbeatEndpoint(deps));
  router.all('/__lbheartbeat__', ...lbHeartbeatEndpoint());
  router.all('/__version__', ...versionEndpoint());

  const app = new Koa();
  app.use(requestContext(deps.log, deps.metrics));
  app.use(errorHandler({ log: deps.log, challenges: deps.auth.challenges }));
  app.use(router.routes());
  app.use(async function unknownPath() {
    throw new NotFound('no such endpoint');
  });
  // Every error is answered by errorHandler; this only silences Koa's stderr default.
  app.on('error', (err) => deps.log.error({ err }, 'unhandled koa error'));
  return app;
}

/**
 * ALLOWED_USERS=@<file>: SIGHUP reads the file again. A file that cannot be read
 * or parsed leaves the current list in force (and says why in the log).
 */
function reloadAllowListOnHangup(config: LoginConfig, log: Logger): () => void {
  const source = config.allowedUsers;
  const file = source?.file;
  if (!source || !file) return () => undefined;
  const reload = () => {
    try {
      source.list = readAllowListFile(file);
      log.info({ file, emails: source.list.emails.size, domains: source.list.domains.size }, 'ALLOWED_USERS reloaded');
    } catch (err) {
      log.error({ file, err: (err as Error).message }, 'ALLOWED_USERS reload failed; the previous list stays');
    }
  };
  process.on('SIGHUP', reload);
  return () => process.off('SIGHUP', reload);
}

/**
 * Bearer's and the webhook's key sets (DESIGN §13.1): a file's now, or the
 * provider's after the first fetch at start (or its disk copy, or none yet).
 * Each login process keeps its own, cluster workers included: the primary
 * does not load login's code, and a few small fetches an hour per worker cost
 * the provider less than a second path over the cluster channel would cost us.
 */
async function startKeySources(config: LoginConfig, log: Logger, metrics: LoginMetrics): Promise<LoginKeySources> {
  const sources: LoginKeySources = {};
  try {
    if (config.bearer) sources.oauth = await startKeySource(config.bearer.jwks, 'OAUTH_JWKS', { set: 'oauth', algorithms: ACCESS_TOKEN_ALGORITHMS, log, metrics });
    if (config.webhook) sources.webhook = await startKeySource(config.webhook.jwks, 'WEBHOOK_JWKS', { set: 'webhook', algorithms: WEBHOOK_ALGORITHMS, log, metrics });
  } catch (err) {
    sources.oauth?.close();
    throw err;
  }
  return sources;
}

export async function startLogin(config: LoginConfig, options: StartLoginOptions = {}): Promise<RunningLogin> {
  const log = logger('login');
  const metrics = new LoginMetrics();
  const keySources = await startKeySources(config, log, metrics);
  const closeKeySources = () => {
    keySources.oauth?.close();
    keySources.webhook?.close();
  };
  let auth: Authenticator;
  try {
    auth = await createAuthenticator(config, { oauth: keySources.oauth });
  } catch (err) {
    closeKeySources();
    throw err;
  }
  if (trustsDevIdp(config.trustedIssuers)) log.warn(DEV_IDP_WARNING);
  const backends = connectBackends(config, metrics);
  const loopDelay = watchLoopDelay();
  const app = createApp({ config, auth, backends, log, metrics, loopDelay, keySources });
  const server = createServer(app.callback());
  const close = serverCloser(server);
  answerClientErrors(server, log);
  let port: number;
  try {
    if (options.worker) {
      if (!(await backends.connect(WORKER_CONNECT_MS))) log.warn({ waitedMs: WORKER_CONNECT_MS }, 'directory or nodeassign not reachable yet; listening anyway');
      await options.worker.waitForTurn();
    }
    port = await listen(server, config.port, config.host);
  } catch (err) {
    backends.close();
    loopDelay.stop();
    closeKeySources();
    throw err;
  }
  let exposed: RunningMetrics | undefined;
  try {
    exposed = config.metrics && (await serveMetrics(metrics, config.metrics, log));
  } catch (err) {
    await close();
    backends.close();
    loopDelay.stop();
    closeKeySources();
    throw err;
  }
  const stopReloading = reloadAllowListOnHangup(config, log);
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  log.info({ port, applications: [...config.applications.keys()] }, options.worker ? 'login worker listening' : 'login listening');
  return {
    port,
    url: `http://${host}:${port}`,
    metricsPort: exposed?.port,
    metrics,
    close: async (graceMs?: number) => {
      stopReloading();
      await exposed?.close();
      await close(graceMs);
      backends.close();
      loopDelay.stop();
      closeKeySources();
    },
  };
}
