// Entry point: the node-gateway from configuration (NODE_URL, UPSTREAM_URL,
// MASTER_SECRETS, GATEWAY_PORT, HAWK_SKEW, …). Bad configuration names the
// variable and exits 1.
import { gatewayConfig } from '../../lib/config.js';
import { ConfigError } from '../../lib/errors.js';
import { logger } from '../../lib/log.js';
import { startGateway, type Gateway } from './server.js';

const log = logger('node-gateway');

async function main(): Promise<void> {
  const config = gatewayConfig(process.env);
  let gateway: Gateway | undefined;
  // In place before the "listening" line: whoever waits for it may stop us at once.
  const stop = (signal: string): void => {
    log.info({ signal }, 'node-gateway stopping');
    (gateway?.close() ?? Promise.resolve()).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  gateway = await startGateway(config);
}

main().catch((err) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`configuration error: ${err.message}\n`);
  } else {
    log.error({ err }, 'node-gateway failed to start');
    process.stderr.write(`node-gateway failed to start: ${(err as Error).message}\n`);
  }
  process.exit(1);
});
