// The cost of parsing a hostile Authorization header (issue #13 item 5), next
// to a normal refusal. parseAuthorization is pure, so this runs in the bench
// process itself: no server, no network, under a second.
import { MAX_AUTHORIZATION_LENGTH, MAX_CREDENTIALS_LENGTH, parseAuthorization } from '../services/login/assertion.js';
import type { BenchResult } from './gateway.js';

/** ~16 KB headers that stress each step of the parser; the first is the one that cost ~220 ms before. */
export function hostileHeaders(): Record<string, string> {
  const room = MAX_AUTHORIZATION_LENGTH - 'Assertion'.length - 3;
  const half = ' \t'.repeat(room / 4);
  return {
    'blanks then "x y"': `Assertion${' '.repeat(room)}x y`,
    'blanks inside the credentials': `Assertion ${'a'.repeat(room / 2)}${half}b`,
    'one long credential, no "~"': `Assertion ${'a'.repeat(MAX_CREDENTIALS_LENGTH)}`,
    'many "~"': `Assertion ${'~'.repeat(MAX_CREDENTIALS_LENGTH)}`,
    'a long scheme': 'A'.repeat(MAX_AUTHORIZATION_LENGTH),
    'just over the length cap': `Assertion${' '.repeat(MAX_AUTHORIZATION_LENGTH)}x y`,
  };
}

/** The regex parseAuthorization used before #13: kept here only to show what the fix bought. */
const BACKTRACKING = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)(?:[ \t]+(\S*))?[ \t]*$/;

/** Mean µs per call of `parse(header)`, which is expected to throw, over at least `minMs`. */
function microsPer(parse: (h: string) => unknown, header: string, minMs: number): number {
  let runs = 0;
  const started = performance.now();
  do {
    for (let i = 0; i < 10; i++) {
      try {
        parse(header);
      } catch {
        // Every header here is refused; the refusal is what is timed.
      }
    }
    runs += 10;
  } while (performance.now() - started < minMs);
  return ((performance.now() - started) * 1000) / runs;
}

const round = (n: number) => Math.round(n * 10) / 10;

export function benchParse(o: { quick?: boolean } = {}): BenchResult {
  const minMs = o.quick ? 50 : 200;
  const normal = microsPer(parseAuthorization, 'Assertion abc', minMs);
  const costs = Object.entries(hostileHeaders()).map(([shape, header]) => ({ shape, us: microsPer(parseAuthorization, header, minMs) }));
  const worst = costs.reduce((a, b) => (b.us > a.us ? b : a));
  const before = microsPer((h) => BACKTRACKING.exec(h), hostileHeaders()['blanks then "x y"'], 1);
  for (const c of costs) console.log(`[parse] ${c.shape}: ${round(c.us)} µs`);
  return {
    name: 'parse',
    rows: [
      {
        metric: `worst-case parse of a 16 KB Authorization header, µs (${worst.shape}); baseline: a normal refusal ("Assertion abc")`,
        value: round(worst.us),
        baseline: round(normal),
        ratio: round(worst.us / normal),
        target: '< 1000 µs',
        pass: worst.us < 1000,
      },
      { metric: 'the same 15 KB of blanks with the regex used before #13, µs', value: Math.round(before) },
    ],
  };
}
