// Starts the Directory gRPC service (with grpc.health.v1 and reflection) on its
// store, and its /metrics listener when one is configured.
import { DEFAULTS } from '../../lib/config.js';
import type { GrpcAuth, MetricsListener } from '../../lib/config.js';
import { DirectoryService } from '../../lib/gen/directory.js';
import { OpenStreams, serveWithStore } from '../../lib/grpc.js';
import { logger } from '../../lib/log.js';
import { CachedCounts, DirectoryMetrics } from '../../lib/metrics.js';
import { withMetricsListener } from '../../lib/metrics-server.js';
import { countedService, recordCounts } from './metrics.js';
import { directoryService } from './service.js';
import { openUserStore } from './open-store.js';

export interface RunningDirectory {
  port: number;
  /** Where /metrics is served (DIRECTORY_METRICS_PORT), if anywhere. */
  metricsPort?: number;
  close(): Promise<void>;
}

export async function startDirectory(opts: {
  storeUrl: string;
  host?: string;
  port?: number;
  clientStateChangesPerDay?: number;
  auth: GrpcAuth;
  metrics?: MetricsListener;
  /** How long a count of records by state is reused, ms. */
  recordCountsMaxAgeMs?: number;
}): Promise<RunningDirectory> {
  const store = await openUserStore(opts.storeUrl);
  const log = logger('directory');
  const policy = { clientStateChangesPerDay: opts.clientStateChangesPerDay ?? DEFAULTS.CLIENT_STATE_CHANGES_PER_DAY };
  const counts = new CachedCounts(
    async () => recordCounts(await store.counts('')),
    opts.recordCountsMaxAgeMs ?? DEFAULTS.RECORD_COUNTS_MAX_AGE_MS,
    (err) => log.warn({ err }, 'counting records for metrics failed'),
  );
  const metrics = new DirectoryMetrics(counts);
  const streams = new OpenStreams();
  const served = await serveWithStore(
    store,
    {
      definition: DirectoryService,
      implementation: countedService(directoryService(store, log, policy, streams), metrics),
      name: 'tokenserver.directory.v1.Directory',
      proto: 'directory.proto',
      streams,
    },
    opts.host ?? '127.0.0.1',
    opts.port ?? 0,
    opts.auth,
  );
  return withMetricsListener(served, metrics, opts.metrics, log);
}
