// What login allocates per login and what collecting it costs, and where the
// allocations come from. One login process (LOGIN_WORKERS=1) under fresh-credential
// logins, measured over one window after a warm-up:
//  - V8's --trace-gc-nvp lines of the window: bytes allocated between collections,
//    bytes promoted to the old generation, the number and pause time of scavenges
//    and of mark-compacts;
//  - V8's sampling heap profiler over the same window, with the objects later
//    collected kept in the samples (an allocation rate, not what stays live), started
//    and stopped by SIGUSR2 through an inspector session the login process opens on
//    itself. Its bytes per login are a sample's estimate; the trace's are counted.
// The profiler and the trace lines cost login CPU of their own: read the CPU
// figures in bench/ab.ts, not here.
//
//   npx tsx bench/alloc.ts [bearer|assertion] [seconds]
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BUILD_DIR, buildServices } from './build.js';
import { schemeRound, startLoginStack, type Scheme } from './login.js';
import { area } from './profile.js';

export interface GcTotals {
  /** Bytes allocated between the first and the last collection of the text. */
  allocatedBytes: number;
  promotedBytes: number;
  /** Per kind of collection (`s`: scavenge, `mc`: mark-compact, …): how many, and their pauses in ms. */
  byKind: Record<string, { count: number; pauseMs: number }>;
}

/**
 * Sums --trace-gc-nvp lines. A line's `total_size_before` less the previous
 * line's `total_size_after` is what was allocated in between; lines that are
 * not collections are skipped.
 */
export function gcTotals(text: string): GcTotals {
  const out: GcTotals = { allocatedBytes: 0, promotedBytes: 0, byKind: {} };
  let lastAfter: number | undefined;
  for (const line of text.split('\n')) {
    const fields = new Map([...line.matchAll(/ ([a-z_.]+)=(\S+)/g)].map((m) => [m[1], m[2]]));
    const kind = fields.get('gc');
    const before = Number(fields.get('total_size_before'));
    const after = Number(fields.get('total_size_after'));
    if (kind === undefined || !Number.isFinite(before) || !Number.isFinite(after)) continue;
    if (lastAfter !== undefined) out.allocatedBytes += Math.max(0, before - lastAfter);
    lastAfter = after;
    out.promotedBytes += Number(fields.get('promoted') ?? 0) || 0;
    const k = (out.byKind[kind] ??= { count: 0, pauseMs: 0 });
    k.count++;
    k.pauseMs += Number(fields.get('pause') ?? 0) || 0;
  }
  return out;
}

interface SamplingNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SamplingNode[];
}

export interface AllocationSite {
  name: string;
  bytes: number;
}

/** Our own code: the services' and lib's built files, not a package's. */
const isOwn = (url: string) => !url.includes('node_modules') && /\/(services|lib)\//.test(url);

/**
 * A sampling heap profile's bytes by area (a package, node itself, or a file
 * of ours: bench/profile.ts area) of the allocating frame, and by the nearest
 * frame of our own code on its stack, largest first.
 */
export function allocationSites(head: SamplingNode, top = 15): { total: number; byArea: AllocationSite[]; byOwnFrame: AllocationSite[] } {
  const byArea = new Map<string, number>();
  const byOwn = new Map<string, number>();
  let total = 0;
  const walk = (node: SamplingNode, ownFrame: string | undefined) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const own = isOwn(url) ? `${functionName || '(anonymous)'} ${area(url)}:${lineNumber + 1}` : ownFrame;
    if (node.selfSize > 0) {
      total += node.selfSize;
      const a = area(url);
      byArea.set(a, (byArea.get(a) ?? 0) + node.selfSize);
      const o = own ?? '(no frame of ours)';
      byOwn.set(o, (byOwn.get(o) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child, own);
  };
  walk(head, undefined);
  const ranked = (m: Map<string, number>) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, bytes]) => ({ name, bytes }));
  return { total, byArea: ranked(byArea), byOwnFrame: ranked(byOwn) };
}

