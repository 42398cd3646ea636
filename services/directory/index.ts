// Entry point: `tsx services/directory/index.ts`, configured by the environment (DESIGN §7).
import { directoryConfig } from '../../lib/config.js';
import { runService } from '../../lib/main.js';
import { startDirectory } from './server.js';

const config = () => directoryConfig(process.env);
runService('directory', () => startDirectory(config()), (r) => ({ host: config().host, port: r.port }));
