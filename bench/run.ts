// `npm run bench`: every benchmark, each figure next to its baseline measured
// in the same run, printed as a table and saved as JSON.
//
//   npm run bench                        full run (~8 min on 2 cores) → bench/results/latest.json
//   npm run bench -- --quick             shorter windows, 100k instead of 1M users (~4.5 min)
//   npm run bench -- --only login,gateway
//                                        sections: login, login-workers, login-mongo, start, gateway, growth, parse, vs-rust, profile, long
//   npm run bench -- --only vs-rust      ours beside Mozilla's Rust tokenserver (SYNCSERVER_BIN, PostgreSQL; ~4 min, --quick ~1.5)
//   npm run bench -- --long              adds the long reliability runs: fuzzing with
//                                        FUZZ_RUNS=100000, mutation testing (bench/mutation.ts)
//                                        and 60 s of mixed load at ~80 % of max
// Runs other than the full default one are saved to dist/bench-results/partial.json (not committed);
// profiles go to dist/bench-results/profiles/.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildServices, ROOT } from './build.js';
import { benchGateway, type BenchResult, type BenchRow } from './gateway.js';
import { benchGrowth } from './growth.js';
import { benchBearerBesideAssertions, benchLogin, benchLoginWorkers, measureBareKoa, type BareKoa } from './login.js';
import { benchParse } from './parse.js';
import { profileLogin } from './profile.js';
import { benchStart, CACHE_FILL_USERS } from './start.js';
import { mongoServer, withDatabase } from './mongo-server.js';
import { benchVsRust } from './vs-rust.js';

const SECTIONS = ['login', 'login-workers', 'login-mongo', 'start', 'gateway', 'growth', 'parse', 'vs-rust', 'profile', 'long'] as const;
type Section = (typeof SECTIONS)[number];
const DEFAULT_SECTIONS: Section[] = ['login', 'login-workers', 'login-mongo', 'start', 'gateway', 'growth', 'parse', 'vs-rust'];
const USERS = 1000;
/** Where partial results and profiles go: under dist/, which git ignores. */
const RESULTS_SCRATCH = path.join(ROOT, 'dist', 'bench-results');

interface Options {
  quick: boolean;
  sections: Section[];
  seconds: number;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: { quick: { type: 'boolean', default: false }, long: { type: 'boolean', default: false }, only: { type: 'string' }, help: { type: 'boolean', default: false } },
  });
  if (values.help) {
    console.log(`usage: npm run bench -- [--quick] [--long] [--only ${SECTIONS.join(',')}]`);
    process.exit(0);
  }
  let sections: Section[] = [...DEFAULT_SECTIONS];
  if (values.only) {
    sections = values.only.split(',').map((s) => s.trim()) as Section[];
    const unknown = sections.filter((s) => !SECTIONS.includes(s));
    if (unknown.length) {
      console.error(`unknown section(s) ${unknown.join(', ')}; choose from ${SECTIONS.join(', ')}`);
      process.exit(2);
    }
  }
  if (values.long && !sections.includes('long')) sections.push('long');
  return { quick: values.quick, sections, seconds: values.quick ? 3 : 8 };
}

/** A result with no figures, only why it was not measured. */
function skipped(name: string, reason: string): BenchResult {
  console.log(`[${name}] skipped: ${reason}`);
  return { name, rows: [{ metric: `${name} skipped: ${reason}`, value: NaN }] };
}

