// Entry point: the node-gateway from configuration (NODE_URL, UPSTREAM_URL,
// MASTER_SECRETS or NODE_SECRETS, GATEWAY_PORT, HAWK_SKEW, …). startGateway logs "node-gateway listening".
import { gatewayConfig } from '../../lib/config.js';
import { runService } from '../../lib/main.js';
import { startGateway } from './server.js';

runService('node-gateway', () => startGateway(gatewayConfig(process.env)));
