// GET /__heartbeat__ — both backends answer grpc.health.v1 (503 when one does not);
// GET /__lbheartbeat__ — the process is up (200 always, for load balancers).
import type { Middleware } from 'koa';
import { sendJson } from '../error-handler.js';
import { allowMethods, GET_HEAD, type LoginDeps } from '../shared.js';

export function heartbeatEndpoint(deps: LoginDeps): Middleware[] {
  return [
    allowMethods(GET_HEAD),
    async function checkBackends(ctx) {
      const health = await deps.backends.health();
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
        errors: down.map((name) => ({ location: 'internal', name, description: 'backend unavailable' })),
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
