// Growth: does a bigger store make requests slower? Login latency with 1k vs
// 1M users in the SQLite users store, allocation latency with 10 vs 10k nodes.
// Both sizes run side by side and are measured in alternating rounds, so a
// change in the machine's load hits both alike; each figure is the median of
// the rounds' medians.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEFAULTS } from '../lib/config.js';
import { call, grpcClient } from '../lib/grpc.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { SqliteUserStore } from '../services/directory/store-sqlite.js';
import { addNode } from '../services/nodeassign/service.js';
import { SqliteNodeStore } from '../services/nodeassign/store-sqlite.js';
import { APP, NODE_URL } from './fixtures.js';
import type { BenchResult, BenchRow } from './gateway.js';
import { RSS_TARGET_MB, startLoginStack, type LoginStack } from './login.js';
import { BENCH_AUTH, median, runLoad, startNodeAssign, type Service } from './proc.js';

const GROWTH_TOLERANCE = 0.2;
const ROUNDS = 3;

const round = (n: number, digits = 3) => Math.round(n * 10 ** digits) / 10 ** digits;

function withinTolerance(small: number, large: number): boolean {
  return Math.abs(large / small - 1) <= GROWTH_TOLERANCE;
}

/**
 * Fills a SQLite users store with `count` users (uids 1..count, all on
 * NODE_URL, in the uid index as an insert puts them) in one bulk INSERT …
 * SELECT, then reads one back through the store API, so a schema change
 * fails here rather than measuring garbage.
 */
export async function fillUsers(file: string, count: number): Promise<number> {
  await (SqliteUserStore.open(file)).close();
  const started = performance.now();
  const db = new Database(file);
  try {
    db.exec(`
      WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ${count})
      INSERT INTO dir_users (service, email, uid, node, generation, client_state, seen_client_states, replaced, created_at, version)
      SELECT '${APP}', printf('fill%08d@users.fill.example', i), i, '${NODE_URL}', 0, '', '[]', '[]', ${Date.now()}, 1 FROM seq;
      INSERT INTO dir_uids (uid, service, email) SELECT uid, service, email FROM dir_users;
      UPDATE dir_counters SET value = ${count} WHERE name = 'uid';`);
  } finally {
    db.close();
  }
  const ms = performance.now() - started;
  const store = SqliteUserStore.open(file);
  try {
    const probe = await store.get(APP, `fill${String(count).padStart(8, '0')}@users.fill.example`);
    if (probe?.uid !== count || probe.node !== NODE_URL) throw new Error('the filled users do not read back through the store API');
  } finally {
    await store.close();
  }
  return ms;
}

/** `count` nodes through the nodeassign rules (addNode) straight on the store. */
async function fillNodes(file: string, count: number): Promise<void> {
  const store = SqliteNodeStore.open(file);
  try {
    for (let i = 0; i < count; i++) {
      await addNode(store, { service: APP, url: `http://node-${String(i).padStart(5, '0')}.bench.example`, capacity: 1_000_000 }, DEFAULTS.RELEASE_RATE);
    }
  } finally {
    await store.close();
  }
}

