// Redis memory per million remembered nonces, written exactly as the gateway
// writes them (RedisNonceStore.remember: the script, hashed keys, quota hashes),
// into a throwaway redis-server; the figure is used_memory's growth from INFO.
//
//   npx tsx bench/redis-nonce-memory.ts [count]     (default 1,000,000; ~1 min on 2 cores)
//
// Two shapes: a busy node (count/1000 tokens, 1000 nonces each: one quota hash
// per thousand nonces) and the worst case (every nonce from its own token).
import { logger } from '../lib/log.js';
import { RedisNonceStore } from '../services/node-gateway/redis-nonces.js';
import { redisSkipReason, startRedis } from '../tests/support/redis.js';

const count = Number(process.argv[2] ?? 1_000_000);
const IN_FLIGHT = 2000;
const SKEW = 60;

function usedMemory(info: string): number {
  return Number(/^used_memory:(\d+)/m.exec(info)![1]);
}

async function measure(shape: string, perToken: number): Promise<void> {
  const redis = await startRedis();
  try {
    const store = await RedisNonceStore.open({ kind: 'redis', url: redis.url, timeoutMs: 10_000 }, { perToken, skewSeconds: SKEW, retryAfter: 1 }, logger('bench'));
    const before = usedMemory(String(await redis.command('INFO', 'memory')));
    const now = Date.now();
    // Signed a skew ahead: every nonce lives 2 × skew, longer than the fill takes.
    const ts = String(Math.floor(now / 1000) + SKEW);
    const started = performance.now();
    for (let i = 0; i < count; i += IN_FLIGHT) {
      const batch: Promise<unknown>[] = [];
      for (let j = i; j < Math.min(count, i + IN_FLIGHT); j++) {
        const token = `token-${Math.floor(j / perToken)}`.padEnd(180, 'x');
        batch.push(
          store.remember(token, `nonce-${j.toString(36)}`, ts, now).then((v) => {
            if (v.outcome !== 'new') throw new Error(`nonce ${j}: ${v.outcome}`);
          }),
        );
      }
      await Promise.all(batch);
    }
    const seconds = (performance.now() - started) / 1000;
    const info = String(await redis.command('INFO', 'memory'));
    const keys = Number(await redis.command('DBSIZE'));
    const grown = usedMemory(info) - before;
    console.log(
      `${shape}: ${count.toLocaleString('en')} nonces, ${keys.toLocaleString('en')} keys, ` +
        `${(grown / 2 ** 20).toFixed(1)} MiB (${(grown / count).toFixed(0)} bytes per nonce, ` +
        `${((grown / count) * 1e6 / 2 ** 20).toFixed(0)} MiB per million), ${(count / seconds).toFixed(0)} nonces/s on one connection`,
    );
    await store.close();
  } finally {
    await redis.dispose();
  }
}

const skip = redisSkipReason();
if (skip) {
  console.log(`skipped: ${skip}`);
} else {
  await measure('busy node (1000 nonces per token)', 1000);
  await measure('worst case (one nonce per token)', 1);
}
