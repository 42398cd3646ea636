// Entry point: `tsx services/nodeassign/index.ts`, configured by the environment (DESIGN §7).
import { nodeAssignConfig } from '../../lib/config.js';
import { runService } from '../../lib/main.js';
import { startNodeAssign } from './server.js';

const config = () => nodeAssignConfig(process.env);
runService('nodeassign', () => startNodeAssign(config()), (r) => ({ host: config().host, port: r.port }));
