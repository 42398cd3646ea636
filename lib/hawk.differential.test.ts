// Differential test of the Hawk header grammar (issue #12 item 7): the `hawk`
// package's utils.parseAuthorizationHeader is the reference. fast-check builds
// header variants (spacing, commas, quoting, attribute order, duplicates,
// unknown attributes, empty values, bad characters, scheme case, lengths near
// the 4096 cap) and both parsers must give the same verdict; what both accept
// they must read alike, and what ours refuses is a 400 or a 401.
//
// Where they differed, the reference won (its grammar is the de-facto spec:
// the Hawk README gives no ABNF), and lib/hawk.ts was changed:
// - whitespace around separators and after the scheme is JavaScript's `\s`
//   (so also NBSP), not only space and tab; attributes stay on one line;
// - a trailing comma after the last attribute is accepted;
// - an empty attribute value (`ext=""`) is refused.
// Two value rules of ours stay stricter than the reference's parser, and the
// oracle below applies them to what the reference parsed:
// - `ts` must be digits: the reference's server compares `ts * 1000` with now,
//   and for a non-number that comparison is false, so it is never stale;
// - `dlg` requires `app`: without `app` the MAC does not cover `dlg`.
// The reference's server also refuses a header without id, ts, nonce or mac
// (400 "Missing attributes") right after parsing; the oracle does the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { BadRequest, Unauthorized } from './errors.js';
import { MAX_HEADER_LENGTH, parseHawkHeader } from './hawk.js';
import { fuzzParams, outcome } from '../tests/support/fuzz.js';

const Hawk = createRequire(import.meta.url)('hawk') as {
  utils: { parseAuthorizationHeader(header: string): Record<string, string> };
};

/** The reference's verdict: its attributes, or null when it refuses (always a 400 or 401). */
function reference(header: string): Record<string, string> | null {
  let attrs: Record<string, string>;
  try {
    attrs = Hawk.utils.parseAuthorizationHeader(header);
  } catch (e) {
    const status = (e as { output?: { statusCode?: number } }).output?.statusCode;
    assert.ok(status === 400 || status === 401, `reference refused with ${status}`);
    return null;
  }
  // hawk's server.authenticate, next step after parsing.
  if (!attrs.id || !attrs.ts || !attrs.nonce || !attrs.mac) return null;
  return attrs;
}

/** Our value rules on top of the grammar (see the top of this file). */
function valueRulesAllow(attrs: Record<string, string>): boolean {
  return /^\d+$/.test(attrs.ts) && (attrs.dlg === undefined || attrs.app !== undefined);
}

const KNOWN = ['id', 'ts', 'nonce', 'mac', 'hash', 'ext', 'app', 'dlg'];
const ws = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('', ' ', '  ', '\t', ' \t ', '\u00a0', '\v', '\u3000') },
  { weight: 1, arbitrary: fc.constantFrom('\n', '\r\n ', '\u2028') },
);

const name = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...KNOWN) },
  { weight: 1, arbitrary: fc.constantFrom('foo', 'tsm', 'ID', 'Ts', 'i d', '', 'id2', '_', 'hash_', 'é') },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 5 }) },
);
const goodChar = fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)).filter((c) => c !== '"' && c !== '\\');
const value = fc.oneof(
  { weight: 6, arbitrary: fc.stringMatching(/^[A-Za-z0-9+/=_-]{1,24}$/) },
  { weight: 3, arbitrary: fc.stringMatching(/^\d{1,11}$/) },
  { weight: 3, arbitrary: fc.string({ unit: goodChar, minLength: 1, maxLength: 20 }) },
  { weight: 1, arbitrary: fc.constant('') },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.string({ unit: goodChar, maxLength: 6 }), fc.constantFrom('\\', '"', '\t', 'é', '\u0000', '\u007f', '\n', '\u2028', '\u00a0', '\ud83d\ude00', '\\"'), fc.string({ unit: goodChar, maxLength: 6 }))
      .map(([a, bad, b]) => a + bad + b),
  },
);
const quote = fc.oneof({ weight: 12, arbitrary: fc.constant('"') }, { weight: 1, arbitrary: fc.constantFrom("'", '', '""', '“') });
const equals = fc.oneof({ weight: 12, arbitrary: fc.constant('=') }, { weight: 1, arbitrary: fc.constantFrom(' =', '= ', ':', '==', '') });
const separator = fc.oneof(
  { weight: 60, arbitrary: fc.constantFrom(', ', ',') },
  { weight: 6, arbitrary: fc.tuple(ws, ws).map(([a, b]) => `${a},${b}`) },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', ',,', ', ,', ';', ' ; ', ',\u0000') },
);
const attribute = fc.record({ name, eq: equals, open: quote, value, close: quote });
type Attribute = { name: string; eq: string; open: string; value: string; close: string };
/** Usually none, sometimes a few. */
const few = <T>(arb: fc.Arbitrary<T>) => fc.oneof({ weight: 5, arbitrary: fc.constant([] as T[]) }, { weight: 1, arbitrary: fc.array(arb, { minLength: 1, maxLength: 3 }) });

