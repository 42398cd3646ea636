// Entry point: the login service from the environment (DESIGN §7, §12).
// LOGIN_WORKERS=1: this process serves (startLogin logs "login listening").
// More: this process is the cluster primary (lib/cluster.ts) and logs "login
// listening" once every worker listens; each worker runs this file too.
import cluster from 'node:cluster';
import { loginConfig, loginWorkers } from '../../lib/config.js';
import { runWorker, startWorkerSet } from '../../lib/cluster.js';
import { runService } from '../../lib/main.js';

// Loaded where login serves (a worker, or the one process): the primary only keeps the workers.
const loadLogin = () => import('./server.js');

if (cluster.isWorker) {
  runWorker('login', async (waitForTurn) => {
    // The primary serves /metrics for the whole set.
    const config = loginConfig(process.env);
    const { startLogin } = await loadLogin();
    const login = await startLogin({ ...config, metrics: undefined }, { worker: { waitForTurn } });
    return { port: login.port, metrics: login.metrics, close: login.close };
  });
} else {
  runService(
    'login',
    async () => {
      // Read here, in full, so that bad configuration stops the primary before any worker starts.
      const config = loginConfig(process.env);
      const count = loginWorkers(process.env);
      if (count === 1) return (await loadLogin()).startLogin(config);
      const set = await startWorkerSet({ name: 'login', count, metrics: config.metrics });
      return { close: set.close, listening: { port: set.port, workers: count, metricsPort: set.metricsPort, applications: [...config.applications.keys()] } };
    },
    (running) => ('listening' in running ? running.listening : undefined),
  );
}
