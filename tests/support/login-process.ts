// A service as production runs it: its entry point (services/<name>/index.ts,
// or the transpiled copy of it) in a process of its own, configured by the
// environment, against its neighbours on loopback; its JSON log lines
// collected for the test to read. Login runs LOGIN_WORKERS and all.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Env } from '../../lib/config.js';
import type { DevIdp } from '../../lib/idp.js';
import { stopOnExit } from './children.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** One JSON log line. */
export type LogLine = Record<string, any> & { msg: string; pid: number; worker?: number };

/** A service with an entry point at services/<name>/index.ts, which logs "<name> listening" with its port. */
export type ServiceName = 'login' | 'directory' | 'nodeassign' | 'node-gateway';

/** Where the entry points are: the sources through tsx (default), or a transpiled tree (scripts/stack-part.ts buildParts) under plain node. */
export interface ServiceProgram {
  /** Folder holding services/<name>/index.{ts,js}. */
  root: string;
  execArgv: readonly string[];
  extension: '.ts' | '.js';
}

export const SOURCE_PROGRAM: ServiceProgram = { root: ROOT, execArgv: ['--import', 'tsx'], extension: '.ts' };

export interface ServiceProcess {
  pid: number;
  /** http://127.0.0.1:<port> (for the gRPC services too: only the port matters there). */
  url: string;
  port: number;
  /** Login's primary's /metrics, when LOGIN_METRICS_PORT is set. */
  metricsUrl?: string;
  /** Every log line so far. */
  lines: LogLine[];
  /** The first line (so far or to come) that `match` accepts. */
  waitFor(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  signal(name: NodeJS.Signals): void;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
  /** SIGTERM, and the exit. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
}

export type LoginProcess = ServiceProcess;

/** A TRUSTED_ISSUERS file in `dir` trusting `idp` for any domain. */
export function trustedIssuersFile(dir: string, idp: DevIdp): string {
  const file = path.join(dir, 'trusted-issuers.json');
  writeFileSync(file, JSON.stringify(Object.fromEntries([...idp.trustedIssuers].map(([issuer, t]) => [issuer, { keys: t.keys, domains: t.domains }]))));
  return file;
}

/** Starts `name`'s entry point with `env` (over this process's environment) and resolves once it logs "<name> listening". */
export function startServiceProcess(name: ServiceName, env: Env, program: ServiceProgram = SOURCE_PROGRAM): Promise<ServiceProcess> {
  return startProgramProcess(path.join(program.root, 'services', name, `index${program.extension}`), name, env, { execArgv: program.execArgv });
}

/**
 * Starts the program `file` (a service's entry point, or a test's program) as
 * `startServiceProcess` does; it logs "<name> listening". `onLine` sees each
 * line as it comes, before the program listens too.
 */
export function startProgramProcess(file: string, name: string, env: Env, o: { execArgv?: readonly string[]; onLine?: (line: LogLine) => void } = {}): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [...(o.execArgv ?? SOURCE_PROGRAM.execArgv), file], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  stopOnExit(child);
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const lines: LogLine[] = [];
  const watchers = new Set<(line: LogLine) => void>();
  createInterface({ input: child.stdout }).on('line', (text) => {
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      return;
    }
    lines.push(line);
    o.onLine?.(line);
    for (const w of watchers) w(line);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal, stderr })),
  );
  const waitFor = (match: (line: LogLine) => boolean, timeoutMs = 20_000): Promise<LogLine> =>
    new Promise((resolve, reject) => {
      const seen = lines.find(match);
      if (seen) return resolve(seen);
      const timer = setTimeout(() => {
        watchers.delete(watch);
        reject(new Error(`no such log line within ${timeoutMs} ms; stderr: ${stderr}`));
      }, timeoutMs);
      const watch = (line: LogLine) => {
        if (!match(line)) return;
        clearTimeout(timer);
        watchers.delete(watch);
        resolve(line);
      };
      watchers.add(watch);
      void exited.then(() => {
        if (!watchers.has(watch)) return;
        clearTimeout(timer);
        watchers.delete(watch);
        reject(new Error(`${name} exited; stderr: ${stderr}`));
      });
    });
  const running: Omit<ServiceProcess, 'url' | 'port' | 'metricsUrl'> = {
    pid: child.pid!,
    lines,
    waitFor,
    signal: (sig) => child.kill(sig),
    exited,
    stop: async () => {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const r = await exited;
      clearTimeout(timer);
      return r;
    },
  };
  return waitFor((l) => l.msg === `${name} listening`).then(
    (l) => ({
      ...running,
      port: l.port,
      url: `http://127.0.0.1:${l.port}`,
      metricsUrl: l.metricsPort ? `http://127.0.0.1:${l.metricsPort}/metrics` : undefined,
    }),
    (err: Error) => {
      child.kill('SIGKILL');
      throw err;
    },
  );
}

/** Starts login with `env` (LOGIN_PORT 0 unless set) and resolves once it logs "login listening". */
export function startLoginProcess(env: Env): Promise<LoginProcess> {
  return startServiceProcess('login', { LOGIN_PORT: '0', ...env });
}