/** Run in the login process (--import): SIGUSR2 starts the sampling heap profiler, the next one writes its profile to ALLOC_PROFILE_OUT. */
const SAMPLER_SOURCE = `
import inspector from 'node:inspector';
import { renameSync, writeFileSync } from 'node:fs';
const session = new inspector.Session();
session.connect();
const post = (method, params = {}) => new Promise((resolve, reject) => session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))));
let sampling = false;
process.on('SIGUSR2', async () => {
  if (!sampling) {
    sampling = true;
    await post('HeapProfiler.enable');
    await post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    return;
  }
  const { profile } = await post('HeapProfiler.stopSampling');
  writeFileSync(process.env.ALLOC_PROFILE_OUT + '.partial', JSON.stringify(profile));
  renameSync(process.env.ALLOC_PROFILE_OUT + '.partial', process.env.ALLOC_PROFILE_OUT);
});
`;

/** The node flags that load the sampler into a process (no file of its own: a data: URL). */
export function samplerFlags(): string[] {
  return ['--import', `data:text/javascript,${encodeURIComponent(SAMPLER_SOURCE)}`];
}

const isMain = process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname);
if (isMain) {
  const scheme = process.argv[2] ?? 'bearer';
  if (scheme !== 'assertion' && scheme !== 'bearer') throw new Error(`the scheme must be assertion or bearer, got ${scheme}`);
  const seconds = Number(process.argv[3] ?? 5);
  buildServices();
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-alloc-'));
  const gcLog = path.join(dir, 'gc.log');
  const profileFile = path.join(dir, 'alloc.heapprofile');
  const stack = await startLoginStack(`sqlite:${path.join(dir, 'store.db')}`, {
    users: 1000,
    bearer: scheme === 'bearer',
    buildDir: BUILD_DIR,
    loginEnv: { LOGIN_WORKERS: '1', ALLOC_PROFILE_OUT: profileFile },
    loginNodeArgs: ['--trace-gc-nvp', ...samplerFlags()],
    // The trace goes to stdout with the log lines: a copy of it to a file, node still the started process.
    loginWrap: ['bash', '-c', `exec "$@" > >(exec tee ${gcLog})`, 'bash'],
  });
  try {
    await schemeRound(stack, 3, scheme as Scheme);
    const from = statSync(gcLog).size;
    process.kill(stack.login.child.pid!, 'SIGUSR2');
    const r = await schemeRound(stack, seconds, scheme as Scheme);
    const gc = gcTotals(readFileSync(gcLog, 'utf8').slice(from));
    process.kill(stack.login.child.pid!, 'SIGUSR2');
    for (let i = 0; i < 300 && !existsSync(profileFile); i++) await new Promise((resolve) => setTimeout(resolve, 100));
    const logins = r.requestsPerSecond * seconds;
    const kb = (bytes: number) => Math.round(bytes / logins / 102.4) / 10;
    console.table({
      'logins/s in the window': Math.round(r.requestsPerSecond),
      'KB allocated per login': kb(gc.allocatedBytes),
      'KB promoted per login': kb(gc.promotedBytes),
      ...Object.fromEntries(
        Object.entries(gc.byKind).flatMap(([kind, k]) => [
          [`gc=${kind}: collections per second`, Math.round(k.count / seconds)],
          [`gc=${kind}: pause ms per second`, Math.round(k.pauseMs / seconds)],
        ]),
      ),
    });
    const sites = allocationSites((JSON.parse(readFileSync(profileFile, 'utf8')) as { head: SamplingNode }).head);
    const rows = (list: AllocationSite[]) => Object.fromEntries(list.map((s) => [s.name, { 'KB per login': kb(s.bytes), '% of sampled': Math.round((1000 * s.bytes) / sites.total) / 10 }]));
    console.log(`sampled: ${kb(sites.total)} KB per login; by the allocating frame's area:`);
    console.table(rows(sites.byArea));
    console.log('by the nearest frame of our own code (services/, lib/):');
    console.table(rows(sites.byOwnFrame));
  } finally {
    await stack.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
