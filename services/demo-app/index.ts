// Entry point: the demo application from configuration (DEMO_APP_PORT, BIND_HOST).
import { demoAppConfig } from '../../lib/config.js';
import { ConfigError } from '../../lib/errors.js';
import { logger } from '../../lib/log.js';
import { startDemoApp } from './server.js';

const log = logger('demo-app');

async function main(): Promise<void> {
  const config = demoAppConfig(process.env);
  const app = await startDemoApp(config);
  log.info({ url: app.url }, 'demo application listening');
  const stop = () => {
    void app.close().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((e) => {
  process.stderr.write(e instanceof ConfigError ? `configuration error: ${e.message}\n` : `failed to start: ${(e as Error).message}\n`);
  process.exit(1);
});
