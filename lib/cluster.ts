// A service on every core (LOGIN_WORKERS): node:cluster workers sharing one
// port. The primary forks the workers and opens the port once every one of
// them is ready; it starts a worker that dies again (with a back-off, so a
// crash loop does not spin), serves /metrics for the whole set, passes SIGHUP
// on, and on stop lets every worker finish what it is answering. A worker runs
// the service as a single process would, without /metrics of its own.
//
// Connections are spread by the primary (node's round-robin scheduling, the
// default but on Windows): each worker gets the next new connection in turn,
// and a keep-alive connection stays with the worker that took it.
import cluster, { type Worker } from 'node:cluster';
import type { Env, MetricsListener } from './config.js';
import { logger, type Logger } from './log.js';
import { exitOnStartFailure } from './main.js';
import { serveMetrics, type RunningMetrics } from './metrics-server.js';
import { aggregatedPage, type MetricsPage, type MetricsSnapshot, type ServiceMetrics } from './metrics.js';

/** How long a stopping worker lets the requests it is answering finish before it cuts them, ms. */
export const DRAIN_MS = 5000;
/** How long the primary waits for a worker's metrics before the page fails (500: a scrape fails rather than shows a counter reset), ms. */
const METRICS_TIMEOUT_MS = 5000;

/** Restarts of a worker that died: the first soon, then doubling while the new ones die young. */
export interface RestartPolicy {
  firstDelayMs: number;
  maxDelayMs: number;
  /** A worker that lived this long was not in a crash loop: the next restart is soon again. */
  healthyAfterMs: number;
}

export const RESTART_POLICY: RestartPolicy = { firstDelayMs: 100, maxDelayMs: 10_000, healthyAfterMs: 10_000 };

/** How long to wait before starting a worker in place of one that lived `livedMs`; `lastDelayMs`: the wait before that one (none: it was started with the set). */
export function restartDelay(lastDelayMs: number | undefined, livedMs: number, policy: RestartPolicy = RESTART_POLICY): number {
  if (lastDelayMs === undefined || livedMs >= policy.healthyAfterMs) return policy.firstDelayMs;
  return Math.min(Math.max(lastDelayMs, policy.firstDelayMs) * 2, policy.maxDelayMs);
}

// ---- the messages (plain data over the IPC channel) ----

type ToWorker = { cluster: 'listen' } | { cluster: 'metrics'; request: number };
type FromWorker =
  | { cluster: 'prepared' }
  | { cluster: 'listening'; port: number; info?: unknown }
  | { cluster: 'metrics'; request: number; snapshots?: MetricsSnapshot[]; error?: string };

function isFromWorker(m: unknown): m is FromWorker {
  return typeof m === 'object' && m !== null && typeof (m as { cluster?: unknown }).cluster === 'string';
}

function send(worker: Worker, m: ToWorker): void {
  if (worker.isConnected()) worker.send(m);
}

// ---- the primary ----

export interface WorkerSetOptions {
  /** The service, e.g. "login": in log lines and errors. */
  name: string;
  count: number;
  /** Where the primary serves /metrics of all workers together, when set. */
  metrics?: MetricsListener;
  /** Added to every worker's environment. */
  env?: Env;
  policy?: RestartPolicy;
}

export interface RunningWorkerSet {
  port: number;
  /** What the first worker to listen said about itself (runWorker's `info`). */
  info: unknown;
  metricsPort?: number;
  close(): Promise<void>;
}

interface Slot {
  worker?: Worker;
  state: 'starting' | 'prepared' | 'listening' | 'gone';
  startedAt: number;
  lastDelayMs?: number;
  restart?: NodeJS.Timeout;
  /** A SIGHUP came before this worker listened (and so before it could handle one). */
  hangup: boolean;
}

/**
 * Forks `count` workers of this process's program (cluster.fork()) and
 * resolves once every one listens. A worker that exits before then fails the
 * start (the others are stopped): bad configuration and a port in use end the
 * service at start, as they do with one process.
 */
