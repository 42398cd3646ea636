// What a Bearer login costs at the least, beside what ours costs: four servers
// under the same fresh RS256 access tokens, in alternating windows, each one
// process on node's production flags for login:
//   - bare Koa: a hello-world JSON answer (bench/bare-koa.ts), the frame alone;
//   - the floor: Koa and @koa/router doing only what no Bearer login can skip
//     (bench/floor-login.ts): the RS256 check, the token's HMACs and HKDF, the answer;
//   - the floor with the hop to the directory the gRPC split costs (login's own
//     LoginStream client, the same directory as login's);
//   - login as deployed for one process, with its directory (SQLite).
// The gap between the floor and login is everything else login does: the
// checks the floor leaves out, the directory hop, the access line, metrics.
//
//   npx tsx bench/floor.ts [--seconds 5] [--rounds 5] [--users 1000] [--profile]
// --profile: the floor with the hop and login run under --cpu-prof, and their main threads'
// self time per request is printed by area, side by side, largest difference first.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildServices } from './build.js';
import { closedLoopWindow, startLoginStack } from './login.js';
import { median, PRODUCTION_NODE_ARGS, startService, stopAll, type Service } from './proc.js';
import { selfMicrosByArea, type CpuProfile } from './profile.js';

interface Window {
  requestsPerSecond: number;
  requests: number;
  /** CPU µs per request, by process. */
  cpuUs: Record<string, number>;
}

/** One closed-loop window of fresh Bearer requests against `url`, CPU counted for `services`. */
async function window(url: string, services: Service[], requestsFile: string, seconds: number, reuse: boolean): Promise<Window> {
  const w = await closedLoopWindow(url, services, requestsFile, seconds, { what: 'access tokens', reuse });
  return { requestsPerSecond: w.requestsPerSecond, requests: w.requests, cpuUs: Object.fromEntries(services.map((s) => [s.name, w.cpuMsPerRequest[s.name] * 1000])) };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { seconds: { type: 'string', default: '5' }, rounds: { type: 'string', default: '5' }, users: { type: 'string', default: '1000' }, profile: { type: 'boolean', default: false } },
  });
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  buildServices();
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-floor-'));
  const profileDir = path.join(dir, 'profiles');
  const profiled = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  const stack = await startLoginStack(`sqlite:${path.join(dir, 'floor.db')}`, { users: Number(values.users), bearer: true, loginNodeArgs: profiled });
  const others: Service[] = [];
  const served: Record<string, number> = {};
  let hopPid = 0;
  try {
    const keys = stack.bearerKeys!;
    const nodeArgs = [...PRODUCTION_NODE_ARGS.login];
    const env = { FLOOR_JWK: JSON.stringify(keys.publicJwk), METRICS_HASH_SECRET: keys.metricsHashSecret };
    const floor = await startService('floor', 'bench/floor-login.ts', env, /listening/, { nodeArgs });
    others.push(floor);
    const hop = await startService('floor + hop', 'bench/floor-login.ts', { ...env, FLOOR_DIRECTORY_ADDR: `127.0.0.1:${stack.directory.port}` }, /listening/, {
      nodeArgs: [...nodeArgs, ...profiled],
    });
    others.push(hop);
    hopPid = hop.child.pid!;
    const bare = await startService('bare koa', 'bench/bare-koa.ts', {}, /listening/, { nodeArgs });
    others.push(bare);
    // Bare Koa reads no credential: one pool, presented again and again.
    const barePool = await stack.freshBearerRequests!(20_000);
    const targets: Array<[string, string, Service[]]> = [
      ['bare Koa', `http://127.0.0.1:${bare.port}`, [bare]],
      ['floor', `http://127.0.0.1:${floor.port}`, [floor]],
      ['floor + hop', `http://127.0.0.1:${hop.port}`, [hop, stack.directory]],
      ['login', stack.url, [stack.login, stack.directory]],
    ];
    const rates: Record<string, number> = {};
    const results: Record<string, Window[]> = {};
    // The profiles count from here: not the start-up nor the first logins of the users.
    const measuredFrom = Number(process.hrtime.bigint() / 1000n);
    // A warm-up window each, which also sizes the pools: twice the rate seen, at least 8000/s.
    for (let i = -1; i < rounds; i++) {
      for (const [name, url, services] of i % 2 === 0 ? targets : [...targets].reverse()) {
        const s = i < 0 ? 2 : seconds;
        const reuse = name === 'bare Koa';
        const file = reuse ? barePool : await stack.freshBearerRequests!(Math.ceil(Math.max(rates[name] ?? 0, 8000) * 2 * s));
        const w = await window(url, services, file, s, reuse);
        rates[name] = w.requestsPerSecond;
        served[name] = (served[name] ?? 0) + w.requests;
        if (i >= 0) (results[name] ??= []).push(w);
      }
    }
    const rows = Object.fromEntries(
      Object.entries(results).map(([name, ws]) => {
        const cpu = Object.keys(ws[0].cpuUs).map((p) => `${p} ${Math.round(median(ws.map((w) => w.cpuUs[p])))}`);
        const total = Math.round(median(ws.map((w) => Object.values(w.cpuUs).reduce((a, b) => a + b, 0))));
        return [name, { 'req/s (median)': Math.round(median(ws.map((w) => w.requestsPerSecond))), 'CPU µs per request, all its processes': total, 'by process': cpu.join(', ') }];
      }),
    );
    console.table(rows);
    // The profiles are written when the processes exit.
    const loginPid = stack.login.child.pid!;
    await stopAll(others);
    await stack.close();
    if (values.profile) printProfiles(profileDir, measuredFrom, [['floor + hop', hopPid, served['floor + hop']], ['login', loginPid, served.login]]);
  } finally {
    await stopAll(others);
    await stack.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Main-thread self time per request by area from `from` on, for each [name, pid, requests served], largest difference first. */
function printProfiles(dir: string, from: number, targets: Array<[string, number, number]>): void {
  const perRequest = targets.map(([name, pid, requests]) => {
    // CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile; thread 0 is the main thread.
    const file = readdirSync(dir).find((f) => f.includes(`.${pid}.0.`) && f.endsWith('.cpuprofile'));
    if (!file) throw new Error(`no main-thread profile of ${name} (pid ${pid}) in ${dir}`);
    const micros = selfMicrosByArea(JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as CpuProfile, from);
    return new Map([...micros].map(([a, us]) => [a, us / requests]));
  });
  const areas = [...new Set(perRequest.flatMap((m) => [...m.keys()]))];
  const at = (i: number, a: string) => perRequest[i].get(a) ?? 0;
  const sum = (i: number) => [...perRequest[i].values()].reduce((x, y) => x + y, 0);
  const rows = areas
    .map((a) => ({ area: a, [`${targets[0][0]} µs`]: at(0, a).toFixed(2), [`${targets[1][0]} µs`]: at(1, a).toFixed(2), difference: at(1, a) - at(0, a) }))
    .sort((x, y) => y.difference - x.difference)
    .slice(0, 20)
    .map((r) => ({ ...r, difference: r.difference.toFixed(2) }));
  console.log(`main thread busy per request in the windows: ${targets[0][0]} ${sum(0).toFixed(1)} µs, ${targets[1][0]} ${sum(1).toFixed(1)} µs`);
  console.table(rows);
}

await main();
