import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { MongoClient, MongoNetworkError, MongoServerError, MongoTopologyClosedError } from 'mongodb';
import { ConfigError, ServiceUnavailable } from './errors.js';
import { clientOptions, DEFAULT_DATABASE, isDuplicateKey, isUnavailable, mongoCall, openMongo, parseMongoUrl } from './mongo.js';
import { MongoUserStore } from '../services/directory/store-mongo.js';
import { envMongo } from '../tests/support/mongo.js';

test('parseMongoUrl: the database comes from the path, default tokenserver; options stay with the server', () => {
  assert.deepEqual(parseMongoUrl('mongodb://db:27017/users'), { server: 'mongodb://db:27017/', database: 'users' });
  assert.deepEqual(parseMongoUrl('mongodb://db:27017/'), { server: 'mongodb://db:27017/', database: DEFAULT_DATABASE });
  assert.deepEqual(parseMongoUrl('mongodb://db:27017'), { server: 'mongodb://db:27017/', database: DEFAULT_DATABASE });
  assert.deepEqual(parseMongoUrl('mongodb://u:p%40ss@a:1,b:2/ts?replicaSet=rs0&w=majority'), {
    server: 'mongodb://u:p%40ss@a:1,b:2/?replicaSet=rs0&w=majority',
    database: 'ts',
  });
  assert.deepEqual(parseMongoUrl('mongodb+srv://cluster.example.com/prod?retryWrites=true'), {
    server: 'mongodb+srv://cluster.example.com/?retryWrites=true',
    database: 'prod',
  });
  assert.deepEqual(parseMongoUrl('mongodb://h?authSource=admin'), { server: 'mongodb://h/?authSource=admin', database: DEFAULT_DATABASE });
  assert.equal(parseMongoUrl('mongodb://h/my%2Ddb').database, 'my-db');
});

test('parseMongoUrl: a malformed URL or database name is a ConfigError naming STORE_URL', () => {
  for (const bad of ['sqlite:/x', 'mongodb://', 'mongodb:///db', 'mongodb://h/a.b', 'mongodb://h/a%2Fb', 'mongodb://h/%zz', `mongodb://h/${'x'.repeat(64)}`]) {
    assert.throws(
      () => parseMongoUrl(bad),
      (e: unknown) => e instanceof ConfigError && e.variable === 'STORE_URL',
      bad,
    );
  }
});

test('clientOptions: short timeouts unless the URL sets them', () => {
  const defaults = clientOptions('mongodb://h/');
  assert.equal(defaults.serverSelectionTimeoutMS, 2000);
  assert.equal(defaults.connectTimeoutMS, 2000);
  const given = clientOptions('mongodb://h/?serverSelectionTimeoutMS=30000&ConnectTimeoutMS=5000');
  assert.equal(given.serverSelectionTimeoutMS, undefined, 'left to the URL');
  assert.equal(given.connectTimeoutMS, undefined, 'option names are case-insensitive');
  assert.equal(given.socketTimeoutMS, 10_000);
});

test('clientOptions: majority, journaled writes and primary reads unless the URL sets them; they reach the driver', async () => {
  const defaults = clientOptions('mongodb://h/');
  assert.deepEqual([defaults.w, defaults.journal, defaults.readPreference], ['majority', true, 'primary']);
  const given = clientOptions('mongodb://h/?w=1&J=false&readPreference=secondaryPreferred');
  assert.deepEqual([given.w, given.journal, given.readPreference], [undefined, undefined, undefined], 'left to the URL (j is journal)');
  const client = new MongoClient('mongodb://127.0.0.1:1/', clientOptions('mongodb://127.0.0.1:1/'));
  assert.deepEqual({ w: client.writeConcern?.w, journal: client.writeConcern?.journal }, { w: 'majority', journal: true });
  assert.equal(client.readPreference.mode, 'primary');
  const url = 'mongodb://127.0.0.1:1/?w=2&journal=false';
  const overridden = new MongoClient(url, clientOptions(url));
  assert.deepEqual({ w: overridden.writeConcern?.w, journal: overridden.writeConcern?.journal }, { w: 2, journal: false });
  await Promise.all([client.close(), overridden.close()]);
});

test('isUnavailable: network and shutdown errors (server selection: see the open test below); not request errors', () => {
  assert.equal(isUnavailable(new MongoNetworkError('connection reset')), true);
  assert.equal(isUnavailable(new MongoTopologyClosedError()), true);
  assert.equal(isUnavailable(new MongoServerError({ message: 'shutting down', code: 91 })), true);
  assert.equal(isUnavailable(new MongoServerError({ message: 'not primary', code: 10107 })), true);
  const labelled = new MongoServerError({ message: 'x', code: 1 });
  labelled.addErrorLabel('RetryableWriteError');
  assert.equal(isUnavailable(labelled), true);
  assert.equal(isUnavailable(new MongoServerError({ message: 'dup', code: 11000 })), false);
  assert.equal(isUnavailable(new MongoServerError({ message: 'bad', code: 2 })), false);
  assert.equal(isUnavailable(new Error('plain')), false);
  assert.equal(isUnavailable(undefined), false);
});

test('isDuplicateKey: only a server error with code 11000', () => {
  assert.equal(isDuplicateKey(new MongoServerError({ message: 'dup', code: 11000 })), true);
  assert.equal(isDuplicateKey(new MongoServerError({ message: 'other', code: 11001 })), false);
  assert.equal(isDuplicateKey({ code: 11000 }), false);
});

test('mongoCall: unreachable → ServiceUnavailable (503, Retry-After); other errors pass unchanged', async () => {
  const err = await mongoCall(() => Promise.reject(new MongoNetworkError('gone'))).catch((e: unknown) => e);
  assert.ok(err instanceof ServiceUnavailable);
  assert.equal(err.status, 503);
  assert.ok(err.headers['Retry-After']);
  const other = new MongoServerError({ message: 'bad', code: 2 });
  assert.equal(await mongoCall(() => Promise.reject(other)).catch((e: unknown) => e), other);
  assert.equal(await mongoCall(async () => 7), 7);
});

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test('opening a store on a database that does not answer fails with ServiceUnavailable', async () => {
  const url = `mongodb://127.0.0.1:${await closedPort()}/x?serverSelectionTimeoutMS=300`;
  await assert.rejects(MongoUserStore.open(url), ServiceUnavailable);
  // The failed client is not cached: a second open tries again (and fails the same way).
  await assert.rejects(openMongo(url), ServiceUnavailable);
});

// Seen under a burst of logins after replicas restarted: the directory's pool had no free connection within
// waitQueueTimeoutMS, and the driver's error (named MongoWaitQueueTimeoutError, not the class's own name) was
// answered as a 500 instead of 503 + Retry-After.
test('mongoCall: no free connection in the pool within waitQueueTimeoutMS → ServiceUnavailable (a real server, a pool of one)', async (t) => {
  const mongo = envMongo();
  if (!mongo.url) return t.skip(mongo.skipReason);
  const client = new MongoClient(mongo.url, { maxPoolSize: 1, waitQueueTimeoutMS: 1, serverSelectionTimeoutMS: 5000 });
  try {
    const db = client.db('admin');
    const outcomes = await Promise.allSettled(Array.from({ length: 200 }, () => mongoCall(() => db.command({ ping: 1 }))));
    const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as Error] : []));
    assert.ok(refused.length > 0, 'some pings waited longer than 1 ms for the one connection');
    for (const err of refused) assert.ok(err instanceof ServiceUnavailable, `${err.name}: ${err.message}`);
  } finally {
    await client.close();
    await mongo.stop();
  }
});
