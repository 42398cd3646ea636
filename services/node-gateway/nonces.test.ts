import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { fingerprint, NonceCache, tokenKey } from './nonces.js';

const T0 = 1_700_000_000; // seconds
const ms = (seconds: number): number => seconds * 1000;
const limits = { capacity: 100, perToken: 10, skewSeconds: 60 };

test('a nonce is accepted once per (token, ts)', () => {
  const cache = new NonceCache(limits, ms(T0));
  const ts = String(T0);
  assert.equal(cache.add('id', 'n1', ts, ms(T0)), 'new');
  assert.equal(cache.add('id', 'n1', ts, ms(T0) + 1), 'replayed');
  assert.equal(cache.add('id', 'n1', String(T0 + 1), ms(T0)), 'new', 'another ts');
  assert.equal(cache.add('other', 'n1', ts, ms(T0)), 'new', 'another token');
  assert.equal(cache.add('id', 'n2', ts, ms(T0)), 'new', 'another nonce');
  assert.equal(cache.size, 4);
});

test('keys: tokens told apart by their tail; nonces by a 64-bit fingerprint, long ones too', () => {
  const id = 'x'.repeat(300) + 'SIGNATURE-tail-of-the-token-id-0==';
  assert.equal(tokenKey(id), id.slice(-32));
  assert.notEqual(tokenKey(id), tokenKey(id.replace('tail', 'tall')));
  assert.deepEqual(fingerprint('abc'), fingerprint('abc'));
  assert.notDeepEqual(fingerprint('abc'), fingerprint('abd'));
  assert.notDeepEqual(fingerprint(''), fingerprint('\0'));
  const long = 'n'.repeat(4000);
  assert.notDeepEqual(fingerprint(long), fingerprint(long + 'm'));
  // No two of many nonces of one token and second are taken for each other.
  const cache = new NonceCache({ capacity: 200_000, perToken: 200_000, skewSeconds: 60 }, ms(T0));
  for (let i = 0; i < 100_000; i++) assert.equal(cache.add('id', `nonce-${i}`, String(T0), ms(T0)), 'new');
  for (let i = 0; i < 100_000; i += 997) assert.equal(cache.add('id', `nonce-${i}`, String(T0), ms(T0)), 'replayed');
});

test('a nonce takes a few dozen bytes, not hundreds (a busy gateway keeps ~1M)', () => {
  // In a process of its own, so that no other test's heap is counted, with a full GC before each reading.
  const perNonce = Number(
    execFileSync(process.execPath, ['--import', 'tsx', '--expose-gc', '--input-type=module', '-e', `
      import { NonceCache } from ${JSON.stringify(fileURLToPath(new URL('./nonces.ts', import.meta.url)))};
      const T0 = ${T0};
      const n = 300_000;
      // 3000 tokens, 100 nonces each, over 60 seconds: the shape of many users' traffic.
      // The strings are made first, so that only what the cache keeps is counted.
      const ids = Array.from({ length: 3000 }, (_, t) => \`token-\${t}\`.padStart(40, 'x'));
      const nonces = Array.from({ length: n }, (_, i) => \`\${i.toString(36)}abcdefghijk\`);
      const seconds = Array.from({ length: 60 }, (_, s) => String(T0 + s));
      // Array buffers outgrown by the ring are freed by V8's background sweeper after gc(): give it a moment
      // (on a loaded machine a single gc() read 73 bytes here, where the cache keeps 41).
      const used = async () => {
        for (let i = 0; i < 3; i++) { gc(); await new Promise((r) => setTimeout(r, 100)); }
        const m = process.memoryUsage();
        return m.heapUsed + m.arrayBuffers;
      };
      const before = await used();
      const cache = new NonceCache({ capacity: 1_000_000, perToken: 1000, skewSeconds: 60 }, T0 * 1000);
      for (let i = 0; i < n; i++) cache.add(ids[i % 3000], nonces[i], seconds[i % 60], T0 * 1000);
      const after = await used();
      if (cache.size !== n || ids.length + nonces.length + seconds.length !== 3000 + n + 60) throw new Error('not all kept');
      process.stdout.write(String((after - before) / n));
    `], { encoding: 'utf8' }),
  );
  assert.ok(perNonce > 0 && perNonce < 64, `${perNonce.toFixed(0)} bytes per nonce`);
});

test('a timestamp beyond the skew window is refused, not filed where a live second is', () => {
  const cache = new NonceCache(limits, ms(T0));
  assert.equal(cache.add('id', 'n', String(T0 + 61), ms(T0)), 'new');
  assert.throws(() => cache.add('id', 'n', String(T0 + 63), ms(T0)), RangeError);
});

