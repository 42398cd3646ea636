// Entry point: `tsx services/directory/index.ts`, configured by the environment (DESIGN §7).
import { directoryConfig } from '../../lib/config.js';
import { ConfigError } from '../../lib/errors.js';
import { logger } from '../../lib/log.js';
import { startDirectory } from './server.js';

const log = logger('directory');

async function main(): Promise<void> {
  const config = directoryConfig(process.env);
  const running = await startDirectory(config);
  const stop = (signal: string) => {
    log.info({ signal }, 'directory stopping');
    running.close().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'directory did not stop cleanly');
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // Logged once the signal handlers are in place: whoever waits for this line may stop us at once.
  log.info({ host: config.host, port: running.port }, 'directory listening');
}

main().catch((err) => {
  if (err instanceof ConfigError) console.error(err.message);
  else log.error({ err }, 'directory failed to start');
  process.exit(1);
});
