// A MongoDB for the benchmarks: MONGODB_URL, else the compatible server
// (scripts/compat-mongo.sh) started for the run.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './build.js';

/** A MongoDB for the login benchmark: MONGODB_URL, else the compatible server started here. */
export function mongoServer(): { url: string; stop(): void } | { skip: string } {
  const given = process.env.MONGODB_URL?.trim();
  if (given) return { url: given, stop: () => undefined };
  const script = path.join(ROOT, 'scripts/compat-mongo.sh');
  if (spawnSync('bash', [script, 'installed']).status !== 0) {
    return { skip: 'the MongoDB-compatible server is not installed (bash scripts/compat-mongo.sh install) and MONGODB_URL is not set' };
  }
  const state = path.join(mkdtempSync(path.join(os.tmpdir(), 'bench-mongo-')), 'server.state');
  const out = execFileSync('bash', [script, 'start', '--state', state], { encoding: 'utf8' });
  const url = /MONGODB_URL=(\S+)/.exec(out)?.[1];
  const stop = () => {
    spawnSync('bash', [script, 'stop', '--state', state]);
    rmSync(path.dirname(state), { recursive: true, force: true });
  };
  if (!url) {
    stop();
    return { skip: `the compatible server printed no URL: ${out.trim()}` };
  }
  return { url, stop };
}

/** `mongodb://host:port/` + a database of its own. */
export function withDatabase(url: string, db: string): string {
  return url.replace(/^(mongodb(?:\+srv)?:\/\/[^/?#]+)\/?[^?#]*/, `$1/${db}`);
}
