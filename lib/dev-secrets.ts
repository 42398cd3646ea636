// The secrets the embedded stack (`npm start`) generates when the environment
// gives none: kept in DATA_DIR/secrets.json (0600) and reused, so a second
// start, the CLI and the gateway's old tokens keep working.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { internalSecretProblem, masterSecretsProblem } from './config.js';

export interface DevSecrets {
  masterSecrets: string[];
  internalSecret: string;
  /** The file held a master secret that the current rules refuse (older versions made 16+ characters); it was replaced. */
  replacedMaster: boolean;
}

const FILE = 'secrets.json';

function generated(): string {
  return randomBytes(32).toString('hex');
}

/** What DATA_DIR/secrets.json holds, or {} when it does not exist. */
function readFile(dataDir: string): { masterSecrets?: unknown; internalSecret?: unknown } {
  const file = path.join(dataDir, FILE);
  if (!existsSync(file)) return {};
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    throw new Error(`${file} is not valid JSON; remove it to have new secrets generated`);
  }
}

/** The stored internal secret, for the CLI next to an `npm start` stack; undefined when there is none. */
export function readDevInternalSecret(dataDir: string): string | undefined {
  const { internalSecret } = readFile(dataDir);
  return typeof internalSecret === 'string' ? internalSecret : undefined;
}

/** The stored master secrets, for the CLI's purge next to an `npm start` stack; undefined when there are none. */
export function readDevMasterSecrets(dataDir: string): string[] | undefined {
  const { masterSecrets } = readFile(dataDir);
  return Array.isArray(masterSecrets) && masterSecrets.every((s) => typeof s === 'string') ? masterSecrets : undefined;
}

/** Loads the stored secrets, generating (and storing) whichever is missing or no longer acceptable. */
export function loadOrCreateDevSecrets(dataDir: string): DevSecrets {
  const stored = readFile(dataDir);
  const storedMaster = stored.masterSecrets;
  const masterOk = Array.isArray(storedMaster) && storedMaster.every((s) => typeof s === 'string') && !masterSecretsProblem(storedMaster);
  const internalOk = typeof stored.internalSecret === 'string' && !internalSecretProblem(stored.internalSecret);
  const secrets: DevSecrets = {
    masterSecrets: masterOk ? (storedMaster as string[]) : [generated()],
    internalSecret: internalOk ? (stored.internalSecret as string) : generated(),
    replacedMaster: storedMaster !== undefined && !masterOk,
  };
  if (!masterOk || !internalOk) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const file = path.join(dataDir, FILE);
    const { masterSecrets, internalSecret } = secrets;
    writeFileSync(file, JSON.stringify({ masterSecrets, internalSecret }, null, 2) + '\n', { mode: 0o600 });
    // mode applies only when the file is created; an older file may be wider.
    chmodSync(file, 0o600);
  }
  return secrets;
}