/** id, ts, nonce, mac (usually all there, in any order), optional ones, and generated ones anywhere. */
const attributes = fc
  .tuple(
    fc.oneof({ weight: 10, arbitrary: fc.shuffledSubarray(['id', 'ts', 'nonce', 'mac'], { minLength: 4 }) }, { weight: 1, arbitrary: fc.shuffledSubarray(['id', 'ts', 'nonce', 'mac']) }),
    fc.oneof(fc.subarray(['hash', 'ext', 'app']), fc.constant(['app', 'dlg'])),
    few(fc.tuple(attribute, fc.nat())),
  )
  .chain(([required, optional, tweaks]) =>
    fc.tuple(...[...required, ...optional].map((n) => fc.tuple(fc.constant(n), n === 'ts' ? fc.stringMatching(/^\d{1,11}$/) : fc.stringMatching(/^[A-Za-z0-9+/=_-]{1,24}$/)))).map((base) => {
      const list: Attribute[] = base.map(([n, v]) => ({ name: n, eq: '=', open: '"', value: v, close: '"' }));
      // Some cases add a generated attribute (perhaps malformed, duplicate or unknown) at a generated place.
      for (const [a, i] of tweaks) list.splice(i % (list.length + 1), 0, a);
      return list;
    }),
  );

const header = fc
  .record({
    scheme: fc.oneof({ weight: 16, arbitrary: fc.constantFrom('Hawk', 'hawk', 'HAWK', 'hAwK') }, { weight: 1, arbitrary: fc.constantFrom('Hawk2', 'Hawk_', 'Bearer', '', ' Hawk', 'Hawkish', 'Ha wk', 'Häwk') }),
    afterScheme: fc.oneof({ weight: 6, arbitrary: fc.constant(' ') }, { weight: 2, arbitrary: ws }),
    attrs: attributes,
    seps: fc.array(separator, { minLength: 12, maxLength: 12 }),
    trailing: fc.oneof({ weight: 10, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.constantFrom(',', ', ', ' ', '\t', ',\t', '\n', ';', ',,', ', x') }),
    // Pad `ext` so that the header ends up this far from the cap (null: no padding).
    nearCap: fc.option(fc.integer({ min: -3, max: 3 }), { freq: 8, nil: null }),
  })
  .map(({ scheme, afterScheme, attrs, seps, trailing, nearCap }) => {
    let s = `${scheme}${afterScheme}${attrs.map((a, i) => `${i > 0 ? seps[i % seps.length] : ''}${a.name}${a.eq}${a.open}${a.value}${a.close}`).join('')}`;
    if (nearCap !== null) {
      const fixed = `${s}, ext=""${trailing}`.length;
      s += `, ext="${'e'.repeat(Math.max(0, MAX_HEADER_LENGTH + nearCap - fixed))}"`;
    }
    return s + trailing;
  });

const anyHeader = fc.oneof(
  { weight: 20, arbitrary: header },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom('H', 'a', 'w', 'k', 'i', 'd', '=', '"', ',', ' ', '\t', '1', '\\'), maxLength: 40 }) },
);

test('our Hawk header grammar gives the reference parser’s verdict on every generated variant', (t) => {
  const verdicts = { accepted: 0, refused: 0 };
  fc.assert(
    fc.property(anyHeader, (h) => {
      const ref = reference(h);
      const expected = ref !== null && valueRulesAllow(ref);
      const ours = outcome(() => parseHawkHeader(h), [BadRequest, Unauthorized], h);
      assert.equal(ours !== undefined, expected, `ours ${ours ? 'accepts' : 'refuses'}, the reference ${ref ? 'accepts' : 'refuses'}: ${JSON.stringify(h).slice(0, 300)}`);
      if (ours) assert.deepEqual({ ...ours }, ref, 'both read the same attributes');
      verdicts[expected ? 'accepted' : 'refused']++;
    }),
    fuzzParams(10_000),
  );
  // Both verdicts must be common, or the generator is not testing much.
  const total = verdicts.accepted + verdicts.refused;
  t.diagnostic(`${total} headers: ${verdicts.accepted} accepted by both, ${verdicts.refused} refused by both`);
  assert.ok(verdicts.accepted > total / 10 && verdicts.refused > total / 10, JSON.stringify(verdicts));
});

test('the cases the two parsers first disagreed on', () => {
  const ok = 'id="a", ts="1", nonce="n", mac="m"';
  const cases: Array<[string, boolean]> = [
    [`Hawk ${ok},`, true],
    [`Hawk ${ok}, `, true],
    [`Hawk ${ok},\t`, true],
    ['Hawk\u00a0id="a",\u00a0ts="1" ,nonce="n",\tmac="m"', true],
    ['Hawk\nid="a", ts="1", nonce="n", mac="m"', true],
    [`Hawk ${ok}, ext=""`, false],
    ['Hawk id="a",\nts="1", nonce="n", mac="m"', false],
    [`Hawk ${ok},,`, false],
  ];
  for (const [h, accepted] of cases) {
    assert.equal(reference(h) !== null, accepted, `reference on ${JSON.stringify(h)}`);
    assert.equal(outcome(() => parseHawkHeader(h), [BadRequest, Unauthorized], h) !== undefined, accepted, `ours on ${JSON.stringify(h)}`);
  }
});
