// lib/cluster.ts's primary and workers as real processes (tests/support/worker-set-program.ts),
// with workers told to start slowly, die, fail their metrics or their stop: what
// tests/login-workers.test.ts cannot make login's own workers do. Each test runs
// a worker set of its own; five run side by side, as most of their time is
// waiting (all fifteen at once start 45 processes, slow beside another test file).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DRAIN_MS, type RestartPolicy } from '../lib/cluster.js';
import { httpRequest } from '../services/login/testkit.js';
import { startProgramProcess, type LogLine, type ServiceProcess } from './support/login-process.js';
import { metricValue } from './support/prometheus.js';
import { isRunning } from './support/children.js';
import { eventually, freePort, serveTcp } from './support/services.js';
// Types alone: loading the program would run it.
import type { Behaviour } from './support/worker-set-program.js';

const PROGRAM = path.join(path.dirname(fileURLToPath(import.meta.url)), 'support', 'worker-set-program.ts');
const NAME = 'workerset';
const EXITED = `${NAME} worker exited; starting another`;
/** A worker that dies is started again only long after the test. */
const NO_RESTART_SOON: RestartPolicy = { firstDelayMs: 60_000, maxDelayMs: 60_000, healthyAfterMs: 60_000 };

interface SetOptions {
  count?: number;
  port?: number;
  metricsPort?: number;
  policy?: RestartPolicy;
  foreign?: boolean;
  workers?: Record<number, Behaviour>;
  onLine?: (line: LogLine) => void;
}

function startSet(o: SetOptions = {}): Promise<ServiceProcess> {
  const env: Record<string, string> = { WORKER_SET_COUNT: String(o.count ?? 2) };
  if (o.port !== undefined) env.WORKER_SET_PORT = String(o.port);
  if (o.metricsPort !== undefined) env.WORKER_SET_METRICS_PORT = String(o.metricsPort);
  if (o.policy) env.WORKER_SET_POLICY = JSON.stringify(o.policy);
  if (o.foreign) env.WORKER_SET_FOREIGN = '1';
  for (const [id, b] of Object.entries(o.workers ?? {})) env[`WORKER_SET_${id}`] = JSON.stringify(b);
  return startProgramProcess(PROGRAM, NAME, env, { onLine: o.onLine });
}

interface Answer {
  worker: number;
  pid: number;
  hups: number;
}

/** GET `path` on a connection of its own, so that the primary hands it to the next worker in turn. */
async function get(set: ServiceProcess, what = '/'): Promise<Answer> {
  const res = await httpRequest(`${set.url}${what}`, { headers: { Connection: 'close' } });
  assert.equal(res.status, 200, res.text);
  return JSON.parse(res.text) as Answer;
}

/** Requests (at most `tries`) until every worker in `ids` has answered one; the last answer of each. */
async function answersFrom(set: ServiceProcess, ids: number[], tries = 40): Promise<Map<number, Answer>> {
  const seen = new Map<number, Answer>();
  for (let i = 0; i < tries && !ids.every((id) => seen.has(id)); i++) {
    const a = await get(set);
    seen.set(a.worker, a);
  }
  assert.deepEqual([...seen.keys()].sort(), [...ids].sort(), 'the workers that answered');
  return seen;
}

async function metricsPage(set: ServiceProcess): Promise<{ status: number; text: string }> {
  return httpRequest(set.metricsUrl!, { timeoutMs: 15_000 });
}

const workerPids = (set: ServiceProcess): Map<number, number> =>
  new Map(set.lines.filter((l) => l.msg === `${NAME} worker listening`).map((l) => [l.worker!, l.pid]));

const exitWarnings = (set: ServiceProcess): LogLine[] => set.lines.filter((l) => l.msg === EXITED);

/** Stops the set (SIGTERM) and asserts the primary exits 0; how long it took, ms. */
async function stopCleanly(set: ServiceProcess): Promise<number> {
  const started = Date.now();
  const { code, signal, stderr } = await set.stop();
  assert.equal(code, 0, `the primary exits 0 (signal ${signal}); stderr: ${stderr}`);
  return Date.now() - started;
}

