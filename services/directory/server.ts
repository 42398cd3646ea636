// Starts the Directory gRPC service (with grpc.health.v1) on its store.
import { DEFAULTS } from '../../lib/config.js';
import type { GrpcAuth } from '../../lib/config.js';
import { DirectoryService } from '../../lib/gen/directory.js';
import { serveWithStore } from '../../lib/grpc.js';
import { logger } from '../../lib/log.js';
import { directoryService } from './service.js';
import { openUserStore } from './open-store.js';

export interface RunningDirectory {
  port: number;
  close(): Promise<void>;
}

export async function startDirectory(opts: {
  storeUrl: string;
  host?: string;
  port?: number;
  clientStateChangesPerDay?: number;
  auth: GrpcAuth;
}): Promise<RunningDirectory> {
  const store = await openUserStore(opts.storeUrl);
  const policy = { clientStateChangesPerDay: opts.clientStateChangesPerDay ?? DEFAULTS.CLIENT_STATE_CHANGES_PER_DAY };
  return serveWithStore(
    store,
    { definition: DirectoryService, implementation: directoryService(store, logger('directory'), policy), name: 'tokenserver.directory.v1.Directory', proto: 'directory.proto' },
    opts.host ?? '127.0.0.1',
    opts.port ?? 0,
    opts.auth,
  );
}
