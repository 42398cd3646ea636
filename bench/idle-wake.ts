// What an idle core costs the next request: the same RS256 check (an access
// token's, node:crypto on one imported key) timed back to back, with an
// event-loop turn between checks, and with the thread asleep between checks,
// as a server is between requests at part load.
// On a virtual machine the last can cost twice the first (most likely the core's caches
// and clock after a sleep); that is why CPU per login in a paced window is
// higher than in a closed loop, for every server measured that way.
//
//   npx tsx bench/idle-wake.ts [idle ms between checks, default 1] [rounds, default 3]
import { generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto';
import { median } from './proc.js';

const CHECKS = 800;
const idleMs = Number(process.argv[2] ?? 1);
const rounds = Number(process.argv[3] ?? 3);

const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const inputs = Array.from({ length: CHECKS }, () => randomBytes(600).toString('base64url'));
const signatures = inputs.map((m) => sign('sha256', Buffer.from(m), privateKey));
const timed = (i: number): number => {
  const t = process.hrtime.bigint();
  if (!verify('sha256', Buffer.from(inputs[i]), publicKey, signatures[i])) throw new Error('a signature did not verify');
  return Number(process.hrtime.bigint() - t) / 1000;
};
for (let r = 0; r < rounds; r++) {
  const backToBack = inputs.map((_, i) => timed(i));
  const afterTurn: number[] = [];
  for (let i = 0; i < CHECKS; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    afterTurn.push(timed(i));
  }
  const afterIdle: number[] = [];
  for (let i = 0; i < CHECKS; i++) {
    await new Promise((resolve) => setTimeout(resolve, idleMs));
    afterIdle.push(timed(i));
  }
  const [b, t, a] = [median(backToBack), median(afterTurn), median(afterIdle)];
  console.log(
    `round ${r + 1}: RS256 check back to back ${b.toFixed(1)} µs, after an event-loop turn ${t.toFixed(1)} µs, ` +
      `after ${idleMs} ms asleep ${a.toFixed(1)} µs (medians of ${CHECKS}; asleep / back to back ${(a / b).toFixed(2)} ×)`,
  );
}