test('a nonce is remembered until its timestamp leaves the skew window, then forgotten', () => {
  const cache = new NonceCache(limits, ms(T0));
  // Signed 60 s in the future: replayable until T0 + 120 s.
  const ts = String(T0 + 60);
  assert.equal(cache.add('id', 'late', ts, ms(T0)), 'new');
  assert.equal(cache.add('id', 'late', ts, ms(T0 + 120) + 999), 'replayed', 'kept through its last second');
  assert.equal(cache.add('id', 'other', String(T0 + 100), ms(T0 + 121)), 'new', 'sweeps');
  assert.equal(cache.size, 1, 'the first one is gone');
  assert.equal(cache.add('id', 'late', ts, ms(T0 + 121)), 'new', 'gone: the timestamp check refuses it by now');
});

test('a nonce whose window already ended is not stored', () => {
  const cache = new NonceCache(limits, ms(T0));
  assert.equal(cache.add('id', 'n', String(T0 - 61), ms(T0)), 'new');
  assert.equal(cache.size, 0);
});

test('a flood fills only the flooder\'s share, and forgets nothing early', () => {
  const cache = new NonceCache(limits, ms(T0));
  const ts = String(T0);
  assert.equal(cache.add('victim', 'captured', ts, ms(T0)), 'new');
  for (let i = 0; i < 10; i++) assert.equal(cache.add('flooder', `f${i}`, ts, ms(T0)), 'new');
  for (let i = 10; i < 1000; i++) assert.equal(cache.add('flooder', `f${i}`, ts, ms(T0)), 'token-full');
  assert.equal(cache.size, 11);
  assert.equal(cache.add('victim', 'captured', ts, ms(T0 + 30)), 'replayed', 'the victim\'s nonce survived the flood');
  assert.equal(cache.add('flooder', 'f0', ts, ms(T0 + 30)), 'replayed', 'and so did the flooder\'s own');
  // Room again once the flooder's nonces leave their window (ts + skew).
  assert.equal(cache.retryAfter('flooder', 'token-full', ms(T0)), 61);
  assert.equal(cache.add('flooder', 'f1000', String(T0 + 61), ms(T0 + 61)), 'new');
});

test('at the global bound every new nonce is refused, never an old one forgotten', () => {
  const cache = new NonceCache({ capacity: 20, perToken: 10, skewSeconds: 60 }, ms(T0));
  for (let t = 0; t < 2; t++) for (let i = 0; i < 10; i++) assert.equal(cache.add(`token${t}`, `n${i}`, String(T0 + t), ms(T0)), 'new');
  assert.equal(cache.add('token2', 'n0', String(T0), ms(T0)), 'cache-full');
  assert.equal(cache.add('token0', 'n0', String(T0), ms(T0)), 'replayed', 'a replay is still a replay');
  assert.equal(cache.size, 20);
  // token0's nonces (ts T0) go first, after T0 + 60.
  assert.equal(cache.retryAfter('token2', 'cache-full', ms(T0 + 10)), 51);
  assert.equal(cache.add('token2', 'n0', String(T0 + 61), ms(T0 + 61)), 'new');
  assert.equal(cache.size, 11);
});

test('retryAfter is at least a second, and a pause longer than the window empties the cache', () => {
  const cache = new NonceCache({ capacity: 5, perToken: 1, skewSeconds: 2 }, ms(T0));
  assert.equal(cache.add('a', 'n', String(T0 - 2), ms(T0)), 'new');
  assert.equal(cache.retryAfter('a', 'token-full', ms(T0)), 1);
  assert.equal(cache.retryAfter('nobody', 'token-full', ms(T0)), 8, 'an unknown token: one whole ring');
  assert.equal(cache.retryAfter('nobody', 'cache-full', ms(T0 + 1)), 8, 'nothing live');
  for (const token of ['b', 'c', 'd']) assert.equal(cache.add(token, 'n', String(T0), ms(T0)), 'new');
  assert.equal(cache.add('x', 'n', String(T0 + 1000), ms(T0 + 1000)), 'new');
  assert.equal(cache.size, 1);
});

// Found missing by mutation testing (npm run mutation -- services/node-gateway/nonces.ts).

test('the same nonce from many tokens in one second is new for each, and a replay for each after', () => {
  // Enough tokens that the second's table grows and its probe chains run through other tokens' entries.
  const cache = new NonceCache({ capacity: 1000, perToken: 10, skewSeconds: 60 }, ms(T0));
  for (let t = 0; t < 300; t++) assert.equal(cache.add(`token-${t}`, 'same', String(T0), ms(T0)), 'new', `token-${t}`);
  for (let t = 0; t < 300; t++) assert.equal(cache.add(`token-${t}`, 'same', String(T0), ms(T0)), 'replayed', `token-${t}`);
});

