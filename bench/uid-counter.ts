// How many uids per second the one uid counter document hands out: nextUid
// (one findOneAndUpdate $inc on counters/uid) called in sequence and with
// several calls in flight, beside a ping in sequence (the round trip alone).
//
//   npx tsx bench/uid-counter.ts [calls]     (default 5000 per row; MONGODB_URL, else the compatible server)
//
// Against the compatible server (mongo-java-server) this is an in-memory
// engine on loopback, not MongoDB: no journal, no replication. docs/scaling.md
// reasons from it to a replica set with majority writes.
import { randomBytes } from 'node:crypto';
import { MongoClient } from 'mongodb';
import { parseMongoUrl } from '../lib/mongo.js';
import { MongoUserStore } from '../services/directory/store-mongo.js';
import { mongoServer, withDatabase } from './mongo-server.js';

const calls = Number(process.argv[2] ?? 5000);

async function timed(label: string, n: number, inFlight: number, op: () => Promise<unknown>): Promise<void> {
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < n) {
      next += 1;
      await op();
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const ms = performance.now() - started;
  const perSecond = Math.round((n / ms) * 1000);
  console.log(`| ${label} | ${inFlight} | ${n} | ${perSecond} | ${((ms / n) * inFlight).toFixed(3)} |`);
}

async function main(): Promise<void> {
  const server = mongoServer();
  if ('skip' in server) {
    console.log(`skipped: ${server.skip}`);
    return;
  }
  const url = withDatabase(server.url, `bench_uid_${randomBytes(3).toString('hex')}`);
  const store = await MongoUserStore.open(url);
  const client = await new MongoClient(server.url).connect();
  try {
    const db = client.db(parseMongoUrl(url).database);
    // Warm both paths (JIT, connection pool) before the measured rows.
    for (let i = 0; i < 500; i++) await store.nextUid();
    for (let i = 0; i < 500; i++) await db.command({ ping: 1 });
    console.log('| operation | in flight | calls | per second | mean ms per call |');
    console.log('|---|---|---|---|---|');
    await timed('ping (round trip alone)', calls, 1, () => db.command({ ping: 1 }));
    for (const inFlight of [1, 8, 32, 128]) await timed('nextUid', calls, inFlight, () => store.nextUid());
    const { value } = await store.uidCounter();
    // Every call handed out one uid: the counter moved by exactly the calls made.
    const expected = 500 + calls * 4;
    if (value !== expected) throw new Error(`the counter is at ${value}, expected ${expected}`);
    await db.dropDatabase();
  } finally {
    await client.close();
    await store.close();
    server.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