async function loginGrowth(o: { smallUsers: number; largeUsers: number; requestsPerRound: number }): Promise<BenchRow[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-growth-users-'));
  const stacks: LoginStack[] = [];
  try {
    const largeFile = path.join(dir, 'large.db');
    const fillMs = await fillUsers(largeFile, o.largeUsers);
    // Both stores hold the same measured users, created by their first login.
    stacks.push(await startLoginStack(`sqlite:${path.join(dir, 'small.db')}`, { users: o.smallUsers }));
    stacks.push(await startLoginStack(`sqlite:${largeFile}`, { users: o.smallUsers }));
    const p50s: number[][] = [[], []];
    const p99s: number[][] = [[], []];
    for (let r = 0; r < ROUNDS; r++) {
      for (const [i, s] of stacks.entries()) {
        const res = await runLoad({ mode: 'probe', url: s.url, requestsFile: s.freshRequests(o.requestsPerRound), count: o.requestsPerRound, concurrency: 4 });
        if (res.statuses['200'] !== res.total || res.errors) throw new Error(`growth login: ${JSON.stringify(res.statuses)}, ${res.errors} errors`);
        p50s[i].push(res.latencyP50);
        p99s[i].push(res.latencyP99);
      }
    }
    const [small, large] = p50s.map(median);
    return [
      { metric: `fill ${o.largeUsers} users (bulk SQL) ms`, value: Math.round(fillMs), target: '< 60000', pass: fillMs < 60_000 },
      {
        metric: `login p50 ms, ${o.largeUsers} users (vs ${o.smallUsers})`,
        value: round(large),
        baseline: round(small),
        ratio: round(large / small),
        target: `within ±${GROWTH_TOLERANCE * 100}%`,
        pass: withinTolerance(small, large),
      },
      { metric: `login p99 ms, ${o.largeUsers} users (vs ${o.smallUsers})`, value: round(median(p99s[1])), baseline: round(median(p99s[0])) },
    ];
  } finally {
    for (const s of stacks) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Sequential Allocate calls over gRPC from this process; latencies in ms. */
async function allocations(port: number, count: number): Promise<number[]> {
  const client = grpcClient(NodeAssignClient, `127.0.0.1:${port}`, BENCH_AUTH);
  try {
    const out: number[] = [];
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      await call(client, client.allocate, { service: APP }, { deadlineMs: 5000, retryAfter: 1 });
      out.push(performance.now() - t0);
    }
    return out;
  } finally {
    client.close();
  }
}

async function allocationGrowth(o: { smallNodes: number; largeNodes: number; callsPerRound: number }): Promise<BenchRow[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-growth-nodes-'));
  const services: Service[] = [];
  try {
    const sizes = [o.smallNodes, o.largeNodes];
    for (const n of sizes) {
      const file = path.join(dir, `nodes-${n}.db`);
      await fillNodes(file, n);
      services.push(await startNodeAssign(`sqlite:${file}`));
    }
    await Promise.all(services.map((s) => allocations(s.port, 100)));
    for (const s of services) s.resetPeak();
    const p50s: number[][] = [[], []];
    const p99s: number[][] = [[], []];
    for (let r = 0; r < ROUNDS; r++) {
      for (const [i, s] of services.entries()) {
        const lat = (await allocations(s.port, o.callsPerRound)).sort((a, b) => a - b);
        p50s[i].push(lat[Math.floor(lat.length / 2)]);
        p99s[i].push(lat[Math.ceil(lat.length * 0.99) - 1]);
      }
    }
    const [small, large] = p50s.map(median);
    const rss = services[1].peakRssMb();
    return [
      {
        metric: `allocate p50 ms, ${o.largeNodes} nodes (vs ${o.smallNodes})`,
        value: round(large),
        baseline: round(small),
        ratio: round(large / small),
        target: `within ±${GROWTH_TOLERANCE * 100}%`,
        pass: withinTolerance(small, large),
      },
      { metric: `allocate p99 ms, ${o.largeNodes} nodes (vs ${o.smallNodes})`, value: round(median(p99s[1])), baseline: round(median(p99s[0])) },
      { metric: `nodeassign peak RSS MB allocating over ${o.largeNodes} nodes`, value: round(rss, 1), target: `< ${RSS_TARGET_MB}`, pass: rss < RSS_TARGET_MB },
    ];
  } finally {
    await Promise.all(services.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchGrowth(o: { quick: boolean }): Promise<BenchResult> {
  const users = await loginGrowth({ smallUsers: 1000, largeUsers: o.quick ? 100_000 : 1_000_000, requestsPerRound: o.quick ? 600 : 2000 });
  const nodes = await allocationGrowth({ smallNodes: 10, largeNodes: 10_000, callsPerRound: o.quick ? 300 : 1000 });
  return { name: 'growth', rows: [...users, ...nodes] };
}
