// Entry point: the login service from the environment (DESIGN §7). startLogin logs "login listening".
import { loginConfig } from '../../lib/config.js';
import { runService } from '../../lib/main.js';
import { startLogin } from './server.js';

runService('login', () => startLogin(loginConfig(process.env)));
