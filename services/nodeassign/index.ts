// Entry point: `tsx services/nodeassign/index.ts`, configured by the environment (DESIGN §7).
import { nodeAssignConfig } from '../../lib/config.js';
import { ConfigError } from '../../lib/errors.js';
import { logger } from '../../lib/log.js';
import { startNodeAssign } from './server.js';

const log = logger('nodeassign');

async function main(): Promise<void> {
  const config = nodeAssignConfig(process.env);
  const running = await startNodeAssign(config);
  const stop = (signal: string) => {
    log.info({ signal }, 'nodeassign stopping');
    running.close().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'nodeassign did not stop cleanly');
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // Logged once the signal handlers are in place: whoever waits for this line may stop us at once.
  log.info({ host: config.host, port: running.port }, 'nodeassign listening');
}

main().catch((err) => {
  if (err instanceof ConfigError) console.error(err.message);
  else log.error({ err }, 'nodeassign failed to start');
  process.exit(1);
});
