// Starts the NodeAssign gRPC service (with grpc.health.v1) on its store, and
// its /metrics listener when one is configured.
import { DEFAULTS, type GrpcAuth, type MetricsListener } from '../../lib/config.js';
import { NodeAssignService } from '../../lib/gen/nodeassign.js';
import { serveWithStore } from '../../lib/grpc.js';
import { logger } from '../../lib/log.js';
import { NodeAssignMetrics } from '../../lib/metrics.js';
import { withMetricsListener } from '../../lib/metrics-server.js';
import { nodeAssignService } from './service.js';
import { openNodeStore } from './open-store.js';

export interface RunningNodeAssign {
  port: number;
  /** Where /metrics is served (NODEASSIGN_METRICS_PORT), if anywhere. */
  metricsPort?: number;
  close(): Promise<void>;
}

export async function startNodeAssign(opts: {
  storeUrl: string;
  host?: string;
  port?: number;
  releaseRate?: number;
  auth: GrpcAuth;
  metrics?: MetricsListener;
}): Promise<RunningNodeAssign> {
  const store = await openNodeStore(opts.storeUrl);
  const log = logger('nodeassign');
  const metrics = new NodeAssignMetrics();
  const served = await serveWithStore(
    store,
    {
      definition: NodeAssignService,
      implementation: nodeAssignService(store, log, opts.releaseRate ?? DEFAULTS.RELEASE_RATE, metrics),
      name: 'tokenserver.nodeassign.v1.NodeAssign',
      proto: 'nodeassign.proto',
    },
    opts.host ?? '127.0.0.1',
    opts.port ?? 0,
    opts.auth,
  );
  return withMetricsListener(served, metrics, opts.metrics, log);
}
