// Where the MongoDB tests find a server, each as a URL or the reason its tests
// are skipped:
//  - the MongoDB-compatible server (scripts/compat-mongo.sh) that
//    scripts/test.sh starts and passes as MONGODB_URL, or any MongoDB a
//    developer points MONGODB_URL at;
//  - MongoDB in a container through testcontainers, where a container engine answers: the
//    real mongo:7, or where it cannot be had, the local stand-in of scripts/images.sh.
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
  /**
   * Tests this server fails where MongoDB's documented behaviour is otherwise, by title: why.
   * Each is skipped there with that reason printed; the other servers still run it.
   */
  deviations?: Readonly<Record<string, string>>;
}

const SINGLE_DOCUMENT_ATOMICITY =
  'FerretDB 1.24 (SQLite backend) applies concurrent writes to one document without isolation; MongoDB documents every ' +
  'single-document write as atomic ("Atomicity and Transactions"), which mongo-java-server and mongo:7 show here';

const UNORDERED_BULK =
  'FerretDB 1.24 stops an unordered bulk write at its first write error and reports it as index 0; MongoDB runs the ' +
  'other operations of an unordered bulk write and gives each error the index of its operation (the update command\'s ' +
  'writeErrors). replaceMany then refuses to guess (an InternalError), and LoginBatch decides those logins one by one';

/** Where FerretDB 1.24 is not MongoDB, found by these suites. */
export const FERRETDB_DEVIATIONS: Readonly<Record<string, string>> = {
  'nextUid is unique under 50 parallel calls': `concurrent $inc handed out one value twice: ${SINGLE_DOCUMENT_ATOMICITY}`,
  'two stores on one database never share a uid and see each other’s inserts': `concurrent $inc handed out one value twice: ${SINGLE_DOCUMENT_ATOMICITY}`,
  'parallel replaces from the same version: exactly one wins and its record is stored': `two updates guarded by the same version both matched: ${SINGLE_DOCUMENT_ATOMICITY}`,
  'racing purgers and logins: each replaced record is deleted once, by its claimant; no live record is lost': `two updates guarded by the same version both matched: ${SINGLE_DOCUMENT_ATOMICITY}`,
  'LoginBatch racing itself and single logins on one user: every answer is a stored state, the newest generation wins': `two updates guarded by the same version both matched: ${SINGLE_DOCUMENT_ATOMICITY}`,
  'replaceMany writes where the guard holds, refuses where it lost or the record is missing, and says which': UNORDERED_BULK,
  'replaceMany with two writes of one record from the same version makes exactly one': UNORDERED_BULK,
  'parallel replaceMany and replace from the same version: exactly one write of the record is made': UNORDERED_BULK,
  'counts gives live, replaced and unreleased replaced records per (service, node)':
    "FerretDB 1.24's $unwind drops the document's other fields; MongoDB's $unwind outputs the input document with the array " +
    'field replaced by each element (its $unwind reference), as the other servers do here',
};

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

/** How long dropping a suite's databases may take: cleanup is best effort and must never hold the test run. */
const DROP_MS = 30_000;

async function dropCreated(url: string): Promise<void> {
  const names = created.get(url);
  created.delete(url);
  if (!names || names.size === 0) return;
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 2000 });
  try {
    const drops = (async () => {
      for (const name of names) await client.db(name).dropDatabase();
    })();
    await withTimeout(drops, DROP_MS, `dropping ${names.size} test databases`);
  } catch {
    // Best effort: the server may be gone already (outage tests, a stopped container).
  } finally {
    // force: a server that did not answer the drops leaves operations in flight.
    await client.close(true);
  }
}

/** The server an environment variable names, or a target that skips with `unset` as the reason. */
function envTarget(variable: string, name: string, unset: string, deviations?: Readonly<Record<string, string>>): MongoTarget {
  const url = process.env[variable]?.trim() || null;
  return {
    name,
    url,
    skipReason: url ? '' : unset,
    stop: () => (url ? dropCreated(url) : Promise.resolve()),
    deviations,
  };
}

/** The server MONGODB_URL names (scripts/test.sh sets it when the compatible server is installed). */
export function envMongo(): MongoTarget {
  return envTarget(
    'MONGODB_URL',
    'mongodb (MONGODB_URL)',
    'MONGODB_URL is not set: install the MongoDB-compatible server with `bash scripts/compat-mongo.sh install` ' +
      '(npm test then starts it), or point MONGODB_URL at a MongoDB',
  );
}

