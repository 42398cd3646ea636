// Entry point: the login service from the environment (DESIGN §7).
import { loginConfig } from '../../lib/config.js';
import { ConfigError } from '../../lib/errors.js';
import { logger } from '../../lib/log.js';
import { startLogin } from './server.js';

const log = logger('login');

async function main(): Promise<void> {
  const running = await startLogin(loginConfig(process.env));
  const stop = () => {
    running.close().then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`configuration error: ${err.message}\n`);
  } else {
    log.error({ err }, 'login failed to start');
    process.stderr.write(`login failed to start: ${(err as Error).message}\n`);
  }
  process.exit(1);
});
