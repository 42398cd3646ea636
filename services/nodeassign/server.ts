// Starts the NodeAssign gRPC service (with grpc.health.v1) on its store.
import { DEFAULTS, type GrpcAuth } from '../../lib/config.js';
import { NodeAssignService } from '../../lib/gen/nodeassign.js';
import { serveWithStore } from '../../lib/grpc.js';
import { logger } from '../../lib/log.js';
import { nodeAssignService } from './service.js';
import { openNodeStore } from './open-store.js';

export interface RunningNodeAssign {
  port: number;
  close(): Promise<void>;
}

export async function startNodeAssign(opts: {
  storeUrl: string;
  host?: string;
  port?: number;
  releaseRate?: number;
  auth: GrpcAuth;
}): Promise<RunningNodeAssign> {
  const store = await openNodeStore(opts.storeUrl);
  return serveWithStore(
    store,
    {
      definition: NodeAssignService,
      implementation: nodeAssignService(store, logger('nodeassign'), opts.releaseRate ?? DEFAULTS.RELEASE_RATE),
      name: 'tokenserver.nodeassign.v1.NodeAssign',
      proto: 'nodeassign.proto',
    },
    opts.host ?? '127.0.0.1',
    opts.port ?? 0,
    opts.auth,
  );
}
