// GET /__heartbeat__ — both backends answer grpc.health.v1, and each key set
// fetched from the provider has arrived (DESIGN §13.1; 503 when one is missing);
// GET /__lbheartbeat__ — the process is up (200 always, for load balancers).
import type { Middleware } from 'koa';
import { sendJson } from '../error-handler.js';
import { allowMethods, GET_HEAD, type LoginDeps } from '../shared.js';

/** What a missing key set means, by check name (the backends' is "backend unavailable"). */
const DOWN: Record<string, string> = {
  oauth_jwks: 'no key set from the OAuth provider yet (OAUTH_JWKS / OAUTH_ISSUER): Bearer answers 503',
  webhook_jwks: 'no key set for account events yet (WEBHOOK_JWKS): the webhook answers 503',
};

export function heartbeatEndpoint(deps: LoginDeps): Middleware[] {
  return [
    allowMethods(GET_HEAD),
    async function checkBackends(ctx) {
      const health: Record<string, boolean> = { ...(await deps.backends.health()) };
      // Only fetched sets: a file's keys are there from the start or login did not start.
      const sets = deps.keySources;
      if (sets.oauth?.remote) health.oauth_jwks = sets.oauth.keys !== undefined;
      if (sets.webhook?.remote) health.webhook_jwks = sets.webhook.keys !== undefined;
      const checks = Object.fromEntries(Object.entries(health).map(([name, up]) => [name, up ? 'ok' : 'unavailable']));
      const down = Object.entries(health).filter(([, up]) => !up).map(([name]) => name);
      if (down.length === 0) {
        sendJson(ctx, 200, { status: 'ok', checks });
        return;
      }
      ctx.set('Retry-After', String(deps.config.retryAfter));
      sendJson(ctx, 503, {
        status: 'error',
        checks,
        errors: down.map((name) => ({ location: 'internal', name, description: DOWN[name] ?? 'backend unavailable' })),
      });
    },
  ];
}

export function lbHeartbeatEndpoint(): Middleware[] {
  return [
    allowMethods(GET_HEAD),
    async function alive(ctx) {
      sendJson(ctx, 200, {});
    },
  ];
}
