// Shared pieces of the fuzz tests (tests/fuzz-*.test.ts): how many cases
// (FUZZ_RUNS, e.g. 100000 in the bench's long mode; FUZZ_SEED to replay a
// failure fast-check reported), mutations of valid inputs, and the check that
// only documented error classes come out. FUZZ_SEED with FUZZ_PATH replays
// exactly the counterexample fast-check printed.
import fc from 'fast-check';
import assert from 'node:assert/strict';

/** Cases per property: FUZZ_RUNS when set, else the file's default (sized for npm test). */
export function fuzzRuns(defaultRuns: number): number {
  const v = process.env.FUZZ_RUNS?.trim();
  if (!v) return defaultRuns;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`FUZZ_RUNS must be a positive whole number, got ${JSON.stringify(v)}`);
  return n;
}

/** fast-check parameters: the number of runs, and FUZZ_SEED (+ FUZZ_PATH) when replaying. */
export function fuzzParams(defaultRuns: number): fc.Parameters<unknown> {
  const seed = process.env.FUZZ_SEED?.trim();
  const path = process.env.FUZZ_PATH?.trim();
  // includeErrorInReport: the test runner shows only the message, so the failed assertion goes in it.
  return { numRuns: fuzzRuns(defaultRuns), includeErrorInReport: true, ...(seed ? { seed: Number(seed) } : {}), ...(seed && path ? { path } : {}) };
}

type ErrorClass = abstract new (...args: never[]) => Error;

/** Fails unless `err` is exactly one of `allowed` (a subclass does not count: it would be another status). */
export function assertDocumented(err: unknown, allowed: readonly ErrorClass[], input?: unknown): void {
  const ok = err instanceof Error && allowed.some((cls) => err.constructor === cls);
  if (!ok) {
    assert.fail(
      `undocumented failure ${err instanceof Error ? `${err.constructor.name}: ${err.message}` : String(err)}` +
        ` (allowed: ${allowed.map((c) => c.name).join(', ')}) for input ${JSON.stringify(input)?.slice(0, 300)}`,
    );
  }
}

/** Runs `fn`; returns its result, or undefined after checking that what it threw is documented. */
export function outcome<T>(fn: () => T, allowed: readonly ErrorClass[], input?: unknown): T | undefined {
  try {
    return fn();
  } catch (err) {
    assertDocumented(err, allowed, input);
    return undefined;
  }
}

export async function outcomeAsync<T>(fn: () => Promise<T>, allowed: readonly ErrorClass[], input?: unknown): Promise<T | undefined> {
  try {
    return await fn();
  } catch (err) {
    assertDocumented(err, allowed, input);
    return undefined;
  }
}

export type Mutation =
  | { kind: 'replace'; at: number; char: string }
  | { kind: 'insert'; at: number; text: string }
  | { kind: 'delete'; at: number; length: number }
  | { kind: 'truncate'; at: number }
  | { kind: 'duplicate'; at: number; length: number };

/** Characters worth inserting: the grammar's separators, quotes, escapes and controls, base64 symbols, non-ASCII. */
const SPECIAL = fc.constantFrom('~', '.', ',', '=', '"', '\\', ' ', '\t', '\n', '\r', '\0', '-', '_', '+', '/', '%', '{', '}', 'é', '\u2028', '\uD800', 'A', '0');

export const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), char: fc.oneof(SPECIAL, fc.string({ minLength: 1, maxLength: 1, unit: 'binary' })) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), text: fc.oneof(SPECIAL, fc.string({ maxLength: 8, unit: 'binary' })) }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), length: fc.integer({ min: 1, max: 8 }) }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('duplicate' as const), at: fc.nat(), length: fc.integer({ min: 1, max: 40 }) }),
);

export function applyMutation(s: string, m: Mutation): string {
  const at = s.length === 0 ? 0 : m.at % (s.length + 1);
  switch (m.kind) {
    case 'replace':
      return s.slice(0, at) + m.char + s.slice(at + 1);
    case 'insert':
      return s.slice(0, at) + m.text + s.slice(at);
    case 'delete':
      return s.slice(0, at) + s.slice(at + m.length);
    case 'truncate':
      return s.slice(0, at);
    case 'duplicate':
      return s.slice(0, at + m.length) + s.slice(at, at + m.length) + s.slice(at + m.length);
  }
}

/** One to three mutations of a valid input. */
export const mutationsArb = fc.array(mutationArb, { minLength: 1, maxLength: 3 });

export function mutate(s: string, ms: readonly Mutation[]): string {
  return ms.reduce(applyMutation, s);
}

/** Only what an HTTP header value can carry (Latin-1 without controls), for requests over real HTTP. */
export function headerSafe(s: string): string {
  return s.replace(/[^\t\x20-\x7e\x80-\xff]/g, '');
}
