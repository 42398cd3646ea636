// The benchmarks' load generators (bench/load.ts, run in their own process by
// bench/proc.ts runLoad) against a real HTTP server: what they report must be
// what happened, or every figure built on them is wrong.
//  - paced: latency counted from when a request was due, every answer's status
//    counted, a server closing connections or answering without
//    Content-Length handled (errors, not a hang);
//  - wrk (when installed): each request the next of the list, non-2xx and
//    reuse reported.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { RequestSpec } from '../bench/load.js';
import { runLoad, wrkAvailable } from '../bench/proc.js';

const SLOW_MS = 300;
let server: Server;
let url: string;
let dir: string;
/** The X-Credential of every request the server saw, in order. */
const seen: string[] = [];

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'bench-load-test-'));
  server = createServer((req, res) => {
    seen.push(String(req.headers['x-credential']));
    const answer = (status: number, headers: Record<string, string> = {}) => {
      const body = JSON.stringify({ path: req.url });
      res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...headers });
      res.end(body);
    };
    if (req.url === '/slow') setTimeout(() => answer(200), SLOW_MS);
    else if (req.url === '/refused') answer(401);
    else if (req.url === '/close') answer(200, { Connection: 'close' });
    else if (req.url === '/chunked') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    } else answer(200);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

let files = 0;
function requestsFile(paths: string[]): string {
  const file = path.join(dir, `requests-${files++}.json`);
  const list: RequestSpec[] = paths.map((p, i) => ({ path: p, headers: { 'x-credential': `c${i}` } }));
  writeFileSync(file, JSON.stringify(list));
  return file;
}

test('paced: every request answered and counted, the slow answer among the latencies', async () => {
  seen.length = 0;
  const paths = Array.from({ length: 200 }, (_, i) => (i === 50 ? '/slow' : i % 10 === 3 ? '/refused' : '/fast'));
  const r = await runLoad({ mode: 'paced', url, requestsFile: requestsFile(paths), rate: 200, durationSeconds: 1 });
  assert.equal(r.total, 200);
  assert.equal(r.errors, 0);
  assert.deepEqual(r.statuses, { '200': 180, '401': 20 });
  assert.equal(r.non2xx, 20);
  assert.equal(r.reused, 0);
  // Each credential went out once, in the list's order.
  assert.deepEqual([...seen].sort(), paths.map((_, i) => `c${i}`).sort());
  // The slow answer is among the latencies (they add up to more than it), the typical one is not.
  assert.ok(r.latencyMean * r.total >= SLOW_MS, `mean ${r.latencyMean}`);
  assert.ok(r.latencyP50 < SLOW_MS, `p50 ${r.latencyP50}`);
});

test('paced: a server closing each connection gets new ones; an answer without Content-Length is an error, not a hang', async () => {
  const closing = await runLoad({ mode: 'paced', url, requestsFile: requestsFile(Array(100).fill('/close')), rate: 200, durationSeconds: 0.5, connections: 4 });
  assert.deepEqual(closing.statuses, { '200': 100 });
  assert.equal(closing.errors, 0);
  const chunked = await runLoad({ mode: 'paced', url, requestsFile: requestsFile(Array(20).fill('/chunked')), rate: 100, durationSeconds: 0.2, connections: 4 });
  assert.equal(chunked.errors, 20);
  assert.equal(chunked.total, 0);
});

test('paced: a list shorter than the run is reused, and says so', async () => {
  const r = await runLoad({ mode: 'paced', url, requestsFile: requestsFile(Array(30).fill('/fast')), rate: 100, durationSeconds: 0.5 });
  assert.equal(r.total, 50);
  assert.equal(r.reused, 20);
});

test('wrk: each request the next of the list; non-2xx counted; reuse reported', async (t) => {
  const wrk = wrkAvailable();
  if ('skip' in wrk) return t.skip(wrk.skip);
  seen.length = 0;
  const count = 100_000;
  const r = await runLoad({ mode: 'wrk', url, requestsFile: requestsFile(Array.from({ length: count }, (_, i) => (i % 4 === 0 ? '/refused' : '/fast'))), connections: 4, durationSeconds: 1 });
  assert.ok(r.total > 0 && r.total <= seen.length, `${r.total} answered, ${seen.length} seen`);
  assert.equal(r.errors, 0);
  // Every request went out with a credential of its own while the list lasted.
  assert.equal(new Set(seen).size, Math.min(seen.length, count));
  assert.equal(r.reused, Math.max(0, r.total - count));
  // A quarter refused: wrk counts them, not by status.
  assert.ok(Math.abs(r.non2xx - r.total / 4) <= 5, `${r.non2xx} of ${r.total} not 2xx`);
  assert.equal(r.statuses['200'], r.total - r.non2xx);
  assert.ok(r.cpuSeconds > 0);

  seen.length = 0;
  const short = await runLoad({ mode: 'wrk', url, requestsFile: requestsFile(Array(10).fill('/fast')), connections: 2, durationSeconds: 1 });
  assert.ok(short.total > 10);
  assert.equal(short.reused, short.total - 10);
  assert.deepEqual(new Set(seen), new Set(Array.from({ length: 10 }, (_, i) => `c${i}`)));
});
