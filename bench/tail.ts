// Where the evenly paced p99 goes: for the same paced windows, the latency the
// client sees (counted from when each request was due) against login's own
// time per request (its access line's `ms`, from the first middleware to the
// response). The difference is time before login starts on a request (the
// kernel's and the event loop's queues) and in the client.
//
//   [LOGIN_WORKERS=N] npx tsx bench/tail.ts [rate, default 2250] [rounds, default 3]
// (login as one process unless LOGIN_WORKERS says otherwise)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { buildServices } from './build.js';
import { startLoginStack } from './login.js';
import { runLoad } from './proc.js';

const rate = Number(process.argv[2] ?? 2250);
const rounds = Number(process.argv[3] ?? 3);
buildServices();
const dir = mkdtempSync(path.join(tmpdir(), 'bench-tail-'));
const stack = await startLoginStack(`sqlite:${path.join(dir, 'store.db')}`, { users: 1000, ...(process.env.LOGIN_WORKERS ? { loginEnv: { LOGIN_WORKERS: process.env.LOGIN_WORKERS } } : {}) });
try {
  const loginMs: number[] = [];
  createInterface({ input: stack.login.child.stdout! }).on('line', (line) => {
    try {
      const rec = JSON.parse(line) as { msg?: string; ms?: unknown };
      if (rec.msg === 'request' && typeof rec.ms === 'number') loginMs.push(rec.ms);
    } catch {
      // not a log line
    }
  });
  for (let round = 0; round < rounds; round++) {
    loginMs.length = 0;
    const r = await runLoad({ mode: 'paced', url: stack.url, requestsFile: stack.freshRequests(rate * 5), rate, durationSeconds: 5 });
    const sorted = [...loginMs].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
    console.log(
      `round ${round + 1}: client p50 ${r.latencyP50.toFixed(2)} ms, p99 ${r.latencyP99.toFixed(2)} ms | ` +
        `login's own time p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${sorted[sorted.length - 1]} ms (${sorted.length} requests, ${r.non2xx} not 200)`,
    );
  }
} finally {
  await stack.close();
  rmSync(dir, { recursive: true, force: true });
}
