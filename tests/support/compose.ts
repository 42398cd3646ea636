// A docker compose project on the engine that `scripts/engine.sh env` finds, for the
// container tests (tests/containers.test.ts, tests/containers-scale.test.ts): the engine's
// environment or why there is none, the compose tool, free host ports, and a project whose
// services can be started, inspected and waited on. Images come from scripts/images.sh.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Host ports we may publish (house rule). */
const HOST_PORTS = { first: 18120, last: 18199 };
const HEALTHY_WITHIN_MS = 240_000;

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function run(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd ?? ROOT, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGTERM'), opts.timeoutMs ?? 600_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The engine's environment (DOCKER_HOST …) and compose tool, or why the container tests cannot run. */
export function findEngine(): { env: NodeJS.ProcessEnv; tool: string[] } | { skip: string } {
  const r = spawnSync('bash', [path.join(ROOT, 'scripts/engine.sh'), 'env'], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) return { skip: (r.stderr || 'scripts/engine.sh env failed').trim() };
  const vars = Object.fromEntries(r.stdout.trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  const env: NodeJS.ProcessEnv = { ...process.env, ...vars };
  // `docker compose` (v2 plugin) or `docker-compose` (v1).
  if (spawnSync('docker', ['compose', 'version'], { env }).status === 0) return { env, tool: ['docker', 'compose'] };
  if (spawnSync('docker-compose', ['version'], { env }).status === 0) return { env, tool: ['docker-compose'] };
  return { skip: 'no compose tool (docker compose plugin or docker-compose: apt-get install docker-compose)' };
}

/** Builds (or finds cached) the stand-ins and tokenserver:local; their names go into `env`. */
export async function buildImages(env: NodeJS.ProcessEnv): Promise<void> {
  const images = await run('bash', [path.join(ROOT, 'scripts/images.sh'), 'all'], { env, timeoutMs: 1_200_000 });
  if (images.code !== 0) throw new Error(`scripts/images.sh failed\n${images.stderr}`);
  for (const line of images.stdout.trim().split('\n')) {
    const [k, v] = line.split('=');
    if (k && v) env[k] = v;
  }
}

/** A free host port in our range, other than those in `skip`. */
export async function freePort(skip: Set<number>): Promise<number> {
  for (let port = HOST_PORTS.first; port <= HOST_PORTS.last; port++) {
    if (skip.has(port)) continue;
    const free = await new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '0.0.0.0', () => s.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error(`no free host port in ${HOST_PORTS.first}-${HOST_PORTS.last}`);
}

/**
 * The container checks of one file: each skipped with the reason when no engine answers, and
 * failed at once when the stack did not come up (every check but the `first`, which brings it up).
 * A check that fails is remembered (`anyFailed`), so that the file's after() can print the
 * services' error lines (ComposeProject.errorLines) before the stack goes: CI keeps only the output.
 */
export function composeChecks(skipReason: string, stackStarted: () => boolean) {
  let anyFailed = false;
  const check = (name: string, fn: (t: TestContext) => Promise<void>, first = false) =>
    test(name, async (t) => {
      if (skipReason) return t.skip(skipReason);
      if (!first && !stackStarted()) return assert.fail('the stack did not come up (first check)');
      try {
        await fn(t);
      } catch (err) {
        anyFailed = true;
        throw err;
      }
    });
  return { check, anyFailed: () => anyFailed };
}

export interface ContainerState {
  Status: string;
  ExitCode: number;
  StartedAt: string;
  FinishedAt: string;
  Health?: { Status: string };
}

/** One compose project: its files (absolute paths), its folder (.env lives there) and its name. */
export class ComposeProject {
  constructor(
    readonly engine: { env: NodeJS.ProcessEnv; tool: string[] },
    readonly name: string,
    readonly dir: string,
    readonly files: string[],
  ) {}

  compose(args: string[], timeoutMs?: number): Promise<Run> {
    const [cmd, ...pre] = this.engine.tool;
    const fileArgs = this.files.flatMap((f) => ['-f', f]);
    return run(cmd, [...pre, '-p', this.name, '--project-directory', this.dir, ...fileArgs, ...args], { env: this.engine.env, timeoutMs });
  }

  async mustCompose(args: string[], timeoutMs?: number): Promise<string> {
    const r = await this.compose(args, timeoutMs);
    assert.equal(r.code, 0, `compose ${args.join(' ')}\n${r.stdout}\n${r.stderr}`);
    return r.stdout;
  }

  docker(args: string[], timeoutMs?: number): Promise<Run> {
    return run('docker', args, { env: this.engine.env, timeoutMs });
  }

  async containerId(service: string): Promise<string> {
    return (await this.mustCompose(['ps', '-q', service])).trim();
  }

  async state(service: string): Promise<ContainerState> {
    const id = await this.containerId(service);
    assert.ok(id, `${service} has a container`);
    const r = await this.docker(['inspect', '-f', '{{json .State}}', id]);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as ContainerState;
  }

  /** Waits until every one of `services` reports healthy; fails naming those that do not. */
  async waitHealthy(services: string[], withinMs = HEALTHY_WITHIN_MS): Promise<void> {
    const deadline = Date.now() + withinMs;
    let last: Record<string, string> = {};
    while (Date.now() < deadline) {
      last = {};
      for (const s of services) {
        const st = await this.state(s).catch(() => undefined);
        last[s] = st?.Health?.Status ?? st?.Status ?? 'missing';
      }
      if (Object.values(last).every((v) => v === 'healthy')) return;
      await new Promise((r) => setTimeout(r, 2000));
    }
    const logs = await this.compose(['logs', '--no-color', '--tail', '30']);
    assert.fail(`not healthy within ${withinMs / 1000} s: ${JSON.stringify(last)}\n${logs.stdout}`);
  }

  /** The services' error lines, and the warnings of a 5xx a backend answered (login logs those as "request failed"). */
  async errorLines(): Promise<string[]> {
    const logs = await this.compose(['logs', '--no-color']);
    return logs.stdout.split('\n').filter((l) => /"level":(50|60)|"class":"InternalError"/.test(l));
  }

  /** Prints errorLines (at most 60), for a file whose checks failed. */
  async printErrorLines(): Promise<void> {
    const errors = await this.errorLines();
    console.log(`# services' error lines (${errors.length}):`);
    for (const l of errors.slice(0, 60)) console.log(`# ${l}`);
  }

  /** The host address a service's container port is published on (127.0.0.1:port). */
  async publishedUrl(service: string, containerPort: number): Promise<string> {
    const out = (await this.mustCompose(['port', service, String(containerPort)])).trim();
    const port = out.slice(out.lastIndexOf(':') + 1);
    assert.match(port, /^\d+$/, `${service}:${containerPort} is published (${out})`);
    return `http://127.0.0.1:${port}`;
  }
}
