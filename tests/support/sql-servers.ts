// Throwaway PostgreSQL and MariaDB servers for tests that read another
// system's database (cli import): Debian's packages (`.ci/run` installs them),
// each started from a temp folder on a loopback port and removed at stop.
// Without the binaries a start answers with the reason to skip.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from './services.js';

export interface SqlServer {
  /** What the server is, for test names. */
  name: string;
  /** A database for the test, reachable over TCP on loopback, with a password where the server checks one. */
  url: string;
  /** The process started for the server (as root, `runuser` around PostgreSQL): its descendants are the server's processes (benchmarks count their CPU). */
  pid: number;
  /** Runs SQL as the database's owner; `?` placeholders on MariaDB, `$1` on PostgreSQL. */
  query(sql: string, params?: unknown[]): Promise<Array<Record<string, unknown>>>;
  /** Another, empty database on the same server (`name`: letters, digits, `_`), with the same owner; closed at stop. */
  database(name: string): Promise<Omit<SqlServer, 'database' | 'stop' | 'pid'>>;
  stop(): Promise<void>;
}

function databaseName(name: string): string {
  if (!/^[a-z][a-z0-9_]*$/.test(name)) throw new Error(`not a database name: ${name}`);
  return name;
}

/** `url` naming database `name` instead. */
function urlOf(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

export type Started = { server: SqlServer } | { skip: string };

const START_MS = 60_000;
const isRoot = process.getuid?.() === 0;

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: START_MS });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr || r.stdout || r.error?.message}`);
}

/** Retries `attempt` until it succeeds or the server process exits or time runs out. */
async function waitFor<T>(what: string, child: ChildProcess, log: () => string, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + START_MS;
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${what} did not start: ${(err as Error).message}\n${log()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** Sends `signal` to the server (by default the child itself) and waits for the child to exit. */
function stopChild(child: ChildProcess, signal: NodeJS.Signals, signalServer: () => unknown = () => child.kill(signal)): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    signalServer();
  });
}

function spawnServer(cmd: string, args: string[]): { child: ChildProcess; log: () => string } {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer) => (out = (out + d.toString()).slice(-4000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { child, log: () => out };
}

// ---- PostgreSQL ----

function postgresBin(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? path.join(root, versions[0], 'bin') : null;
}

/** PostgreSQL refuses to run as root: as root the server runs as the `postgres` user the package made. */
function asPostgresUser(cmd: string, args: string[]): [string, string[]] {
  return isRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
}

export async function startPostgres(): Promise<Started> {
  const bin = postgresBin();
  if (!bin) return { skip: 'PostgreSQL is not installed (/usr/lib/postgresql/*/bin; `apt-get install postgresql`, as .ci/run does)' };
  const dir = mkdtempSync(path.join(tmpdir(), 'pg-test-'));
  if (isRoot) {
    const ids = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    if (ids.status !== 0) return { skip: 'running as root and there is no `postgres` user to run PostgreSQL as' };
    chownSync(dir, Number(ids.stdout.trim()), -1);
  }
  const data = path.join(dir, 'data');
  const { default: pg } = await import('pg');
  let child: ChildProcess | undefined;
  // runuser does not pass SIGINT on: the postmaster's own pid (first line of postmaster.pid) gets it.
  const fastShutdown = () => {
    const pidFile = path.join(data, 'postmaster.pid');
    if (existsSync(pidFile)) process.kill(Number(readFileSync(pidFile, 'utf8').split('\n')[0]), 'SIGINT');
    else child?.kill('SIGINT');
  };
  try {
    run(...asPostgresUser(path.join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions']));
    const port = await freePort();
    const server = spawnServer(
      ...asPostgresUser(path.join(bin, 'postgres'), ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off']),
    );
    child = server.child;
    const admin = `postgres://postgres@127.0.0.1:${port}/postgres`;
    await waitFor('PostgreSQL', server.child, server.log, async () => {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      await c.query('CREATE DATABASE tokenserver');
      await c.end();
    });
    const url = `postgres://postgres:${randomBytes(8).toString('hex')}@127.0.0.1:${port}/tokenserver`;
    const owner = new pg.Client({ connectionString: url });
    await owner.connect();
    const started = server.child;
    const others: Array<InstanceType<typeof pg.Client>> = [];
    return {
      server: {
        name: 'PostgreSQL',
        url,
        pid: started.pid!,
        query: async (sql, params) => (await owner.query(sql, params)).rows,
        async database(name) {
          await owner.query(`CREATE DATABASE ${databaseName(name)}`);
          const other = new pg.Client({ connectionString: urlOf(url, name) });
          await other.connect();
          others.push(other);
          return { name: 'PostgreSQL', url: urlOf(url, name), query: async (sql, params) => (await other.query(sql, params)).rows };
        },
        async stop() {
          for (const other of others) await other.end().catch(() => undefined);
          await owner.end().catch(() => undefined);
          // SIGINT: PostgreSQL's fast shutdown.
          await stopChild(started, 'SIGINT', fastShutdown);
          rmSync(dir, { recursive: true, force: true });
        },
      },
    };
  } catch (err) {
    if (child) await stopChild(child, 'SIGINT', fastShutdown);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

// ---- MariaDB ----

function findBinary(name: string): string | null {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/bin']) {
    if (dir && existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  return null;
}

export async function startMariadb(): Promise<Started> {
  const mariadbd = findBinary('mariadbd');
  const installDb = findBinary('mariadb-install-db');
  if (!mariadbd || !installDb) return { skip: 'MariaDB is not installed (mariadbd, mariadb-install-db; `apt-get install mariadb-server`, as .ci/run does)' };
  const dir = mkdtempSync(path.join(tmpdir(), 'mariadb-test-'));
  const data = path.join(dir, 'data');
  const socket = path.join(dir, 'mysqld.sock');
  // mariadbd refuses root unless told to run as it.
  const user = isRoot ? ['--user=root'] : [];
  const { default: mysql } = await import('mysql2/promise');
  let child: ChildProcess | undefined;
  try {
    run(installDb, ['--no-defaults', `--datadir=${data}`, '--auth-root-authentication-method=normal', '--skip-test-db', ...user]);
    const port = await freePort();
    const server = spawnServer(mariadbd, [
      '--no-defaults',
      `--datadir=${data}`,
      `--socket=${socket}`,
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      `--pid-file=${path.join(dir, 'mysqld.pid')}`,
      '--skip-log-bin',
      '--innodb-buffer-pool-size=32M',
      '--innodb-flush-log-at-trx-commit=0',
      ...user,
    ]);
    child = server.child;
    const password = randomBytes(12).toString('hex');
    await waitFor('MariaDB', server.child, server.log, async () => {
      const root = await mysql.createConnection({ socketPath: socket, user: 'root' });
      try {
        await root.query('CREATE DATABASE IF NOT EXISTS tokenserver');
        await root.query("CREATE USER IF NOT EXISTS 'tokenserver'@'127.0.0.1' IDENTIFIED BY ?", [password]);
        // Every database: tests make more (database()).
        await root.query("GRANT ALL ON *.* TO 'tokenserver'@'127.0.0.1'");
      } finally {
        await root.end();
      }
    });
    const url = `mysql://tokenserver:${password}@127.0.0.1:${port}/tokenserver`;
    const owner = await mysql.createConnection({ uri: url, multipleStatements: true });
    const started = server.child;
    const querier = (conn: typeof owner) => async (sql: string, params?: unknown[]) => {
      const [rows] = await conn.query(sql, params);
      return Array.isArray(rows) ? (rows as Array<Record<string, unknown>>) : [];
    };
    const others: Array<typeof owner> = [];
    return {
      server: {
        name: 'MariaDB',
        url,
        pid: started.pid!,
        query: querier(owner),
        async database(name) {
          // utf8mb4: a test's rows may carry any Unicode (the server's default is latin1).
          await owner.query(`CREATE DATABASE ${databaseName(name)} CHARACTER SET utf8mb4`);
          const other = await mysql.createConnection({ uri: urlOf(url, name), multipleStatements: true });
          others.push(other);
          return { name: 'MariaDB', url: urlOf(url, name), query: querier(other) };
        },
        async stop() {
          for (const other of others) await other.end().catch(() => undefined);
          await owner.end().catch(() => undefined);
          await stopChild(started, 'SIGTERM');
          rmSync(dir, { recursive: true, force: true });
        },
      },
    };
  } catch (err) {
    if (child) await stopChild(child, 'SIGTERM');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
