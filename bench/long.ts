// The bench's long mode: the reliability tests with long settings, through
// the test runner exactly as npm test runs them (scripts/test.sh).
//  - fuzzing: every tests/fuzz-*.test.ts with FUZZ_RUNS=100000 cases per property;
//  - mutation testing (bench/mutation.ts): StrykerJS on each security-critical
//    file with the tests beside it; the score per file (~1 h on 2 shared cores);
//  - load without loss: tests/load.test.ts closed-loop for a few seconds to find
//    the mixed workload's maximum rate, then 60 s paced at 80 % of it.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT } from './build.js';
import type { BenchResult, BenchRow } from './gateway.js';
import { MUTATION_TARGETS, type MutationScore } from './mutation.js';

const LOAD_SHARE = 0.8;

interface LoadReport {
  seconds: number;
  requests: number;
  rate: number;
  statuses: Record<string, number>;
  unexpected: number;
  firstUnexpected: string[];
}

/** Runs test files through scripts/test.sh with `env`; resolves with success and the time taken. */
function runTests(files: string[], env: Record<string, string>): Promise<{ ok: boolean; seconds: number; tail: string }> {
  const started = Date.now();
  const child = spawn('bash', [path.join(ROOT, 'scripts/test.sh'), ...files], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer) => (out = (out + d).slice(-20_000));
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  return new Promise((resolve) =>
    child.on('exit', (code) => resolve({ ok: code === 0, seconds: Math.round((Date.now() - started) / 1000), tail: out })),
  );
}

/** The lines that say what failed: the test, fast-check's counterexample and seed/path, and the assertion. */
function failureLines(tail: string): string {
  return tail
    .split('\n')
    .filter((l) => /^\s*not ok|error:|Counterexample|seed:|Got /.test(l))
    .map((l) => l.trim().slice(0, 400))
    .slice(0, 12)
    .join('\n    ');
}

async function loadRun(env: Record<string, string>): Promise<{ ok: boolean; report?: LoadReport; tail: string }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-long-'));
  try {
    const file = path.join(dir, 'load.json');
    const r = await runTests(['tests/load.test.ts'], { ...env, LOAD_REPORT: file });
    let report: LoadReport | undefined;
    try {
      report = JSON.parse(readFileSync(file, 'utf8')) as LoadReport;
    } catch {
      report = undefined;
    }
    return { ok: r.ok, report, tail: r.tail };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every mutation target in one child process (its output shown as it goes); a row per file. */
async function mutationRows(): Promise<BenchRow[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-mutation-'));
  try {
    const file = path.join(dir, 'scores.json');
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/mutation.ts'), '--summary', file, ...Object.keys(MUTATION_TARGETS)], { cwd: ROOT, stdio: 'inherit' });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    let scores: MutationScore[];
    try {
      scores = (JSON.parse(readFileSync(file, 'utf8')) as { scores: MutationScore[] }).scores;
    } catch {
      return [{ metric: `mutation testing: no scores (exit ${code})`, value: NaN, pass: false }];
    }
    return scores.map((s) => ({
      metric: `mutation score ${s.file}, % (${s.killed + s.timeout} killed of ${s.killed + s.timeout + s.survived + s.noCoverage}, ${s.survived + s.noCoverage} survived; ${s.seconds} s)`,
      value: s.score,
    }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function longRuns(o: { quick: boolean }): Promise<BenchResult> {
  const rows: BenchRow[] = [];
  const fuzzRuns = o.quick ? '10000' : '100000';
  const fuzzFiles = readdirSync(path.join(ROOT, 'tests'))
    .filter((f) => /^fuzz.*\.test\.ts$/.test(f))
    .map((f) => `tests/${f}`);
  for (const file of fuzzFiles) {
    console.log(`[long] ${file} with FUZZ_RUNS=${fuzzRuns}…`);
    const r = await runTests([file], { FUZZ_RUNS: fuzzRuns });
    rows.push({ metric: `${file}, ${fuzzRuns} cases per property (${r.seconds} s)`, value: r.ok ? 0 : 1, target: '0 failures', pass: r.ok });
    if (!r.ok) console.error(`[long] ${file} failed: ${failureLines(r.tail)}`);
  }
  console.log('[long] mutation testing…');
  rows.push(...(await mutationRows()));

  console.log('[long] mixed load, closed loop, to find its maximum rate…');
  const probe = await loadRun({ LOAD_SECONDS: o.quick ? '5' : '10' });
  if (!probe.report) {
    rows.push({ metric: `mixed load max rate: no report (${failureLines(probe.tail)})`, value: NaN, pass: false });
    return { name: 'long', rows };
  }
  const rate = Math.max(1, Math.round(probe.report.rate * LOAD_SHARE));
  const seconds = o.quick ? 15 : 60;
  console.log(`[long] mixed load ${seconds} s at ${rate} req/s (${LOAD_SHARE * 100} % of ${probe.report.rate})…`);
  const run = await loadRun({ LOAD_SECONDS: String(seconds), LOAD_RATE: String(rate) });
  rows.push({ metric: 'mixed load max req/s (closed loop, one process)', value: probe.report.rate, pass: probe.ok });
  if (!run.report) {
    rows.push({ metric: `mixed load at ${rate} req/s: no report (${failureLines(run.tail)})`, value: NaN, pass: false });
  } else {
    rows.push(
      { metric: `mixed load ${run.report.seconds} s paced at ${rate} req/s: achieved req/s`, value: run.report.rate, baseline: rate, ratio: Math.round((100 * run.report.rate) / rate) / 100 },
      { metric: `mixed load ${run.report.requests} requests: unexpected answers or invariant failures`, value: run.report.unexpected + (run.ok ? 0 : 1), target: '0', pass: run.ok && run.report.unexpected === 0 },
    );
    if (!run.ok) console.error(`[long] load failed: ${failureLines(run.tail)} ${run.report.firstUnexpected.join(' | ')}`);
  }
  return { name: 'long', rows };
}
