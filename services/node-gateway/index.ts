// Entry point: the node-gateway from configuration (NODE_URL, UPSTREAM_URL,
// MASTER_SECRETS, GATEWAY_PORT, HAWK_SKEW, …). Bad configuration names the
// variable and exits 1.
import { gatewayConfig } from '../../lib/config.js';
import { ConfigError } from '../../lib/errors.js';
import { logger } from '../../lib/log.js';
import { startGateway } from './server.js';

const log = logger('node-gateway');

async function main(): Promise<void> {
  const gateway = await startGateway(gatewayConfig(process.env));
  const stop = (): void => {
    log.info('node-gateway stopping');
    void gateway.close().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((e) => {
  process.stderr.write(e instanceof ConfigError ? `configuration error: ${e.message}\n` : `failed to start: ${(e as Error).message}\n`);
  process.exit(1);
});