test('every token keeps its own quota, however many tokens there are', () => {
  // More tokens than the per-token arrays start with (64), so they grow.
  const cache = new NonceCache({ capacity: 10_000, perToken: 3, skewSeconds: 60 }, ms(T0));
  for (let t = 0; t < 200; t++) for (let i = 0; i < 3; i++) assert.equal(cache.add(`token-${t}`, `n${i}`, String(T0), ms(T0)), 'new');
  for (let t = 0; t < 200; t++) assert.equal(cache.add(`token-${t}`, 'n3', String(T0), ms(T0)), 'token-full', `token-${t}`);
  assert.equal(cache.size, 600);
});

test("forgetting one token's second leaves every other nonce of it and of other tokens replayable", () => {
  const cache = new NonceCache(limits, ms(T0));
  assert.equal(cache.add('a', 'early', String(T0), ms(T0)), 'new');
  assert.equal(cache.add('a', 'later', String(T0 + 30), ms(T0)), 'new');
  assert.equal(cache.add('b', 'only', String(T0), ms(T0)), 'new');
  assert.equal(cache.add('c', 'later', String(T0 + 30), ms(T0)), 'new');
  // At T0 + 61 the second T0 + 60 (a's "early", b's "only") is forgotten; a and c keep their T0 + 30 nonces.
  assert.equal(cache.add('a', 'later', String(T0 + 30), ms(T0 + 61)), 'replayed');
  assert.equal(cache.add('c', 'later', String(T0 + 30), ms(T0 + 61)), 'replayed');
  assert.equal(cache.size, 2);
  // b's slot was given up and is taken again by the next new token, whose nonces are its own.
  assert.equal(cache.add('d', 'later', String(T0 + 30), ms(T0 + 61)), 'new');
  assert.equal(cache.add('d', 'later', String(T0 + 30), ms(T0 + 62)), 'replayed');
  assert.equal(cache.add('a', 'later', String(T0 + 30), ms(T0 + 62)), 'replayed');
});

test("token-full: the wait is until the token's earliest nonce leaves, whatever order its timestamps came in", () => {
  const cache = new NonceCache({ capacity: 100, perToken: 2, skewSeconds: 60 }, ms(T0));
  assert.equal(cache.add('a', 'n1', String(T0 + 10), ms(T0)), 'new');
  assert.equal(cache.add('a', 'n2', String(T0), ms(T0)), 'new');
  assert.equal(cache.add('a', 'n3', String(T0), ms(T0)), 'token-full');
  // n2 (ts T0) expires at T0 + 60 and goes once that second is over.
  assert.equal(cache.retryAfter('a', 'token-full', ms(T0)), 61);
});

test('remember: the outcome, with a Retry-After for a refusal only', () => {
  const cache = new NonceCache({ capacity: 2, perToken: 1, skewSeconds: 60 }, ms(T0));
  assert.equal(cache.kind, 'memory');
  assert.deepEqual(cache.remember('a', 'n', String(T0), ms(T0)), { outcome: 'new' });
  assert.deepEqual(cache.remember('a', 'n', String(T0), ms(T0)), { outcome: 'replayed' });
  assert.deepEqual(cache.remember('a', 'm', String(T0), ms(T0)), { outcome: 'token-full', retryAfter: 61 });
  assert.deepEqual(cache.remember('b', 'n', String(T0 + 5), ms(T0)), { outcome: 'new' });
  assert.deepEqual(cache.remember('c', 'n', String(T0), ms(T0 + 10)), { outcome: 'cache-full', retryAfter: 51 });
});

test('the last timestamp the ring can hold apart is now + 2 × skew; one more is refused', () => {
  const cache = new NonceCache(limits, ms(T0));
  assert.equal(cache.add('id', 'n', String(T0 + 60), ms(T0)), 'new');
  assert.equal(cache.add('id', 'm', String(T0 + 61), ms(T0)), 'new');
  assert.throws(() => cache.add('id', 'n', String(T0 + 62), ms(T0)), RangeError);
});

test('two nonces that share one 32-bit hash are still two nonces; the memory store is always healthy', async () => {
  // A birthday search finds two nonces with the same first hash and different second ones.
  const seen = new Map<number, string>();
  let pair: [string, string] | undefined;
  for (let i = 0; !pair && i < 2_000_000; i++) {
    const nonce = `n${i}`;
    const [h1] = fingerprint(nonce);
    const other = seen.get(h1);
    if (other !== undefined && fingerprint(other)[1] !== fingerprint(nonce)[1]) pair = [other, nonce];
    else seen.set(h1, nonce);
  }
  assert.ok(pair, 'a pair sharing the first hash');
  const cache = new NonceCache(limits, ms(T0));
  assert.equal(cache.add('id', pair[0], String(T0), ms(T0)), 'new');
  assert.equal(cache.add('id', pair[1], String(T0), ms(T0)), 'new');
  assert.equal(await cache.healthy(), true);
});