async function runSection(section: Section, o: Options, state: { koa?: BareKoa; maxLoginRate?: number }): Promise<BenchResult[]> {
  const koa = async () => (state.koa ??= await measureBareKoa(o.seconds));
  switch (section) {
    case 'login': {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-sqlite-'));
      try {
        const r = await benchLogin({ label: 'sqlite', storeUrl: `sqlite:${path.join(dir, 'store.db')}`, seconds: o.seconds, users: USERS, koa: await koa() });
        state.maxLoginRate = r.max.requestsPerSecond;
        const rs = await benchLogin({ label: 'sqlite', alg: 'RS256', latency: false, storeUrl: `sqlite:${path.join(dir, 'store-rs.db')}`, seconds: o.seconds, users: USERS, koa: await koa() });
        const bearer = await benchBearerBesideAssertions({ storeUrl: `sqlite:${path.join(dir, 'store-bearer.db')}`, seconds: o.seconds, users: USERS });
        return [r.result, rs.result, bearer];
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    case 'login-workers': {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-workers-'));
      try {
        return [await benchLoginWorkers({ storeDir: dir, seconds: o.seconds, users: USERS })];
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    case 'login-mongo': {
      const server = mongoServer();
      if ('skip' in server) return [skipped('login-mongo', server.skip)];
      try {
        const storeUrl = withDatabase(server.url, `bench_${process.pid}_${Date.now()}`);
        return [(await benchLogin({ label: 'mongodb', storeUrl, seconds: o.seconds, users: USERS, koa: await koa() })).result];
      } finally {
        server.stop();
      }
    }
    case 'start':
      return [await benchStart({ seconds: o.seconds, users: USERS, fillUsers: o.quick ? 12_000 : CACHE_FILL_USERS, koa: await koa() })];
    case 'gateway':
      return [await benchGateway({ durationSeconds: o.seconds })];
    case 'growth':
      return [await benchGrowth({ quick: o.quick })];
    case 'parse':
      return [benchParse({ quick: o.quick })];
    case 'vs-rust': {
      const r = await benchVsRust({ seconds: o.quick ? 3 : 10, rounds: o.quick ? 2 : 3, users: USERS });
      return ['skip' in r ? skipped('vs-rust', r.skip) : r];
    }
    case 'profile': {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-profile-'));
      try {
        const r = await profileLogin({ storeUrl: `sqlite:${path.join(dir, 'store.db')}`, seconds: o.seconds, users: USERS, outDir: path.join(RESULTS_SCRATCH, 'profiles') });
        return [{ name: r.name, rows: r.rows }];
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    case 'long': {
      const { longRuns } = await import('./long.js');
      return [await longRuns({ quick: o.quick })];
    }
  }
}

function printTable(results: BenchResult[]): void {
  const rows = results.flatMap((r) =>
    r.rows.map((row: BenchRow) => ({
      section: r.name,
      metric: row.metric,
      value: Number.isNaN(row.value) ? '—' : row.value,
      baseline: row.baseline ?? '',
      ratio: row.ratio ?? '',
      target: row.target ?? '',
      met: row.pass === undefined ? '' : row.pass ? 'yes' : 'NO',
    })),
  );
  console.table(rows);
}

async function main(): Promise<void> {
  const o = options(process.argv.slice(2));
  const started = Date.now();
  const files = buildServices();
  console.log(`bench: ${files} service files transpiled to dist/bench; sections ${o.sections.join(', ')}${o.quick ? ' (quick)' : ''}`);
  const loadBefore = os.loadavg();
  const results: BenchResult[] = [];
  const state = {};
  for (const section of o.sections) {
    const t0 = Date.now();
    console.log(`[${section}] running…`);
    try {
      results.push(...(await runSection(section, o, state)));
    } catch (err) {
      console.error(`[${section}] failed: ${(err as Error).stack ?? err}`);
      results.push({ name: section, rows: [{ metric: `${section} failed: ${(err as Error).message}`, value: NaN, pass: false }] });
    }
    console.log(`[${section}] done in ${Math.round((Date.now() - t0) / 1000)} s`);
  }
  printTable(results);
  const rows = results.flatMap((r) => r.rows);
  const missed = rows.filter((r) => r.pass === false).map((r) => r.metric);
  const met = rows.filter((r) => r.pass === true).length;
  console.log(`targets met: ${met}; missed: ${missed.length}${missed.length ? `\n  - ${missed.join('\n  - ')}` : ''}`);

  const full = !o.quick && DEFAULT_SECTIONS.every((s) => o.sections.includes(s));
  const file = full ? path.join(ROOT, 'bench/results/latest.json') : path.join(RESULTS_SCRATCH, 'partial.json');
  mkdirSync(path.dirname(file), { recursive: true });
  const report = {
    date: new Date(started).toISOString(),
    seconds: Math.round((Date.now() - started) / 1000),
    mode: o.quick ? 'quick' : 'full',
    sections: o.sections,
    machine: { node: process.version, platform: `${os.platform()} ${os.arch()}`, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, loadavgBefore: loadBefore, loadavgAfter: os.loadavg() },
    results,
    summary: { met, missed },
  };
  writeFileSync(file, JSON.stringify(report, null, 2) + '\n');
  console.log(`bench: ${path.relative(ROOT, file)} written (${report.seconds} s)`);
}

await main();
