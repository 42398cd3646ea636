// bench/alloc.ts reads V8's own output: --trace-gc-nvp lines and a sampling heap profile. Its
// figures are only as good as those readings, so they are checked against a real node process
// whose allocations are known, and branch by branch on small made-up inputs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { allocationSites, gcTotals, samplerFlags } from '../bench/alloc.js';
import { eventually } from './support/services.js';

test('gcTotals: the bytes a real node process allocated, from its --trace-gc-nvp lines', () => {
  // 50 000 arrays of 126 small integers: 16 + 126 × 8 bytes of elements and a 32-byte array each.
  const arrays = 50_000;
  const expected = arrays * (16 + 126 * 8 + 32);
  const out = execFileSync(process.execPath, ['--trace-gc-nvp', '--max-semi-space-size=1', '-e', `for (let i = 0; i < ${arrays}; i++) globalThis.kept = new Array(126).fill(i);`], { encoding: 'utf8' });
  const gc = gcTotals(out);
  // From the first collection to the last: less than all of it, by at most a young generation or two.
  assert.ok(gc.allocatedBytes > 0.85 * expected && gc.allocatedBytes <= expected, `${gc.allocatedBytes} of ${expected}`);
  assert.ok(gc.byKind.s.count >= 10, JSON.stringify(gc.byKind));
  assert.ok(gc.promotedBytes < 0.05 * expected, `${gc.promotedBytes} promoted`);
});

test('gcTotals: each interval between collections counted once, kinds apart, other lines skipped', () => {
  const text = [
    '[1:0x1]  5 ms: pause=1.5 mutator=2.0 gc=s reduce_memory=0 total_size_before=1000 total_size_after=400 allocated=1000 promoted=10 new_space_survived=5',
    'a log line that is not a collection, total_size_before=999999',
    '{"level":30,"msg":"request"}',
    '[1:0x1]  9 ms: pause=0.5 mutator=4.0 gc=s reduce_memory=0 total_size_before=1400 total_size_after=450 allocated=1000 promoted=20',
    '[1:0x1] 12 ms: pause=3.0 mutator=1.0 gc=mc reduce_memory=0 total_size_before=950 total_size_after=300 allocated=500',
    // A size that fell between two collections (memory handed back meanwhile) is no allocation.
    '[1:0x1] 15 ms: pause=0.25 mutator=1.0 gc=s reduce_memory=0 total_size_before=200 total_size_after=100 promoted=5',
  ].join('\n');
  assert.deepEqual(gcTotals(text), {
    allocatedBytes: 1000 + 500,
    promotedBytes: 35,
    byKind: { s: { count: 3, pauseMs: 2.25 }, mc: { count: 1, pauseMs: 3 } },
  });
  assert.deepEqual(gcTotals(''), { allocatedBytes: 0, promotedBytes: 0, byKind: {} });
});

type SamplingNode = Parameters<typeof allocationSites>[0];
const frame = (functionName: string, url: string, selfSize: number, children: SamplingNode[] = []): SamplingNode => ({
  callFrame: { functionName, url, lineNumber: 9 },
  selfSize,
  children,
});

test('allocationSites: bytes by the allocating area and by the nearest frame of our own code', () => {
  const own = 'file:///repo/dist/bench/services/login/actions/token.js';
  const lib = 'file:///repo/dist/bench/lib/token.js';
  const koa = 'file:///repo/node_modules/koa/lib/application.js';
  const head = frame('(root)', '', 0, [
    frame('handleRequest', koa, 100, [
      frame('mintToken', own, 50, [frame('set', koa, 30), frame('makeToken', lib, 20, [frame('from', 'node:buffer', 7)])]),
    ]),
    frame('(anonymous)', own, 0, [frame('', koa, 4)]),
    frame('(V8 API)', '', 3),
  ]);
  const sites = allocationSites(head);
  assert.equal(sites.total, 100 + 50 + 30 + 20 + 7 + 4 + 3);
  // bench/profile.ts area: a package's name, node's module, or the file's path (outside this checkout, as here, whole).
  const ownArea = '/repo/dist/bench/services/login/actions/token.js';
  const libArea = '/repo/dist/bench/lib/token.js';
  assert.deepEqual(sites.byArea, [
    { name: 'koa', bytes: 134 },
    { name: ownArea, bytes: 50 },
    { name: libArea, bytes: 20 },
    { name: 'node:buffer', bytes: 7 },
    { name: '(native / idle / gc)', bytes: 3 },
  ]);
  // A package's or node's allocation counts for the frame of ours that called it; lineNumber is 0-based.
  assert.deepEqual(sites.byOwnFrame, [
    { name: '(no frame of ours)', bytes: 103 },
    { name: `mintToken ${ownArea}:10`, bytes: 80 },
    { name: `makeToken ${libArea}:10`, bytes: 27 },
    { name: `(anonymous) ${ownArea}:10`, bytes: 4 },
  ]);
  assert.equal(allocationSites(head, 2).byArea.length, 2);
});

test("the sampler: SIGUSR2 starts V8's sampling heap profiler in the process, the next writes the profile", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-alloc-test-'));
  const out = path.join(dir, 'p.heapprofile');
  const child = spawn(process.execPath, [...samplerFlags(), '-e', "process.stdout.write('ready\\n'); setInterval(() => { globalThis.kept = Array.from({ length: 1000 }, (_, i) => ({ i })); }, 1);"], {
    env: { ...process.env, ALLOC_PROFILE_OUT: out },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.after(() => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
  child.kill('SIGUSR2');
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.equal(existsSync(out), false, 'nothing is written before the second signal');
  child.kill('SIGUSR2');
  await eventually('the profile written', () => existsSync(out), { timeoutMs: 10_000, pollMs: 50 });
  const sites = allocationSites((JSON.parse(readFileSync(out, 'utf8')) as { head: SamplingNode }).head);
  // ~500 ticks of 1000 small objects: megabytes, every byte outside our own code.
  assert.ok(sites.total > 1_000_000, `${sites.total} bytes sampled`);
  assert.equal(sites.byOwnFrame[0].name, '(no frame of ours)');
});
