// docker compose's `secrets` one-shot: MASTER_SECRETS and INTERNAL_SECRET in a folder (the
// `secrets` named volume, which only this one-shot mounts). A value given in the environment
// (.env) wins and is written there; otherwise an existing file is kept, so restarts and
// `down`/`up` keep the same secrets (and so valid tokens), and a missing one is generated.
// Then each `<file>=<folder>` argument copies that one file into that folder: a volume of its
// own that only the services needing that secret mount (MASTER_SECRETS_FILE,
// INTERNAL_SECRET_FILE). Values are never printed.
//
//   node dist/scripts/init-secrets.js <folder> [<file>=<folder> …]
import { randomBytes } from 'node:crypto';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { internalSecretProblem, masterSecretsProblem, type Env } from '../lib/config.js';
import { ConfigError } from '../lib/errors.js';

interface SecretFile {
  /** The variable whose value (when set) the file takes. */
  variable: string;
  /** Random bytes of a generated value (hex). */
  bytes: number;
  problem(value: string): string | undefined;
}

/** File name → what it holds. */
export const SECRET_FILES: Readonly<Record<string, SecretFile>> = {
  // 128 hex characters: well above the 64 characters every MASTER_SECRETS entry needs.
  master_secrets: { variable: 'MASTER_SECRETS', bytes: 64, problem: (v) => masterSecretsProblem(v.split(',').map((s) => s.trim())) },
  // 64 hex characters: 32 random bytes, the least INTERNAL_SECRET may hold.
  internal_secret: { variable: 'INTERNAL_SECRET', bytes: 32, problem: internalSecretProblem },
};

export type SecretOutcome = 'from the environment' | 'kept' | 'generated';

/** Writes each secret file (mode 0600) as the header says; returns what happened to each. */
export function ensureSecrets(dir: string, env: Env = {}): Record<string, SecretOutcome> {
  const outcome: Record<string, SecretOutcome> = {};
  for (const [name, spec] of Object.entries(SECRET_FILES)) {
    const file = path.join(dir, name);
    const given = env[spec.variable]?.trim();
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

/** `<file>=<folder>` arguments: a secret file's name (SECRET_FILES) and where to copy it. */
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

/**
 * Copies each shared secret file from `dir` into its folder, mode 0600, when it differs: through a
 * new file renamed into place, so a reader never sees half of it and a link there is replaced,
 * never followed. Returns the names copied.
 */
export function shareSecrets(dir: string, shares: ReadonlyArray<{ name: string; dir: string }>): string[] {
  const copied: string[] = [];
  for (const share of shares) {
    const value = readFileSync(path.join(dir, share.name), 'utf8');
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
    const outcome = ensureSecrets(dir, process.env);
    console.log(`init-secrets: ${Object.entries(outcome).map(([name, how]) => `${name} ${how}`).join(', ')} (in ${dir})`);
    shareSecrets(dir, shares);
    for (const share of shares) console.log(`init-secrets: ${share.name} shared in ${share.dir}`);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(`init-secrets: ${err.message}`);
    process.exit(1);
  }
}
