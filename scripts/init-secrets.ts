// docker compose's `secrets` one-shot: MASTER_SECRETS and INTERNAL_SECRET generated once
// into a folder (the `secrets` named volume), read by the services through
// MASTER_SECRETS_FILE and INTERNAL_SECRET_FILE. Existing files are kept, so restarts and
// `down`/`up` keep the same secrets (and so valid tokens). Values are never printed.
//
//   node dist/scripts/init-secrets.js <folder>
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** File name → how many random bytes its hex value holds. */
export const SECRET_FILES: Readonly<Record<string, number>> = {
  // 128 hex characters: well above the 64 characters every MASTER_SECRETS entry needs.
  master_secrets: 64,
  // 64 hex characters: 32 random bytes, the least INTERNAL_SECRET may hold.
  internal_secret: 32,
};

/** Writes each missing secret file (mode 0600); returns the names of those it created. */
export function ensureSecrets(dir: string): string[] {
  const created: string[] = [];
  for (const [name, bytes] of Object.entries(SECRET_FILES)) {
    try {
      // 'wx': never overwrite a secret that exists (a restart must not rotate it).
      writeFileSync(path.join(dir, name), randomBytes(bytes).toString('hex'), { mode: 0o600, flag: 'wx' });
      created.push(name);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  return created;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const dir = process.argv[2];
  if (!dir) {
    console.error('usage: init-secrets <folder>');
    process.exit(2);
  }
  const created = ensureSecrets(dir);
  console.log(created.length ? `init-secrets: created ${created.join(', ')} in ${dir}` : `init-secrets: secrets in ${dir} kept`);
}
