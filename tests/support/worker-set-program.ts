// A program for tests/worker-set.test.ts: lib/cluster.ts's primary and workers,
// as login runs them with LOGIN_WORKERS, around a small HTTP service whose
// workers can be told to start slowly, crash, fail their metrics or their stop.
//
// The primary (run through lib/main.ts, as every entry point) logs
// "workerset listening" with the port, the metrics port and the first worker's
// info. Its environment:
//   WORKER_SET_COUNT          workers (default 2)
//   WORKER_SET_PORT           the shared port (default 0)
//   WORKER_SET_METRICS_PORT   where the primary serves /metrics (unset: nowhere)
//   WORKER_SET_POLICY         a RestartPolicy as JSON (unset: lib/cluster.ts's own)
//   WORKER_SET_FOREIGN        "1": the primary also sends each worker messages that are not the
//                             cluster's own, and asks it for metrics before it serves
//   WORKER_SET_<id>           a Behaviour as JSON for the worker with that cluster id
//
// A worker answers GET / with {worker, pid, hups} (and counts it in
// http_requests_total), GET /slow/<ms> after <ms>, and GET /exit/<code> by
// exiting with <code> once its answer is out.
import cluster from 'node:cluster';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { runWorker, startWorkerSet, type WorkerService } from '../../lib/cluster.js';
import { listen, serverCloser } from '../../lib/listen.js';
import { logger } from '../../lib/log.js';
import { runService } from '../../lib/main.js';
import { ServiceMetrics } from '../../lib/metrics.js';

export interface Behaviour {
  /** Before the worker calls runWorker, so before it has any signal handler, ms. */
  loadMs?: number;
  /** Before it says it is prepared (waitForTurn), ms. */
  prepareMs?: number;
  /** Between its turn and listening, ms. */
  listenMs?: number;
  /** Sends the primary messages that are not the cluster's own while it starts. */
  foreign?: boolean;
  /** Asked for its metrics: fails, never answers, exits (code 3), or first sends a reply with neither snapshots nor error. */
  metrics?: 'error' | 'hang' | 'exit' | 'malformed';
  /** Its stop never ends, or fails. */
  close?: 'hang' | 'fail';
  /** false: the service sets no SIGHUP handler of its own (as login without ALLOWED_USERS). */
  hangups?: boolean;
}

const NAME = 'workerset';

/** Messages of no one's protocol, and one that looks like a metrics reply nobody asked for. */
const FOREIGN_MESSAGES: unknown[] = ['hello', 42, null, { cluster: 5 }, { other: 'x' }, { cluster: 'metrics', request: 123_456, snapshots: [] }];

class FailingMetrics extends ServiceMetrics {
  override snapshots(): Promise<never> {
    return Promise.reject(new Error('the snapshots broke'));
  }
}

class HangingMetrics extends ServiceMetrics {
  override snapshots(): Promise<never> {
    return new Promise(() => undefined);
  }
}

const log = logger(NAME);

async function workerService(id: number, b: Behaviour, waitForTurn: () => Promise<void>): Promise<WorkerService> {
  let hups = 0;
  if (b.hangups !== false) {
    process.on('SIGHUP', () => {
      hups++;
      log.info({ hups }, `${NAME} worker hangup`);
    });
  }
  const metrics = b.metrics === 'error' ? new FailingMetrics(NAME) : b.metrics === 'hang' ? new HangingMetrics(NAME) : new ServiceMetrics(NAME);
  process.on('message', (m: { cluster?: string; request?: number }) => {
    if (m?.cluster !== 'metrics') return;
    if (b.metrics === 'exit') process.exit(3);
    if (b.metrics === 'malformed') process.send!({ cluster: 'metrics', request: m.request });
  });
  if (b.foreign) for (const m of FOREIGN_MESSAGES) process.send!(m);
  await sleep(b.prepareMs ?? 0);
  log.info(`${NAME} worker prepared`);
  await waitForTurn();
  await sleep(b.listenMs ?? 0);

  const server = http.createServer((req, res) => {
    req.resume();
    const [, what, arg] = (req.url ?? '/').split('/');
    const answer = (body: unknown) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (what === 'slow') {
      log.info(`${NAME} worker answering slowly`);
      return void setTimeout(() => answer({ worker: id }), Number(arg));
    }
    if (what === 'exit') {
      res.once('finish', () => process.exit(Number(arg)));
      return answer({ worker: id, exiting: Number(arg) });
    }
    metrics.observeRequest({ route: '/', method: 'GET', status: 200, statusString: 'ok', seconds: 0 });
    answer({ worker: id, pid: process.pid, hups });
  });
  const closeServer = serverCloser(server);
  const port = await listen(server, Number(process.env.WORKER_SET_PORT ?? 0), '127.0.0.1');
  log.info({ port }, `${NAME} worker listening`);
  return {
    port,
    info: { worker: id },
    metrics,
    close: async (graceMs) => {
      if (b.close === 'hang') return new Promise<never>(() => undefined);
      await closeServer(graceMs);
      if (b.close === 'fail') throw new Error('this worker cannot stop');
    },
  };
}

if (cluster.isWorker) {
  const id = cluster.worker!.id;
  const b = JSON.parse(process.env[`WORKER_SET_${id}`] ?? '{}') as Behaviour;
  log.info({ ppid: process.ppid }, `${NAME} worker loading`);
  await sleep(b.loadMs ?? 0);
  runWorker(NAME, (waitForTurn) => workerService(id, b, waitForTurn));
} else {
  if (process.env.WORKER_SET_FOREIGN === '1') {
    cluster.on('message', (worker, m: { cluster?: unknown; request?: number }) => {
      if (m?.cluster === 'prepared') {
        for (const f of FOREIGN_MESSAGES) worker.send(f as object);
        worker.send({ cluster: 'metrics', request: -1 });
      }
      if (m?.cluster === 'metrics' && m.request === -1) log.info({ worker: worker.id, message: m }, `${NAME} primary heard`);
    });
  }
  runService(
    NAME,
    async () => {
      const metricsPort = process.env.WORKER_SET_METRICS_PORT;
      const set = await startWorkerSet({
        name: NAME,
        count: Number(process.env.WORKER_SET_COUNT ?? 2),
        metrics: metricsPort === undefined ? undefined : { port: Number(metricsPort), host: '127.0.0.1' },
        policy: process.env.WORKER_SET_POLICY ? JSON.parse(process.env.WORKER_SET_POLICY) : undefined,
      });
      return { close: set.close, listening: { port: set.port, metricsPort: set.metricsPort, info: set.info } };
    },
    (running) => running.listening,
  );
}
