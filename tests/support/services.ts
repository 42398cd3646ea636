// Test helpers shared by the directory and nodeassign service tests: a temp
// SQLite store URL and a grpc.health.v1 Check over a real channel.
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CLIENT_OPTIONS, insecure } from '../../lib/grpc.js';

/** A SQLite STORE_URL in a new temp folder, and a function that removes the folder. */
export function tempStoreUrl(prefix: string): { storeUrl: string; cleanup(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { storeUrl: `sqlite:${path.join(dir, 'data', 'tokenserver.db')}`, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const HealthClient = grpc.makeClientConstructor(healthService as unknown as grpc.ServiceDefinition, 'grpc.health.v1.Health');

type HealthCheckClient = grpc.Client & {
  check(req: { service: string }, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: { status: string }) => void): void;
};

/** The serving status grpc.health.v1 Check reports for `service` ('' is the whole server). */
export function healthStatus(port: number, service: string): Promise<string> {
  const client = new HealthClient(`127.0.0.1:${port}`, insecure(), CLIENT_OPTIONS) as unknown as HealthCheckClient;
  return new Promise<string>((resolve, reject) => {
    client.check({ service }, { deadline: Date.now() + 5000 }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res.status);
    });
  });
}

export interface EntryPointRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a service entry point as its own process with `env`; once `readyLine`
 * appears in its output it is sent SIGTERM. Resolves when it exits.
 */
export function runEntryPoint(file: string, env: Record<string, string>, readyLine: RegExp): Promise<EntryPointRun> {
  const child = spawn(process.execPath, ['--import', 'tsx', file], {
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let signalled = false;
  child.stdout.on('data', (d: Buffer) => {
    stdout += d;
    // Once only: a second signal would force an immediate exit.
    if (!signalled && readyLine.test(stdout)) {
      signalled = true;
      child.kill('SIGTERM');
    }
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  return new Promise((resolve) => {
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
