// MongoDB plumbing shared by the MongoDB stores: one MongoClient per server
// per process (reference counted, so the users and nodes stores share it),
// the database named by the URL, and the one place that decides which driver
// errors mean "the database is unreachable" (→ ServiceUnavailable, a 503).
import {
  MongoClient,
  MongoError,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  type Collection,
  type Db,
  type Document,
  type IndexDescription,
  type MongoClientOptions,
} from 'mongodb';
import { ConfigError, ServiceUnavailable } from './errors.js';

/** Database used when the URL names none (`mongodb://host/`). */
export const DEFAULT_DATABASE = 'tokenserver';

/**
 * Fail fast while the database is down, so a request gets a 503 within its
 * deadline instead of hanging; the driver reconnects by itself when it returns.
 * A URL option of the same name wins.
 */
export const MONGO_TIMEOUTS: Readonly<Record<string, number>> = {
  serverSelectionTimeoutMS: 2000,
  connectTimeoutMS: 2000,
  socketTimeoutMS: 10_000,
  waitQueueTimeoutMS: 2000,
};

/**
 * DESIGN §12: writes that decide (user creation, compare-and-set, counters,
 * allocation) are acknowledged by a majority, journaled, so a failover never
 * takes back an answer already given; reads go to the primary, which saw them.
 * Each is a URL option of the same name, and the URL's own value wins.
 */
export const MONGO_CONSISTENCY: Readonly<Record<string, string | boolean>> = {
  w: 'majority',
  journal: true,
  readPreference: 'primary',
};

/** URL spellings of the same options (the driver reads `j` as `journal`). */
const SAME_OPTION: Readonly<Record<string, string>> = { j: 'journal' };

export interface MongoUrl {
  /** The URL without the database path: what one client connects to. */
  server: string;
  database: string;
}

/** Splits `mongodb[+srv]://[user@]hosts[/db][?options]` into the server part and the database name. */
export function parseMongoUrl(url: string): MongoUrl {
  const m = /^(mongodb(?:\+srv)?:\/\/[^/?#]+)(\/[^?#]*)?(\?[^#]*)?$/.exec(url);
  if (!m) throw new ConfigError('STORE_URL', 'must look like mongodb://host[:port][,host…][/database][?options]');
  let database: string;
  try {
    database = decodeURIComponent((m[2] ?? '/').slice(1));
  } catch {
    throw new ConfigError('STORE_URL', 'the database name is not valid percent-encoding');
  }
  if (database === '') database = DEFAULT_DATABASE;
  // MongoDB's own limits on database names.
  if (!/^[^/\\. "$*<>:|?]{1,63}$/.test(database)) {
    throw new ConfigError('STORE_URL', `invalid database name ${JSON.stringify(database)}`);
  }
  return { server: `${m[1]}/${m[3] ?? ''}`, database };
}

/** Our timeouts and consistency defaults, except those the URL sets itself. */
export function clientOptions(server: string): MongoClientOptions {
  const query = server.includes('?') ? server.slice(server.indexOf('?') + 1).toLowerCase() : '';
  const given = new Set(query.split('&').map((kv) => kv.split('=')[0]).map((name) => SAME_OPTION[name] ?? name));
  const options: MongoClientOptions = { appName: 'tokenserver' };
  for (const [name, value] of Object.entries({ ...MONGO_TIMEOUTS, ...MONGO_CONSISTENCY })) {
    if (!given.has(name.toLowerCase())) (options as Record<string, unknown>)[name] = value;
  }
  return options;
}

// Server error codes that mean the server is going away or not primary right
// now: worth a retry later, not a bug.
const UNAVAILABLE_CODES = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  50, // MaxTimeMSExpired
  89, // NetworkTimeout
  91, // ShutdownInProgress
  189, // PrimarySteppedDown
  262, // ExceededTimeLimit
  9001, // SocketException
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
]);

/** True when the error says the database cannot be reached (now), rather than that the request was wrong. */
export function isUnavailable(err: unknown): boolean {
  if (!(err instanceof MongoError)) return false;
  if (err instanceof MongoServerError) {
    return (typeof err.code === 'number' && UNAVAILABLE_CODES.has(err.code)) || err.hasErrorLabel('RetryableWriteError');
  }
  return (
    err instanceof MongoNetworkError ||
    err instanceof MongoServerSelectionError ||
    err instanceof MongoTopologyClosedError ||
    err instanceof MongoNotConnectedError ||
    // No connection free in the pool within waitQueueTimeoutMS: the database is saturated, try again. The
    // driver does not export the class; its name is 'MongoWaitQueueTimeoutError' (lib/cmap/errors.js).
    err.name === 'MongoWaitQueueTimeoutError' ||
    err.name === 'MongoOperationTimeoutError'
  );
}

export function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 11000;
}

/** Runs one store operation; an unreachable database becomes ServiceUnavailable, anything else is rethrown. */
export async function mongoCall<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    if (isUnavailable(err)) throw new ServiceUnavailable(`database unavailable: ${(err as Error).message}`);
    throw err;
  }
}

/**
 * Creates the indexes a store needs, if missing. One createIndexes command per index: MongoDB
 * answers a list of existing indexes with "all indexes already exist", but FerretDB 1.24 drops
 * the connection on such a list, and a store opened twice sends it.
 */
export async function ensureIndexes<T extends Document>(collection: Collection<T>, indexes: IndexDescription[]): Promise<void> {
  for (const index of indexes) await collection.createIndexes([index]);
}

interface SharedClient {
  client: MongoClient;
  connected: Promise<unknown>;
  refs: number;
}

const clients = new Map<string, SharedClient>();

export interface MongoHandle {
  db: Db;
  /** Drops this store's reference; the last one closes the client. */
  release(): Promise<void>;
}

/**
 * The database `url` names, on the process-wide client for its server.
 * Rejects with ServiceUnavailable when the server does not answer in time.
 */
export async function openMongo(url: string): Promise<MongoHandle> {
  const { server, database } = parseMongoUrl(url);
  let shared = clients.get(server);
  if (!shared) {
    const client = new MongoClient(server, clientOptions(server));
    shared = { client, connected: client.connect(), refs: 0 };
    clients.set(server, shared);
  }
  const entry = shared;
  entry.refs += 1;
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    entry.refs -= 1;
    if (entry.refs === 0) {
      if (clients.get(server) === entry) clients.delete(server);
      await entry.client.close();
    }
  };
  try {
    await mongoCall(() => entry.connected);
  } catch (err) {
    // A failed connect is not cached: the next open tries again.
    if (clients.get(server) === entry) clients.delete(server);
    await release();
    throw err;
  }
  return { db: entry.client.db(database), release };
}
