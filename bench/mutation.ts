// Mutation testing (StrykerJS, command test runner): how many deliberate small
// breakages of a file the tests beside it catch. One Stryker run per file, each
// running only the tests that cover that file, so a run takes minutes.
//
//   npm run mutation -- lib/hawk.ts [more files]   (no file: every target below)
//   npm run mutation -- --concurrency 1 lib/token.ts
//   npm run mutation -- --summary out.json …       also writes the scores as JSON (the bench's long mode)
//   npm run mutation -- --lines 212-372 --with tests/provider-keys.test.ts services/login/jwks-source.ts
//                                                  only those lines, with one more covering test file
//
// Prints the score per file and every surviving mutant; the HTML report of each
// run goes to dist/mutation/<file>.html. Survivors are killed by a test or
// explained in docs/testing.md ("Mutation testing").
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Stryker } from '@stryker-mutator/core';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const REPORTS = path.join(ROOT, 'dist', 'mutation');

type MutantResult = Awaited<ReturnType<Stryker['runMutationTest']>>[number];

/** Each file under mutation testing, and the test files that cover it. */
export const MUTATION_TARGETS: Record<string, string[]> = {
  'cli/args.ts': ['cli/args.test.ts'],
  'cli/import-rules.ts': ['cli/import-rules.test.ts'],
  'lib/client-error.ts': ['lib/client-error.test.ts'],
  'sdk/policy.ts': ['sdk/policy.test.ts'],
  'lib/config.ts': ['lib/config.test.ts', 'lib/config-issuers.test.ts', 'lib/config-jwks.test.ts', 'lib/allow-list.test.ts'],
  // The primary's and the workers' code: the workers run in the login processes tests/login-workers.test.ts
  // starts, and in tests/worker-set.test.ts's program.
  'lib/cluster.ts': ['lib/cluster.test.ts', 'tests/login-workers.test.ts', 'tests/worker-set.test.ts'],
  'lib/dsa.ts': ['lib/dsa.test.ts'],
  'lib/email.ts': ['lib/email.test.ts'],
  'lib/errors.ts': ['lib/errors.test.ts'],
  'lib/grpc.ts': ['lib/grpc.test.ts'],
  'lib/hawk.ts': ['lib/hawk.test.ts'],
  'lib/load.ts': ['lib/load.test.ts'],
  'lib/log.ts': ['lib/log.test.ts'],
  'lib/request-id.ts': ['lib/request-id.test.ts'],
  'lib/token.ts': ['lib/token.test.ts'],
  'services/directory/service.ts': ['services/directory/service.test.ts', 'services/directory/store-sqlite.test.ts', 'services/directory/metrics.test.ts', 'services/directory/index.test.ts'],
  'services/directory/import-rules.ts': ['services/directory/import-rules.test.ts'],
  'services/directory/purge-rules.ts': ['services/directory/purge-rules.test.ts'],
  'services/directory/rules.ts': ['services/directory/rules.test.ts', 'services/directory/rules-kca.test.ts'],
  'services/login/assertion.ts': ['services/login/assertion.test.ts'],
  'services/login/actions/webhook.ts': ['services/login/actions/webhook.test.ts', 'tests/bearer.test.ts', 'tests/mozilla-errors.test.ts'],
  'services/login/backends.ts': ['services/login/backends.test.ts'],
  'services/login/authorization.ts': ['services/login/authorization.test.ts'],
  'services/login/error-handler.ts': ['services/login/error-handler.test.ts'],
  'services/login/jwks.ts': ['services/login/jwks.test.ts', 'services/login/jwks-source.test.ts'],
  'services/login/jws.ts': ['services/login/jws.test.ts'],
  // The upkeep (lines 212 on) is tested by tests/provider-keys.test.ts too, ~50 s a run: with it, a run
  // of the whole file takes hours, so those lines are measured on their own (--lines, --with; docs/testing.md).
  'services/login/jwks-source.ts': ['services/login/jwks-source.test.ts'],
  'services/login/rules.ts': ['services/login/rules.test.ts'],
  'services/login/shared.ts': ['services/login/shared.test.ts', 'tests/login.test.ts', 'tests/observability.test.ts', 'tests/mozilla-errors.test.ts'],
  'services/login/scheme-bearer.ts': ['services/login/scheme-bearer.test.ts', 'tests/bearer.test.ts'],
  'services/nodeassign/service.ts': ['services/nodeassign/service.test.ts'],
  'services/nodeassign/rules.ts': ['services/nodeassign/rules.test.ts'],
  'services/node-gateway/auth.ts': ['services/node-gateway/auth.test.ts'],
  'services/node-gateway/generations.ts': ['services/node-gateway/generations.test.ts'],
  'services/node-gateway/respond.ts': ['services/node-gateway/respond.test.ts', 'services/node-gateway/server.test.ts'],
  'services/node-gateway/redis-nonces.ts': ['services/node-gateway/redis-nonces.test.ts'],
  'services/node-gateway/nonces.ts': ['services/node-gateway/nonces.test.ts'],
  'services/node-gateway/forward.ts': ['services/node-gateway/forward.test.ts', 'services/node-gateway/server.test.ts'],
};

