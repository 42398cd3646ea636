// Starts the Directory gRPC service (with grpc.health.v1) on its store.
import { DirectoryService } from '../../lib/gen/directory.js';
import { startServer } from '../../lib/grpc.js';
import { logger } from '../../lib/log.js';
import { directoryService } from './service.js';
import { openUserStore } from './store.js';

export interface RunningDirectory {
  port: number;
  close(): Promise<void>;
}

export async function startDirectory(opts: { storeUrl: string; host?: string; port?: number }): Promise<RunningDirectory> {
  const log = logger('directory');
  const store = await openUserStore(opts.storeUrl);
  try {
    const running = await startServer(
      [{ definition: DirectoryService, implementation: directoryService(store, log), name: 'tokenserver.directory.v1.Directory' }],
      opts.host ?? '127.0.0.1',
      opts.port ?? 0,
    );
    return {
      port: running.port,
      close: async () => {
        await running.close();
        await store.close();
      },
    };
  } catch (err) {
    await store.close();
    throw err;
  }
}
