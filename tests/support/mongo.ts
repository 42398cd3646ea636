// Where the MongoDB tests find a server, each as a URL or the reason its tests
// are skipped:
//  - the MongoDB-compatible server (scripts/compat-mongo.sh) that
//    scripts/test.sh starts and passes as MONGODB_URL, or any MongoDB a
//    developer points MONGODB_URL at;
//  - a real MongoDB (mongo:7) through testcontainers, where a container engine answers.
// Every test gets its own database on the server (freshDatabase), dropped at the end.
import { randomBytes } from 'node:crypto';
import { MongoClient } from 'mongodb';

export interface MongoTarget {
  /** Label for test names. */
  name: string;
  /** Server URL (no database), or null when unavailable. */
  url: string | null;
  /** Why the tests of this target are skipped (when url is null). */
  skipReason: string;
  /** Stops what was started for this target (the container); drops the databases handed out. */
  stop(): Promise<void>;
}

/** How long the container engine may take to answer before its tests are skipped. */
const ENGINE_DETECT_MS = 10_000;
/** How long pulling and starting mongo:7 may take. */
const CONTAINER_START_MS = 180_000;

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms / 1000} s`)), ms);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** `url` with database `name` (keeping its options). */
export function withDatabase(url: string, name: string): string {
  const m = /^(mongodb(?:\+srv)?:\/\/[^/?#]+)(?:\/[^?#]*)?(\?[^#]*)?$/.exec(url);
  if (!m) throw new Error(`not a MongoDB URL: ${url.replace(/\/\/[^@/]*@/, '//…@')}`);
  return `${m[1]}/${name}${m[2] ?? ''}`;
}

const created = new Map<string, Set<string>>();
let seq = 0;

/** A new, empty database on the target's server; returns its URL. */
export function freshDatabase(target: MongoTarget, label: string): string {
  if (!target.url) throw new Error(`${target.name}: ${target.skipReason}`);
  const name = `t_${label.replace(/[^A-Za-z0-9_]/g, '_').slice(0, 20)}_${process.pid}_${++seq}_${randomBytes(3).toString('hex')}`;
  const names = created.get(target.url) ?? new Set<string>();
  names.add(name);
  created.set(target.url, names);
  return withDatabase(target.url, name);
}

async function dropCreated(url: string): Promise<void> {
  const names = created.get(url);
  created.delete(url);
  if (!names || names.size === 0) return;
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 2000 });
  try {
    for (const name of names) await client.db(name).dropDatabase();
  } catch {
    // Best effort: the server may be gone already (outage tests, a stopped container).
  } finally {
    await client.close();
  }
}

/** The server MONGODB_URL names (scripts/test.sh sets it when the compatible server is installed). */
export function envMongo(): MongoTarget {
  const url = process.env.MONGODB_URL?.trim() || null;
  const target: MongoTarget = {
    name: 'mongodb (MONGODB_URL)',
    url,
    skipReason: url
      ? ''
      : 'MONGODB_URL is not set: install the MongoDB-compatible server with `bash scripts/compat-mongo.sh install` ' +
        '(npm test then starts it), or point MONGODB_URL at a MongoDB',
    stop: () => (url ? dropCreated(url) : Promise.resolve()),
  };
  return target;
}

/**
 * A real MongoDB 7 in a container. Resolves quickly with a skip reason when no
 * container engine answers; testcontainers is loaded only here, since it is slow to import.
 */
export async function containerMongo(): Promise<MongoTarget> {
  const name = 'mongo:7 (testcontainers)';
  const unavailable = (why: string): MongoTarget => ({ name, url: null, skipReason: why, stop: async () => {} });
  let tc: typeof import('testcontainers');
  try {
    tc = await import('testcontainers');
    await withTimeout(tc.getContainerRuntimeClient(), ENGINE_DETECT_MS, 'the container engine');
  } catch (err) {
    return unavailable(`no container engine answers (${(err as Error).message})`);
  }
  try {
    const { MongoDBContainer } = await import('@testcontainers/mongodb');
    const container = await withTimeout(new MongoDBContainer('mongo:7').start(), CONTAINER_START_MS, 'mongo:7');
    // The container runs a one-member replica set known by an internal host name.
    const server = withDatabase(container.getConnectionString(), '');
    const url = `${server}${server.includes('?') ? '&' : '?'}directConnection=true`;
    return {
      name,
      url,
      skipReason: '',
      stop: async () => {
        await dropCreated(url);
        await container.stop();
      },
    };
  } catch (err) {
    return unavailable(`a container engine answers but mongo:7 did not start (${(err as Error).message})`);
  }
}