/** Test files that run longer than the default 5 s a mutation run allows each file (node's test runner times a whole file as one test). */
const SLOW_TEST_FILES: Record<string, number> = {
  'tests/bearer.test.ts': 30_000,
  'services/login/jwks.test.ts': 120_000,
  'services/node-gateway/nonces.test.ts': 30_000,
  'services/nodeassign/service.test.ts': 30_000,
  'services/login/jwks-source.test.ts': 15_000,
  'tests/provider-keys.test.ts': 120_000,
  'tests/login-workers.test.ts': 30_000,
  'tests/worker-set.test.ts': 45_000,
  'services/node-gateway/redis-nonces.test.ts': 30_000,
};

function testTimeoutMs(tests: readonly string[]): number {
  return Math.max(5_000, ...tests.map((t) => SLOW_TEST_FILES[t] ?? 0));
}

export interface MutationScore {
  file: string;
  /** Killed (or timed out) / (killed + timed out + survived + not covered), in %. */
  score: number;
  killed: number;
  timeout: number;
  survived: number;
  noCoverage: number;
  /** Mutants that did not run: compile or runtime errors in the mutated code. */
  invalid: number;
  seconds: number;
  survivors: string[];
}

/** The counts and the score of one run's results (Stryker's definition of the score). */
export function scoreOf(file: string, results: readonly MutantResult[], seconds: number): MutationScore {
  const count = (...statuses: string[]) => results.filter((r) => statuses.includes(r.status)).length;
  const killed = count('Killed');
  const timeout = count('Timeout');
  const survived = count('Survived');
  const noCoverage = count('NoCoverage');
  const valid = killed + timeout + survived + noCoverage;
  const survivors = results
    .filter((r) => r.status === 'Survived' || r.status === 'NoCoverage')
    .map((r) => `${file}:${r.location.start.line}:${r.location.start.column + 1} ${r.mutatorName}: ${JSON.stringify(r.replacement ?? '')}`);
  return {
    file,
    score: valid === 0 ? NaN : Math.round((10_000 * (killed + timeout)) / valid) / 100,
    killed,
    timeout,
    survived,
    noCoverage,
    invalid: count('CompileError', 'RuntimeError'),
    seconds,
    survivors,
  };
}

/** What a run mutates and runs beyond a target's own covering tests. */
export interface MutationScope {
  /** Only these lines of the file, inclusive. */
  lines?: readonly [number, number];
  /** Test files run besides the target's own. */
  withTests?: readonly string[];
}

/** `--lines A-B`: the first and the last line, 1 ≤ A ≤ B. */
export function lineRange(v: string): [number, number] {
  const m = /^(\d+)-(\d+)$/.exec(v);
  const range: [number, number] = m ? [Number(m[1]), Number(m[2])] : [0, 0];
  if (range[0] < 1 || range[1] < range[0]) throw new Error(`--lines must be A-B with 1 <= A <= B, got ${JSON.stringify(v)}`);
  return range;
}

