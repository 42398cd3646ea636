// `npm start` as a user runs it: scripts/start.ts as a child process on
// ephemeral ports, its own DATA_DIR given by the caller, until it prints its
// banner; stop() is Ctrl-C. The operator CLI beside it, as a process too.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stopOnExit } from './children.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface NpmStart {
  pid: number;
  /** stdout up to the banner. */
  stdout: string;
  /** stdout so far (the services' log lines after the banner too). */
  output(): string;
  /** stderr so far: it arrives on its own pipe, so wait with stderrMatching for what comes after the banner. */
  stderr(): string;
  stderrMatching(re: RegExp): Promise<string>;
  loginUrl: string;
  gatewayUrl: string;
  /** host:port of directory and nodeassign (gRPC), as the banner prints them: what the CLI dials. */
  directoryAddr: string;
  nodeAssignAddr: string;
  stop(): Promise<void>;
}

/** scripts/start.ts until it prints its banner (or exits). */
export function startNpmStart(env: Record<string, string>): Promise<NpmStart> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', LOGIN_PORT: '0', GATEWAY_PORT: '0', DIRECTORY_PORT: '0', NODEASSIGN_PORT: '0', DEMO_APP_PORT: '0', APPLICATIONS: 'sync/1.5', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  stopOnExit(child);
  let stdout = '';
  let stderr = '';
  // 'close': the process has exited and its pipes are drained.
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const stderrMatching = (re: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`stderr never matched ${re}: ${stderr}`)), 10_000);
      const check = () => {
        if (!re.test(stderr)) return;
        clearTimeout(timer);
        resolve(stderr);
      };
      child.stderr.on('data', check);
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`exited before stderr matched ${re}: ${stderr}`));
      });
      check();
    });
  const stop = async () => {
    child.kill('SIGINT');
    await exited;
  };
  return new Promise((resolve, reject) => {
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.stdout.on('data', (d: Buffer) => {
      stdout += d;
      if (!stdout.includes('Ctrl-C stops everything')) return;
      const banner = (re: RegExp) => re.exec(stdout)?.[1] ?? '';
      resolve({
        pid: child.pid!,
        stdout,
        output: () => stdout,
        stderr: () => stderr,
        stderrMatching,
        loginUrl: banner(/login:\s+(http:\/\/\S+?)\/1\.0\//),
        gatewayUrl: banner(/node-gateway:\s+(http:\/\/\S+)/),
        directoryAddr: banner(/directory:\s+(\S+)/),
        nodeAssignAddr: banner(/nodeassign:\s+(\S+)/),
        stop,
      });
    });
    void exited.then(() => reject(new Error(`start.ts exited: ${stderr}`)));
  });
}

/** `npm run cli -- <argv>` as its own process (what an operator runs next to `npm start`), with `env` added to this one's. */
export function cliProcess(argv: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', ...argv], { cwd: ROOT, env: { ...process.env, LOG_LEVEL: 'silent', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  stopOnExit(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d));
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}
