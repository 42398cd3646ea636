// The login service as production runs it: its entry point (services/login/index.ts)
// in a process of its own, LOGIN_WORKERS and all, against directory and
// nodeassign on loopback; its JSON log lines collected for the test to read.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Env } from '../../lib/config.js';
import type { DevIdp } from '../../lib/idp.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** One JSON log line. */
export type LogLine = Record<string, any> & { msg: string; pid: number; worker?: number };

export interface LoginProcess {
  pid: number;
  url: string;
  /** The primary's /metrics, when LOGIN_METRICS_PORT is set. */
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

/** A TRUSTED_ISSUERS file in `dir` trusting `idp` for any domain. */
export function trustedIssuersFile(dir: string, idp: DevIdp): string {
  const file = path.join(dir, 'trusted-issuers.json');
  writeFileSync(file, JSON.stringify(Object.fromEntries([...idp.trustedIssuers].map(([issuer, t]) => [issuer, { keys: t.keys, domains: t.domains }]))));
  return file;
}

/** Starts login with `env` (LOGIN_PORT 0 unless set) and resolves once it logs "login listening". */
export function startLoginProcess(env: Env): Promise<LoginProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'services/login/index.ts'], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', LOGIN_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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
        reject(new Error(`login exited; stderr: ${stderr}`));
      });
    });
  const running: Omit<LoginProcess, 'url' | 'metricsUrl'> = {
    pid: child.pid!,
    lines,
    waitFor,
    signal: (name) => child.kill(name),
    exited,
    stop: async () => {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const r = await exited;
      clearTimeout(timer);
      return r;
    },
  };
  return waitFor((l) => l.msg === 'login listening').then(
    (l) => ({ ...running, url: `http://127.0.0.1:${l.port}`, metricsUrl: l.metricsPort ? `http://127.0.0.1:${l.metricsPort}/metrics` : undefined }),
    (err: Error) => {
      child.kill('SIGKILL');
      throw err;
    },
  );
}
