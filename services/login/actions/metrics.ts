// GET /metrics — Prometheus text format: this login instance's counters and
// latencies, then the process's (lib/metrics.ts).
import type { Middleware } from 'koa';
import { allowMethods, GET_HEAD, type LoginDeps } from '../shared.js';

export function metricsEndpoint(deps: Pick<LoginDeps, 'metrics'>): Middleware[] {
  return [
    allowMethods(GET_HEAD),
    async function exposeMetrics(ctx) {
      const page = await deps.metrics.page();
      ctx.status = 200;
      ctx.body = page.body;
      ctx.set('Content-Type', page.contentType);
    },
  ];
}
