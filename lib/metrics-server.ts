// /metrics on a listener of its own (LOGIN_METRICS_PORT, GATEWAY_METRICS_PORT,
// DIRECTORY_METRICS_PORT, NODEASSIGN_METRICS_PORT; off unless set, loopback
// unless METRICS_HOST says otherwise), never on a service's public port: the
// page tells whoever reads it about traffic, load and failures.
import http from 'node:http';
import type { MetricsListener } from './config.js';
import { listen } from './listen.js';
import type { Logger } from './log.js';
import type { MetricsSource } from './metrics.js';

export interface RunningMetrics {
  port: number;
  close(): Promise<void>;
}

function plain(res: http.ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

/** Answers GET/HEAD /metrics with the service's page; anything else is 404 or 405. */
export async function serveMetrics(metrics: MetricsSource, where: MetricsListener, log: Logger): Promise<RunningMetrics> {
  const server = http.createServer((req, res) => {
    req.resume();
    if ((req.url ?? '/').split('?', 1)[0] !== '/metrics') return plain(res, 404, 'not found\n');
    if (req.method !== 'GET' && req.method !== 'HEAD') return plain(res, 405, 'method not allowed\n', { Allow: 'GET, HEAD' });
    metrics.page().then(
      (page) => {
        res.writeHead(200, { 'Content-Type': page.contentType, 'Content-Length': String(Buffer.byteLength(page.body)), 'Cache-Control': 'no-store' });
        res.end(page.body);
      },
      (err: unknown) => {
        log.error({ err }, 'metrics page failed');
        plain(res, 500, 'metrics unavailable\n');
      },
    );
  });
  const port = await listen(server, where.port, where.host);
  log.info({ port, host: where.host }, 'metrics listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * A running gRPC service and, when `where` is set, its /metrics listener: both closed together,
 * and the service closed again if the listener cannot start.
 */
export async function withMetricsListener(
  served: { port: number; close(): Promise<void> },
  metrics: MetricsSource,
  where: MetricsListener | undefined,
  log: Logger,
): Promise<{ port: number; metricsPort?: number; close(): Promise<void> }> {
  let exposed: RunningMetrics | undefined;
  try {
    exposed = where && (await serveMetrics(metrics, where, log));
  } catch (err) {
    await served.close();
    throw err;
  }
  return {
    port: served.port,
    metricsPort: exposed?.port,
    close: async () => {
      await exposed?.close();
      await served.close();
    },
  };
}