describe('a worker set (lib/cluster.ts) in processes of its own', { concurrency: 5 }, () => {
  test('the port opens once every worker is prepared; the start ends when every worker listens, with the first one’s info', async () => {
    const port = await freePort();
    let firstAnswerAt: number | undefined;
    let probing = true;
    // From the start: the first time anything answers on the port.
    const probe = (async () => {
      while (probing && firstAnswerAt === undefined) {
        try {
          await httpRequest(`http://127.0.0.1:${port}/`, { headers: { Connection: 'close' }, timeoutMs: 500 });
          firstAnswerAt = Date.now();
        } catch {
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    })();
    // Worker 2 prepares 1.5 s after worker 1; worker 1 listens first.
    const set = await startSet({ port, workers: { 2: { prepareMs: 1500, listenMs: 700 } } });
    try {
      // Fresh connections go to the workers in turn: both answer among the first few, well within
      // the 700 ms worker 2 would still be away had the start not waited for it to listen.
      await answersFrom(set, [1, 2], 4);
      const prepared = set.lines.find((l) => l.msg === `${NAME} worker prepared` && l.worker === 2)!;
      await probe;
      assert.ok(firstAnswerAt! >= Date.parse(prepared.time), `the first answer came ${Date.parse(prepared.time) - firstAnswerAt!} ms before worker 2 was prepared`);
      const listening = set.lines.find((l) => l.msg === `${NAME} listening`)!;
      assert.equal(listening.port, port);
      assert.deepEqual(listening.info, { worker: 1 }, 'the info of the first worker to listen');
      assert.deepEqual(exitWarnings(set), []);
      assert.equal(set.lines.filter((l) => l.msg === `${NAME} worker hangup`).length, 0, 'no SIGHUP was sent');
    } finally {
      probing = false;
      await probe;
      await stopCleanly(set);
    }
  });

  test('a worker that dies is started again after the first delay, and one that dies young again after twice that', async () => {
    const policy: RestartPolicy = { firstDelayMs: 300, maxDelayMs: 5000, healthyAfterMs: 60_000 };
    const set = await startSet({ policy });
    try {
      const pids = workerPids(set);
      const gone = await get(set, '/exit/7');
      const first = await set.waitFor((l) => l.msg === EXITED);
      assert.equal(first.level, 40, 'a warning');
      assert.equal(first.worker, gone.worker);
      assert.equal(first.workerPid, pids.get(gone.worker));
      assert.equal(first.code, 7);
      assert.equal(first.signal, null);
      assert.equal(first.restartInMs, policy.firstDelayMs, 'the policy given, not the default');
      assert.ok(first.livedMs >= 0 && first.livedMs < 60_000, `livedMs ${first.livedMs}`);
      const ready = await set.waitFor((l) => l.msg === `${NAME} worker ready`);
      assert.equal(ready.worker, 3, 'a new worker in its place');
      assert.ok(Date.parse(ready.time) - Date.parse(first.time) >= policy.firstDelayMs, 'not before the delay');
      const survivor = gone.worker === 1 ? 2 : 1;
      const now = await answersFrom(set, [survivor, 3]);
      assert.equal(now.get(3)!.pid, ready.workerPid);

      process.kill(ready.workerPid, 'SIGKILL');
      const second = await set.waitFor((l) => l.msg === EXITED && l.worker === 3);
      assert.equal(second.signal, 'SIGKILL');
      assert.equal(second.code, null);
      assert.equal(second.restartInMs, 2 * policy.firstDelayMs, 'it lived less than healthyAfterMs: twice the last delay');
      await set.waitFor((l) => l.msg === `${NAME} worker ready` && l.worker === 4);
      await answersFrom(set, [survivor, 4]);
      assert.equal(exitWarnings(set).length, 2);
    } finally {
      await stopCleanly(set);
    }
  });

  test('/metrics adds up the workers; one that exits while asked is left out, and one gone is not asked', async () => {
    // Worker 2 exits when asked for its metrics.
    const set = await startSet({ metricsPort: 0, policy: NO_RESTART_SOON, workers: { 2: { metrics: 'exit' } } });
    try {
      const counts = new Map<number, number>();
      for (let i = 0; i < 6 || counts.size < 2; i++) {
        const a = await get(set);
        counts.set(a.worker, (counts.get(a.worker) ?? 0) + 1);
      }
      const page = await metricsPage(set);
      assert.equal(page.status, 200, page.text);
      assert.equal(metricValue(page.text, 'http_requests_total', { service: NAME }), counts.get(1), 'worker 1’s requests alone');
      const warning = await set.waitFor((l) => l.msg === EXITED);
      assert.equal(warning.code, 3);
      // Worker 2 is gone: the page does not wait for it.
      const again = await metricsPage(set);
      assert.equal(again.status, 200, again.text);
      assert.equal(metricValue(again.text, 'http_requests_total', { service: NAME }), counts.get(1));
      // Its restart is pending: stopping does not wait for it, nor start it.
      await stopCleanly(set);
      assert.equal(set.lines.filter((l) => l.msg === `${NAME} worker ready`).length, 0);
    } finally {
      await set.stop();
    }
  });

  for (const [mode, says] of [
    ['error', 'the snapshots broke'],
    ['malformed', 'no metrics'],
    ['hang', `${NAME} worker 2 sent no metrics within 5000 ms`],
  ] as const) {
    test(`/metrics is 500 when a worker's metrics ${mode === 'error' ? 'fail' : mode === 'hang' ? 'never come' : 'come without snapshots'}, and logs why`, async () => {
      const set = await startSet({ metricsPort: 0, workers: { 2: { metrics: mode } } });
      try {
        await answersFrom(set, [1, 2]);
        const page = await metricsPage(set);
        assert.equal(page.status, 500);
        assert.equal(page.text, 'metrics unavailable\n');
        const failed = await set.waitFor((l) => l.msg === 'metrics page failed');
        assert.equal(failed.err.message, says);
        assert.deepEqual(exitWarnings(set), [], 'no worker was ended by it');
      } finally {
        await stopCleanly(set);
      }
    });
  }

  test('SIGHUP before the workers have signal handlers reaches each once it listens, and never ends one', async () => {
    let hungUp = false;
    const loading = new Set<number>();
    const set = await startSet({
      // Worker 2 sets no SIGHUP handler of its own: runWorker's keeps it alive.
      workers: { 1: { loadMs: 1500 }, 2: { loadMs: 1500, hangups: false } },
      onLine: (l) => {
        if (l.msg !== `${NAME} worker loading`) return;
        loading.add(l.worker!);
        if (loading.size === 2 && !hungUp) {
          hungUp = true;
          process.kill(l.ppid, 'SIGHUP');
        }
      },
    });
    try {
      assert.ok(hungUp);
      await set.waitFor((l) => l.msg === `${NAME} worker hangup`);
      const first = await answersFrom(set, [1, 2]);
      assert.equal(first.get(1)!.hups, 1, 'once, after it listened');
      set.signal('SIGHUP');
      await set.waitFor((l) => l.msg === `${NAME} worker hangup` && l.hups === 2);
      const second = await answersFrom(set, [1, 2]);
      assert.equal(second.get(1)!.hups, 2);
      assert.equal(second.get(2)!.pid, first.get(2)!.pid, 'worker 2 outlived both signals');
      assert.deepEqual(exitWarnings(set), []);
    } finally {
      await stopCleanly(set);
    }
  });

  test('SIGINT to a worker (a Ctrl-C reaches the whole group) leaves it serving: stopping is the primary’s', async () => {
    const set = await startSet({ workers: { 2: { hangups: false } } });
    try {
      const pid = workerPids(set).get(2)!;
      process.kill(pid, 'SIGINT');
      await new Promise((r) => setTimeout(r, 300));
      assert.equal((await answersFrom(set, [1, 2])).get(2)!.pid, pid);
      assert.deepEqual(exitWarnings(set), []);
    } finally {
      await stopCleanly(set);
    }
  });

  test('SIGTERM: an idle worker ends at once, a busy one once its answer is out (a second SIGTERM changes nothing), the primary after both', async () => {
    const set = await startSet();
    try {
      const pids = workerPids(set);
      const slow = httpRequest(`${set.url}/slow/1500`, { headers: { Connection: 'close' } });
      const busy = (await set.waitFor((l) => l.msg === `${NAME} worker answering slowly`)).worker!;
      set.signal('SIGTERM');
      await set.waitFor((l) => l.msg === `${NAME} worker stopping` && l.worker === busy);
      process.kill(pids.get(busy)!, 'SIGTERM');
      const res = await slow;
      assert.equal(res.status, 200, res.text);
      assert.equal(res.header('connection'), 'close');
      const { code } = await set.exited;
      assert.equal(code, 0);
      assert.ok(![...pids.values()].some(isRunning), 'no worker outlives the primary');
      assert.equal(set.lines.filter((l) => l.msg === `${NAME} worker stopping` && l.worker === busy).length, 1, 'one stop');
      assert.equal(set.lines.find((l) => l.msg === `${NAME} worker stopping`)!.graceMs, DRAIN_MS);
      assert.deepEqual(exitWarnings(set), []);
    } finally {
      await set.stop();
    }
  });

  test('a worker whose stop fails says so and exits; the primary still stops, at once', async () => {
    const set = await startSet({ workers: { 2: { close: 'fail' } } });
    const took = await stopCleanly(set);
    const failed = set.lines.find((l) => l.msg === `${NAME} worker did not stop cleanly`);
    assert.equal(failed?.err.message, 'this worker cannot stop');
    assert.equal(failed?.worker, 2);
    assert.equal(failed?.pid, workerPids(set).get(2));
    assert.ok(took < DRAIN_MS, `the stop took ${took} ms`);
  });

  test(`a worker whose stop never ends is killed ${DRAIN_MS} + 2000 ms after the SIGTERM; the primary then exits 0`, async () => {
    const set = await startSet({ workers: { 2: { close: 'hang' } } });
    const pid = workerPids(set).get(2)!;
    const took = await stopCleanly(set);
    assert.ok(took >= DRAIN_MS + 2000 - 200 && took < DRAIN_MS + 6000, `the stop took ${took} ms`);
    assert.equal(isRunning(pid), false);
  });

  test('with its only worker gone and not yet started again, the primary stops at once', async () => {
    const set = await startSet({ count: 1, policy: NO_RESTART_SOON });
    await get(set, '/exit/0');
    await set.waitFor((l) => l.msg === EXITED);
    const took = await stopCleanly(set);
    assert.ok(took < DRAIN_MS, `the stop took ${took} ms`);
  });

  test('a worker stopped while it starts fails the start: the primary names it and its exit, stops the other and exits 1', async () => {
    const pids = new Map<number, number>();
    const start = startSet({
      workers: { 2: { prepareMs: 3000 } },
      onLine: (l) => void (l.msg === `${NAME} worker loading` && pids.set(l.worker!, l.pid)),
    });
    await eventually('both workers loading', () => pids.size === 2);
    // Once runWorker has its SIGTERM handler: worker 2 is then in its 3 s of preparing.
    await new Promise((r) => setTimeout(r, 500));
    process.kill(pids.get(2)!, 'SIGTERM');
    // The start's failure is logged, and printed before the exit 1 (lib/main.ts's exitOnStartFailure).
    await assert.rejects(start, /workerset exited; stderr: workerset failed to start: workerset worker 2 exited \(0\) before it was ready/);
    assert.equal(isRunning(pids.get(1)!), false, 'the other worker was stopped');
  });

  test('SIGTERM to the primary while its workers start: no worker outlives it', async () => {
    const pids: number[] = [];
    let primary: number | undefined;
    const start = startSet({
      workers: { 1: { prepareMs: 3000 }, 2: { prepareMs: 3000 } },
      onLine: (l) => {
        if (l.msg !== `${NAME} worker loading`) return;
        pids.push(l.pid);
        primary = l.ppid;
      },
    });
    await eventually('both workers loading', () => pids.length === 2);
    process.kill(primary!, 'SIGTERM');
    await assert.rejects(start, /workerset exited/);
    await eventually('both workers gone', () => !pids.some(isRunning), { timeoutMs: 5000 });
  });

  test('a metrics port that is taken fails the start: the workers are stopped, the primary exits 1 and says why', async () => {
    const taken = await serveTcp((client) => client.destroy());
    const pids: number[] = [];
    try {
      const start = startSet({ metricsPort: taken.port, onLine: (l) => void (l.msg === `${NAME} worker listening` && pids.push(l.pid)) });
      await assert.rejects(start, /workerset failed to start: listen EADDRINUSE/);
      assert.equal(pids.length, 2, 'both workers had listened');
      assert.ok(!pids.some(isRunning), 'no worker outlives the primary');
    } finally {
      await taken.close();
    }
  });

  test('messages that are not the cluster’s own are left alone, both ways; a worker asked for metrics before it serves says so', async () => {
    const port = await freePort();
    const set = await startSet({ port, foreign: true, workers: { 1: { foreign: true, listenMs: 300 }, 2: { foreign: true, listenMs: 300 } } });
    try {
      assert.equal(set.lines.find((l) => l.msg === `${NAME} listening`)!.port, port);
      await answersFrom(set, [1, 2]);
      for (const worker of [1, 2]) {
        const heard = await set.waitFor((l) => l.msg === `${NAME} primary heard` && l.worker === worker);
        assert.deepEqual(heard.message, { cluster: 'metrics', request: -1, error: 'not started' });
      }
      assert.deepEqual(exitWarnings(set), []);
    } finally {
      await stopCleanly(set);
    }
  });
});
