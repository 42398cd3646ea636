// docker compose's `secrets` one-shot: the secrets of the stack in a folder (the `secrets` named
// volume, which only this one-shot mounts), then each into a volume of its own that only the
// services needing it mount. Values are never printed.
//
//   node dist/scripts/init-secrets.js <folder> [<file>=<folder> …]
//
// Two kinds of file:
//  - kept (master_secrets, internal_secret, and metrics_hash_secret, storage_db_password when
//    shared): a value given in the environment (.env) wins and is written to <folder>; otherwise
//    an existing file is kept, so restarts and `down`/`up` keep the same secrets (and so valid
//    tokens), and a missing one is generated.
//  - derived from the master secrets and NODE_URL (node_secrets for a gateway's NODE_SECRETS_FILE,
//    sync_master_secret for a syncstorage-rs node's SYNC_MASTER_SECRET): computed on every run by
//    lib/token.ts, exactly what `cli nodes secret <app> <NODE_URL>` prints, so a rotation of
//    MASTER_SECRETS or a new NODE_URL reaches them at the next `up`. Never kept in <folder>.
// Each `<file>=<folder>` argument writes that file into that folder (mode 0600).
import { randomBytes } from 'node:crypto';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { internalSecretProblem, masterSecretsProblem, tokenSecretsMode, url, type Env } from '../lib/config.js';
import { ConfigError } from '../lib/errors.js';
import { tokenSecrets } from '../lib/token.js';

interface KeptSecret {
  kind: 'kept';
  /** The variable whose value (when set) the file takes. */
  variable: string;
  /** Random bytes of a generated value (hex). */
  bytes: number;
  problem(value: string): string | undefined;
}

interface DerivedSecret {
  kind: 'derived';
  /** The file's content from the master secrets (newest first) and the environment. */
  derive(masters: readonly string[], env: Env): string;
}

/** The node's secrets for NODE_URL as `cli nodes secret` prints them (login signs with the first). */
function nodeSecretsFor(masters: readonly string[], env: Env): readonly string[] {
  const mode = tokenSecretsMode(env);
  // NODE_URL as setup registers it and the gateway reads it (lib/config.ts url): the derivation uses every character.
  return tokenSecrets(mode, masters, url(env, 'NODE_URL'));
}

/** File name → what it holds. */
export const SECRET_FILES: Readonly<Record<string, KeptSecret | DerivedSecret>> = {
  // 128 hex characters: well above the 64 characters every MASTER_SECRETS entry needs.
  master_secrets: { kind: 'kept', variable: 'MASTER_SECRETS', bytes: 64, problem: (v) => masterSecretsProblem(splitSecrets(v)) },
  // 64 hex characters: 32 random bytes, the least INTERNAL_SECRET may hold.
  internal_secret: { kind: 'kept', variable: 'INTERNAL_SECRET', bytes: 32, problem: internalSecretProblem },
  // Login's key of hashed_fxa_uid (required with Bearer). Generated once and kept: a new one would
  // make every account look new in the metrics.
  metrics_hash_secret: { kind: 'kept', variable: 'METRICS_HASH_SECRET', bytes: 32, problem: () => undefined },
  // The storage node's MySQL password: hex, so it sits in a database URL as is. Generated only.
  storage_db_password: { kind: 'kept', variable: '', bytes: 16, problem: () => undefined },
  // A gateway's NODE_SECRETS_FILE: its node's secrets, newest first, one a line.
  node_secrets: {
    kind: 'derived',
    derive: (masters, env) => {
      if (tokenSecretsMode(env) === 'master') {
        throw new ConfigError('TOKEN_SECRETS', 'is master: tokens are then signed with the master secrets themselves, so a gateway has no secret of its own (NODE_SECRETS); give it the master secrets in an override instead');
      }
      return `${nodeSecretsFor(masters, env).join('\n')}\n`;
    },
  },
  // A syncstorage-rs node's SYNC_MASTER_SECRET: the newest of them, as the first line `nodes secret` prints.
  sync_master_secret: { kind: 'derived', derive: (masters, env) => nodeSecretsFor(masters, env)[0] },
};