export function startWorkerSet(o: WorkerSetOptions): Promise<RunningWorkerSet> {
  const log = logger(o.name);
  const policy = o.policy ?? RESTART_POLICY;
  let phase: 'starting' | 'up' | 'stopping' = 'starting';
  let port = 0;
  let info: unknown;
  const slots: Slot[] = Array.from({ length: o.count }, () => ({ state: 'gone', startedAt: 0, hangup: false }));
  let allGone: (() => void) | undefined;
  let started: { resolve: () => void; reject: (err: Error) => void } | undefined;
  const asked = new Map<number, { worker: Worker; settle: (snapshots: MetricsSnapshot[] | Error) => void }>();
  let nextRequest = 0;

  const live = (): Worker[] => slots.flatMap((s) => (s.worker && s.state !== 'gone' ? [s.worker] : []));

  function fork(slot: Slot): void {
    slot.restart = undefined;
    const worker = cluster.fork(o.env);
    Object.assign(slot, { worker, state: 'starting', startedAt: Date.now(), hangup: false });
    worker.on('message', (m: unknown) => {
      if (isFromWorker(m)) heard(slot, worker, m);
    });
    worker.once('exit', (code, signal) => exited(slot, worker, code, signal));
  }

  function heard(slot: Slot, worker: Worker, m: FromWorker): void {
    if (m.cluster === 'metrics') {
      const waiting = asked.get(m.request);
      asked.delete(m.request);
      waiting?.settle(m.snapshots ?? new Error(m.error ?? 'no metrics'));
      return;
    }
    if (slot.worker !== worker || phase === 'stopping') return;
    if (m.cluster === 'prepared') {
      slot.state = 'prepared';
      // At start the port opens once every worker is ready; a worker started again joins at once.
      if (phase === 'up') send(worker, { cluster: 'listen' });
      else if (slots.every((s) => s.state === 'prepared')) for (const s of slots) send(s.worker!, { cluster: 'listen' });
      return;
    }
    slot.state = 'listening';
    if (slot.hangup) {
      slot.hangup = false;
      worker.process.kill('SIGHUP');
    }
    if (phase === 'up') {
      log.info({ worker: worker.id, workerPid: worker.process.pid }, `${o.name} worker ready`);
      return;
    }
    if (port === 0) ({ port, info } = m);
    if (slots.every((s) => s.state === 'listening')) started?.resolve();
  }

  function exited(slot: Slot, worker: Worker, code: number | null, signal: string | null): void {
    for (const [request, waiting] of asked) {
      // Its counts went with it: the page shows the workers alive.
      if (waiting.worker === worker) {
        asked.delete(request);
        waiting.settle([]);
      }
    }
    if (slot.worker !== worker) return;
    slot.state = 'gone';
    if (phase === 'stopping') {
      if (slots.every((s) => s.state === 'gone')) allGone?.();
      return;
    }
    if (phase === 'starting') {
      started?.reject(new Error(`${o.name} worker ${worker.id} exited (${signal ?? code}) before it was ready`));
      return;
    }
    const lived = Date.now() - slot.startedAt;
    const delay = restartDelay(slot.lastDelayMs, lived, policy);
    slot.lastDelayMs = delay;
    log.warn({ worker: worker.id, workerPid: worker.process.pid, code, signal, livedMs: lived, restartInMs: delay }, `${o.name} worker exited; starting another`);
    slot.restart = setTimeout(() => fork(slot), delay);
  }

  function ask(worker: Worker): Promise<MetricsSnapshot[]> {
    return new Promise((resolve, reject) => {
      const request = nextRequest++;
      const timer = setTimeout(() => {
        asked.delete(request);
        reject(new Error(`${o.name} worker ${worker.id} sent no metrics within ${METRICS_TIMEOUT_MS} ms`));
      }, METRICS_TIMEOUT_MS);
      asked.set(request, {
        worker,
        settle: (r) => {
          clearTimeout(timer);
          if (r instanceof Error) reject(r);
          else resolve(r);
        },
      });
      send(worker, { cluster: 'metrics', request });
    });
  }

  const metricsSource = {
    async page(): Promise<MetricsPage> {
      const answering = slots.flatMap((s) => (s.worker && s.state === 'listening' ? [s.worker] : []));
      const snapshots = await Promise.all(answering.map(ask));
      return aggregatedPage(snapshots.flat());
    },
  };

  const hangup = (): void => {
    for (const s of slots) {
      if (s.state === 'listening') s.worker!.process.kill('SIGHUP');
      else s.hangup = true;
    }
  };

  async function stopWorkers(): Promise<void> {
    phase = 'stopping';
    process.off('SIGHUP', hangup);
    for (const s of slots) clearTimeout(s.restart);
    const workers = live();
    if (workers.length > 0) {
      const gone = new Promise<void>((resolve) => (allGone = resolve));
      // A signal rather than a message: it also stops a worker whose program has not started to listen for messages.
      for (const w of workers) w.process.kill('SIGTERM');
      // A worker that neither drains nor exits in time is killed.
      const timer = setTimeout(() => {
        for (const w of live()) w.process.kill('SIGKILL');
      }, DRAIN_MS + 2000);
      await gone;
      clearTimeout(timer);
    }
  }

  return new Promise<RunningWorkerSet>((resolve, reject) => {
    // Before any worker exists: a SIGHUP then must not end the primary.
    process.on('SIGHUP', hangup);
    new Promise<void>((up, failed) => {
      started = { resolve: up, reject: failed };
      for (const slot of slots) fork(slot);
    }).then(
      async () => {
        started = undefined;
        phase = 'up';
        let exposed: RunningMetrics | undefined;
        try {
          exposed = o.metrics && (await serveMetrics(metricsSource, o.metrics, log));
        } catch (err) {
          await stopWorkers();
          return reject(err);
        }
        resolve({
          port,
          info,
          metricsPort: exposed?.port,
          close: async () => {
            await stopWorkers();
            await exposed?.close();
          },
        });
      },
      async (err: Error) => {
        started = undefined;
        await stopWorkers();
        reject(err);
      },
    );
  });
}