/** The test files a run of `file` runs: its own covering files, then those `scope` adds. */
export function coveringTests(file: string, scope: MutationScope = {}): string[] {
  const own = MUTATION_TARGETS[file];
  if (!own) throw new Error(`no covering tests known for ${file}; add it to MUTATION_TARGETS in bench/mutation.ts`);
  return [...own, ...(scope.withTests ?? []).filter((t) => !own.includes(t))];
}

/** Runs Stryker on one file (or some of its lines) with the tests that cover it. */
export async function mutationTest(file: string, concurrency: number, scope: MutationScope = {}): Promise<MutationScore> {
  const tests = coveringTests(file, scope);
  const slug = file.replace(/[/.]/g, '_');
  const started = Date.now();
  const results = await new Stryker({
    mutate: [scope.lines ? `${file}:${scope.lines[0]}-${scope.lines[1]}` : file],
    testRunner: 'command',
    // The command runner cannot tell which test covers which mutant: every mutant runs these files.
    // A mutant that makes a socket test wait forever fails that test after 5 s (longer for a slow
    // file, whose whole run counts as one test) and ends the run (force-exit) instead of holding it
    // until Stryker's own timeout.
    commandRunner: { command: `LOG_LEVEL=silent node --import tsx --test --test-concurrency=1 --test-timeout=${testTimeoutMs(tests)} --test-force-exit ${tests.join(' ')}` },
    coverageAnalysis: 'off',
    concurrency,
    // A machine shared with other work runs slower than the dry run measured.
    timeoutMS: 15_000,
    reporters: ['clear-text', 'html'],
    htmlReporter: { fileName: path.join(REPORTS, `${slug}.html`) },
    clearTextReporter: { allowEmojis: false, logTests: false, reportScoreTable: true },
    ignorePatterns: ['dist', 'data', 'bench/results', '.tools', '*.log'],
    plugins: [],
    cleanTempDir: 'always',
  }).runMutationTest();
  return scoreOf(file, results, Math.round((Date.now() - started) / 1000));
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      concurrency: { type: 'string', default: '2' },
      summary: { type: 'string' },
      lines: { type: 'string' },
      with: { type: 'string', multiple: true, default: [] },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(`usage: npm run mutation -- [--concurrency N] [--summary file.json] [--lines A-B] [--with more.test.ts]… [${Object.keys(MUTATION_TARGETS).join(' ')}]`);
    return;
  }
  const scope: MutationScope = { lines: values.lines === undefined ? undefined : lineRange(values.lines), withTests: values.with };
  const concurrency = Number(values.concurrency);
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) throw new Error(`--concurrency must be a positive whole number, got ${values.concurrency}`);
  const files = positionals.length ? positionals : Object.keys(MUTATION_TARGETS);
  const unknown = files.filter((f) => !MUTATION_TARGETS[f]);
  if (unknown.length) {
    console.error(`unknown target(s) ${unknown.join(', ')}; choose from ${Object.keys(MUTATION_TARGETS).join(', ')}`);
    process.exitCode = 2;
    return;
  }
  mkdirSync(REPORTS, { recursive: true });
  const scores: MutationScore[] = [];
  for (const file of files) {
    const where = scope.lines ? ` lines ${scope.lines[0]}-${scope.lines[1]}` : '';
    console.log(`[mutation] ${file}${where} with ${coveringTests(file, scope).join(', ')} (concurrency ${concurrency})…`);
    const s = await mutationTest(file, concurrency, scope);
    scores.push(s);
    console.log(`[mutation] ${file}: score ${s.score} % (${s.killed} killed, ${s.timeout} timed out, ${s.survived} survived, ${s.noCoverage} not covered, ${s.invalid} invalid; ${s.seconds} s)`);
    for (const line of s.survivors) console.log(`  survived ${line}`);
  }
  if (values.summary) writeFileSync(values.summary, JSON.stringify({ date: new Date().toISOString(), scores }, null, 2) + '\n');
  console.table(scores.map(({ survivors: _, ...s }) => s));
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
