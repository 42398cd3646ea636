// Profiles the login service under load with node's built-in --cpu-prof and
// prints where its CPU time goes: by function (self time) and by package or
// file. The .cpuprofile is kept for Chrome DevTools / speedscope.
//
//   npx tsx bench/profile.ts [seconds] [assertion|bearer]
// bearer: fresh RS256 access tokens (bench/fixtures.ts bearerFixture) instead of assertions. Only the
// main thread is sampled: signature checks in libuv's thread pool do not appear.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BenchResult } from './gateway.js';
import { CONNECTIONS, startLoginStack } from './login.js';
import { buildServices, ROOT } from './build.js';
import { runLoad } from './proc.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  /** µs between one sample and the one before it (the first: since startTime). */
  timeDeltas?: number[];
}

export interface Hotspot {
  name: string;
  selfPercent: number;
}

/** Where a frame's code lives: a package, node itself, or a file of ours. */
export function area(url: string): string {
  if (url === '') return '(native / idle / gc)';
  if (url.startsWith('node:')) return url;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  const own = url.replace(/^file:\/\//, '').replace(ROOT, '');
  return own;
}

/** A sample's area: the collector apart, else area() of its frame's URL. */
function sampleArea(functionName: string, url: string): string {
  return functionName === '(garbage collector)' ? '(garbage collector)' : area(url);
}

/**
 * Self time per function and per area, as % of samples, largest first (idle
 * excluded); with `lastSeconds`, only the samples of the profile's last
 * seconds (the measured window, not the start-up and first logins before it).
 */
export function hotspots(profile: CpuProfile, top = 15, lastSeconds = Infinity): { functions: Hotspot[]; areas: Hotspot[]; idlePercent: number } {
  const counts = new Map<number, number>();
  const from = profile.endTime - lastSeconds * 1e6;
  let t = profile.startTime;
  let total = 0;
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas?.[i] ?? 0;
    if (t < from) return;
    counts.set(id, (counts.get(id) ?? 0) + 1);
    total++;
  });
  const byFunction = new Map<string, number>();
  const byArea = new Map<string, number>();
  let idle = 0;
  for (const node of profile.nodes) {
    const n = counts.get(node.id) ?? 0;
    if (n === 0) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') {
      idle += n;
      continue;
    }
    const fn = `${functionName || '(anonymous)'} ${url ? `${area(url)}:${lineNumber + 1}` : ''}`.trim();
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + n);
    const a = sampleArea(functionName, url);
    byArea.set(a, (byArea.get(a) ?? 0) + n);
  }
  const busy = total - idle;
  const ranked = (m: Map<string, number>) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, n]) => ({ name, selfPercent: Math.round((1000 * n) / busy) / 10 }));
  return { functions: ranked(byFunction), areas: ranked(byArea), idlePercent: Math.round((1000 * idle) / total) / 10 };
}

/**
 * Self time per area in µs, idle excluded: each area's samples times the
 * profile's mean sampling interval (as hotspots() counts them). With `from`,
 * only the samples taken at or after it (µs on the profile's clock, which is
 * CLOCK_MONOTONIC, process.hrtime's in any process of the machine).
 */
export function selfMicrosByArea(profile: CpuProfile, from = -Infinity): Map<string, number> {
  const interval = profile.samples.length === 0 ? 0 : (profile.endTime - profile.startTime) / profile.samples.length;
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const out = new Map<string, number>();
  let t = profile.startTime;
  for (const [i, id] of profile.samples.entries()) {
    t += profile.timeDeltas?.[i] ?? 0;
    if (t < from) continue;
    const { functionName, url } = nodes.get(id)!.callFrame;
    if (functionName === '(idle)') continue;
    const a = sampleArea(functionName, url);
    out.set(a, (out.get(a) ?? 0) + interval);
  }
  return out;
}

export async function profileLogin(o: {
  storeUrl: string;
  seconds: number;
  users: number;
  outDir: string;
  bearer?: boolean;
}): Promise<BenchResult & { functions: Hotspot[]; areas: Hotspot[] }> {
  mkdirSync(o.outDir, { recursive: true });
  const before = new Set(readdirSync(o.outDir));
  const stack = await startLoginStack(o.storeUrl, { users: o.users, loginNodeArgs: ['--cpu-prof', `--cpu-prof-dir=${o.outDir}`], bearer: o.bearer });
  let load;
  const started = performance.now();
  try {
    // Fresh credentials for up to ~6000 logins/s over the window (Bearer's cost ~1 ms each to sign: 3000/s).
    const requestsFile = o.bearer ? await stack.freshBearerRequests!(3000 * o.seconds) : stack.freshRequests(6000 * o.seconds);
    load = await runLoad({ mode: 'autocannon', url: stack.url, requestsFile, connections: CONNECTIONS, durationSeconds: o.seconds });
  } finally {
    // The profile is written when the login process exits cleanly (SIGTERM → close → exit).
    await stack.close();
  }
  // CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile: thread 0 is the main thread (1 is tsx's loader).
  const file = readdirSync(o.outDir).find((f) => /\.0\.\d+\.cpuprofile$/.test(f) && !before.has(f));
  if (!file) throw new Error(`no .cpuprofile appeared in ${o.outDir}`);
  // The samples from the load's start to login's exit: not its start-up nor the users' first logins.
  const window = (performance.now() - started) / 1000;
  const { functions, areas, idlePercent } = hotspots(JSON.parse(readFileSync(path.join(o.outDir, file), 'utf8')) as CpuProfile, 15, window);
  return {
    name: 'profile',
    rows: [
      { metric: `login req/s while profiled (${path.relative(ROOT, path.join(o.outDir, file))})`, value: Math.round(load.requestsPerSecond) },
      { metric: 'login idle % of samples', value: idlePercent },
      ...areas.map((a) => ({ metric: `area: ${a.name} (self % of busy)`, value: a.selfPercent })),
      ...functions.map((f) => ({ metric: `fn: ${f.name} (self % of busy)`, value: f.selfPercent })),
    ],
    functions,
    areas,
  };
}

const isMain = process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname);
if (isMain) {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-profile-'));
  try {
    const scheme = process.argv[3] ?? 'assertion';
    if (scheme !== 'assertion' && scheme !== 'bearer') throw new Error(`the scheme must be assertion or bearer, got ${scheme}`);
    // Run by itself, it profiles the code as it is, not the last build another benchmark left.
    buildServices();
    const r = await profileLogin({
      storeUrl: `sqlite:${dir}/store.db`,
      seconds: Number(process.argv[2] ?? 8),
      users: 1000,
      outDir: path.join(ROOT, 'dist/bench-results/profiles'),
      bearer: scheme === 'bearer',
    });
    console.table(r.rows);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
