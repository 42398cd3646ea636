// bench/mutation.ts's own rules: the lines a run may be limited to, and the score as Stryker defines
// it (killed or timed out over every mutant that ran), with each survivor named by file, line and column.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { coveringTests, lineRange, MUTATION_TARGETS, scoreOf } from '../bench/mutation.js';

test('--lines: A-B with 1 <= A <= B; anything else is refused, quoting it', () => {
  assert.deepEqual(lineRange('212-372'), [212, 372]);
  assert.deepEqual(lineRange('1-1'), [1, 1]);
  for (const bad of ['0-3', '5-4', 'a-b', '3', '3-', '-3', ' 1-2', '1-2 ', '1.5-2']) {
    assert.throws(() => lineRange(bad), (e: Error) => e.message === `--lines must be A-B with 1 <= A <= B, got ${JSON.stringify(bad)}`, bad);
  }
});

test("--with: the target's own covering files first, then the others, each once; an unknown target is refused", () => {
  const own = MUTATION_TARGETS['services/login/jwks-source.ts'];
  assert.deepEqual(coveringTests('services/login/jwks-source.ts'), own);
  assert.deepEqual(coveringTests('services/login/jwks-source.ts', { withTests: ['tests/provider-keys.test.ts', ...own] }), [...own, 'tests/provider-keys.test.ts']);
  assert.throws(() => coveringTests('lib/nothing.ts'), /no covering tests known for lib\/nothing\.ts/);
});

test('scoreOf: killed and timed out over all that ran; compile errors left out; survivors and uncovered named', () => {
  const mutant = (status: string, line: number, replacement?: string) => ({ status, mutatorName: 'StringLiteral', replacement, location: { start: { line, column: 4 }, end: { line, column: 9 } } });
  const results = [
    mutant('Killed', 1),
    mutant('Killed', 2),
    mutant('Timeout', 3),
    mutant('Survived', 4, '""'),
    mutant('NoCoverage', 5),
    mutant('CompileError', 6),
    mutant('RuntimeError', 7),
  ] as unknown as Parameters<typeof scoreOf>[1];
  assert.deepEqual(scoreOf('lib/x.ts', results, 12), {
    file: 'lib/x.ts',
    score: 60,
    killed: 2,
    timeout: 1,
    survived: 1,
    noCoverage: 1,
    invalid: 2,
    seconds: 12,
    survivors: ['lib/x.ts:4:5 StringLiteral: "\\"\\""', 'lib/x.ts:5:5 StringLiteral: ""'],
  });
  assert.ok(Number.isNaN(scoreOf('lib/x.ts', [], 0).score), 'no mutant ran: no score');
  assert.equal(scoreOf('lib/x.ts', results.slice(0, 2), 0).score, 100);
});