// ---- a worker ----

/** What a worker's service gives the primary. */
export interface WorkerService {
  port: number;
  /** Plain data the primary passes on (RunningWorkerSet.info). */
  info?: unknown;
  metrics: ServiceMetrics;
  /** Stops: stops accepting, lets what is being answered finish within `graceMs`. */
  close(graceMs: number): Promise<void>;
}

/**
 * In a cluster worker: starts the service with `waitForTurn` (which tells the
 * primary this worker is ready, and resolves when the primary says to listen),
 * answers the primary's metrics requests, and stops on SIGTERM (the primary
 * stopping, or an operator's) after draining. SIGINT (a Ctrl-C reaches the
 * whole process group) is the primary's to act on; SIGHUP never ends a worker.
 */
export function runWorker(name: string, start: (waitForTurn: () => Promise<void>) => Promise<WorkerService>): void {
  const log = logger(name);
  let running: WorkerService | undefined;
  let stopping = false;
  let turn: (() => void) | undefined;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    log.info({ graceMs: DRAIN_MS }, `${name} worker stopping`);
    (running?.close(DRAIN_MS) ?? Promise.resolve()).then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, `${name} worker did not stop cleanly`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => undefined);
  process.on('SIGHUP', () => undefined);
  // Not once: a stop that signals every process of the service (systemd's default) sends a worker
  // the operator's SIGTERM and the primary's; the second must not end the drain.
  process.on('SIGTERM', stop);
  process.on('message', (m: ToWorker) => {
    if (m?.cluster === 'listen') turn?.();
    else if (m?.cluster === 'metrics') {
      const reply = (r: Omit<Extract<FromWorker, { cluster: 'metrics' }>, 'cluster' | 'request'>) => process.send!({ cluster: 'metrics', request: m.request, ...r } satisfies FromWorker);
      if (!running) return reply({ error: 'not started' });
      running.metrics.snapshots().then(
        (snapshots) => reply({ snapshots }),
        (err: Error) => reply({ error: err.message }),
      );
    }
  });
  const waitForTurn = () =>
    new Promise<void>((resolve) => {
      turn = resolve;
      process.send!({ cluster: 'prepared' } satisfies FromWorker);
    });
  start(waitForTurn).then(
    (service) => {
      running = service;
      if (stopping) return void service.close(0).then(() => process.exit(0));
      process.send!({ cluster: 'listening', port: service.port, info: service.info } satisfies FromWorker);
    },
    (err: unknown) => exitOnStartFailure(name, err),
  );
}