/** FerretDB, the second MongoDB-compatible server, at FERRETDB_URL (scripts/test.sh sets it when it is built). */
export function envFerret(): MongoTarget {
  return envTarget(
    'FERRETDB_URL',
    'ferretdb (FERRETDB_URL)',
    'FERRETDB_URL is not set: build FerretDB with `bash scripts/compat-ferretdb.sh install` (Go; npm test then starts it)',
    FERRETDB_DEVIATIONS,
  );
}

/** A started container's target: stop() drops the databases handed out, then removes what was started. */
function containerTarget(name: string, url: string, stopContainer: () => Promise<void>): MongoTarget {
  return {
    name,
    url,
    skipReason: '',
    stop: async () => {
      await dropCreated(url);
      await stopContainer();
    },
  };
}

/** The local stand-in for mongo:7 that scripts/images.sh builds where no image registry answers. */
const MONGO_STANDIN = process.env.MONGO_STANDIN_IMAGE?.trim() || 'tokenserver-standin/mongo-compat:7';

/**
 * MongoDB in a container through testcontainers, on the engine at DOCKER_HOST: the real mongo:7
 * when the engine has it (or can pull it), else the local stand-in (the MongoDB-compatible
 * server of tools/compat-mongo; scripts/images.sh). The target's name says which image ran.
 * Resolves quickly with a skip reason when no container engine answers; testcontainers is
 * loaded only here, since it is slow to import.
 */
export async function containerMongo(): Promise<MongoTarget> {
  const unavailable = (name: string, why: string): MongoTarget => ({ name, url: null, skipReason: why, stop: async () => {} });
  // Ryuk, testcontainers' reaper, is an image that no registry we reach can give us: it is
  // disabled, and each target stops its own container (stop(), from the suites' after hooks).
  process.env.TESTCONTAINERS_RYUK_DISABLED ??= 'true';
  let tc: typeof import('testcontainers');
  let client: Awaited<ReturnType<typeof import('testcontainers').getContainerRuntimeClient>>;
  try {
    tc = await import('testcontainers');
    client = await withTimeout(tc.getContainerRuntimeClient(), ENGINE_DETECT_MS, 'the container engine');
  } catch (err) {
    return unavailable('mongo:7 (testcontainers)', `no container engine answers (${(err as Error).message})`);
  }
  const has = (image: string) => client.image.exists(tc.ImageName.fromString(image)).catch(() => false);
  const useStandin = !(await has('mongo:7')) && (await has(MONGO_STANDIN));
  if (useStandin) {
    const name = `${MONGO_STANDIN} (testcontainers; stand-in for mongo:7)`;
    try {
      // A network of its own: an engine started by scripts/engine.sh has no default bridge.
      const network = await new tc.Network().start();
      const container = await withTimeout(
        new tc.GenericContainer(MONGO_STANDIN)
          .withNetwork(network)
          .withExposedPorts(27017)
          // The launcher prints this once the server accepts connections.
          .withWaitStrategy(tc.Wait.forLogMessage(/^listening 27017$/m))
          .withStartupTimeout(CONTAINER_START_MS)
          .start(),
        CONTAINER_START_MS,
        MONGO_STANDIN,
      );
      return containerTarget(name, `mongodb://${container.getHost()}:${container.getMappedPort(27017)}/`, async () => {
        await container.stop();
        await network.stop();
      });
    } catch (err) {
      return unavailable(name, `a container engine answers but ${MONGO_STANDIN} did not start (${(err as Error).message})`);
    }
  }
  const name = 'mongo:7 (testcontainers)';
  try {
    const { MongoDBContainer } = await import('@testcontainers/mongodb');
    const container = await withTimeout(new MongoDBContainer('mongo:7').start(), CONTAINER_START_MS, 'mongo:7');
    // The container runs a one-member replica set known by an internal host name.
    const server = withDatabase(container.getConnectionString(), '');
    return containerTarget(name, `${server}${server.includes('?') ? '&' : '?'}directConnection=true`, () => container.stop().then(() => undefined));
  } catch (err) {
    return unavailable(
      name,
      `a container engine answers but mongo:7 did not start, and it has no ${MONGO_STANDIN} (bash scripts/images.sh standins) (${(err as Error).message})`,
    );
  }
}