/** The kept files every run ensures; the others only when shared. */
const ALWAYS = ['master_secrets', 'internal_secret'];

function splitSecrets(v: string): string[] {
  return v.split(',').map((s) => s.trim());
}

export type SecretOutcome = 'from the environment' | 'kept' | 'generated';

/**
 * Writes each kept secret file (mode 0600) as the header says: master_secrets and internal_secret,
 * and those of `extra` that are kept; returns what happened to each.
 */
export function ensureSecrets(dir: string, env: Env = {}, extra: readonly string[] = []): Record<string, SecretOutcome> {
  const outcome: Record<string, SecretOutcome> = {};
  for (const name of new Set([...ALWAYS, ...extra])) {
    const spec = SECRET_FILES[name];
    if (spec?.kind !== 'kept') continue;
    const file = path.join(dir, name);
    const given = spec.variable ? env[spec.variable]?.trim() : undefined;
    if (given) {
      const problem = spec.problem(given);
      if (problem) throw new ConfigError(spec.variable, problem);
      if (readIfExists(file) !== given) writeFileSync(file, given, { mode: 0o600 });
      outcome[name] = 'from the environment';
      continue;
    }
    try {
      // 'wx': never overwrite a secret that exists (a restart must not rotate it).
      writeFileSync(file, randomBytes(spec.bytes).toString('hex'), { mode: 0o600, flag: 'wx' });
      outcome[name] = 'generated';
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      outcome[name] = 'kept';
    }
  }
  return outcome;
}

/** `<file>=<folder>` arguments: a secret file's name (SECRET_FILES) and where to write it. */
export function parseShares(args: readonly string[]): Array<{ name: string; dir: string }> {
  return args.map((arg) => {
    const eq = arg.indexOf('=');
    const name = arg.slice(0, eq);
    const dir = arg.slice(eq + 1);
    if (eq < 0 || !(name in SECRET_FILES) || dir === '') {
      throw new ConfigError(arg, `expected <file>=<folder> with <file> one of ${Object.keys(SECRET_FILES).join(', ')}`);
    }
    return { name, dir };
  });
}

/** A shared file's content: a kept file as `dir` holds it, a derived one from the master secrets there. */
export function secretContent(dir: string, name: string, env: Env = {}): string {
  const spec = SECRET_FILES[name];
  if (spec.kind === 'kept') return readFileSync(path.join(dir, name), 'utf8');
  return spec.derive(splitSecrets(readFileSync(path.join(dir, 'master_secrets'), 'utf8')), env);
}

/**
 * Writes each shared secret file into its folder, mode 0600, when it differs: through a new file
 * renamed into place, so a reader never sees half of it and a link there is replaced, never
 * followed. Returns the names written.
 */
export function shareSecrets(dir: string, shares: ReadonlyArray<{ name: string; dir: string }>, env: Env = {}): string[] {
  const copied: string[] = [];
  for (const share of shares) {
    const value = secretContent(dir, share.name, env);
    const target = path.join(share.dir, share.name);
    if (readIfExists(target) === value) continue;
    const tmp = `${target}.${process.pid}.tmp`;
    rmSync(tmp, { force: true });
    writeFileSync(tmp, value, { mode: 0o600, flag: 'wx' });
    renameSync(tmp, target);
    copied.push(share.name);
  }
  return copied;
}

function readIfExists(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [dir, ...shareArgs] = process.argv.slice(2);
  if (!dir) {
    console.error('usage: init-secrets <folder> [<file>=<folder> …]');
    process.exit(2);
  }
  try {
    const shares = parseShares(shareArgs);
    const outcome = ensureSecrets(dir, process.env, shares.map((s) => s.name));
    console.log(`init-secrets: ${Object.entries(outcome).map(([name, how]) => `${name} ${how}`).join(', ')} (in ${dir})`);
    shareSecrets(dir, shares, process.env);
    for (const share of shares) console.log(`init-secrets: ${share.name} ${SECRET_FILES[share.name].kind === 'derived' ? 'derived into' : 'shared in'} ${share.dir}`);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(`init-secrets: ${err.message}`);
    process.exit(1);
  }
}
