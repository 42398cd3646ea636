// Entry point: the demo application from configuration (DEMO_APP_PORT, BIND_HOST).
import { demoAppConfig } from '../../lib/config.js';
import { runService } from '../../lib/main.js';
import { startDemoApp } from './server.js';

runService('demo-app', () => startDemoApp(demoAppConfig(process.env)), (r) => ({ url: r.url }));
