// Command-line parsing for the operator CLI: a table of commands, help text
// built from it, and parseCli(), which turns argv + environment into one
// validated Command without any I/O but reading the secret files the environment
// names. Bad input is a UsageError (exit 2).
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULTS, address, applications, domain, grpcTls, int, internalSecret, list, masterSecrets, storeUrl, str, tokenSecretsMode, url, type Env } from '../lib/config.js';
import { readDevInternalSecret, readDevMasterSecrets } from '../lib/dev-secrets.js';
import { ConfigError } from '../lib/errors.js';
import type { TokenSecretsMode } from '../lib/token.js';
import type { Backend, Globals } from './backends.js';
import { appOf, DEFAULT_MOZILLA_SERVICE } from './import-rules.js';
import { sourceKind } from './import-source.js';
import type { ImportOptions } from './import.js';
import type { PurgeOptions } from './purge.js';

export const PROGRAM = 'tokenserver-cli';

/** Bad arguments or settings: the CLI prints the message (and a usage hint) and exits 2. */
export class UsageError extends Error {
  constructor(message: string, readonly usage = '') {
    super(message);
    this.name = 'UsageError';
  }
}

export interface NodePatch {
  capacity?: number;
  downed?: boolean;
  backoff?: boolean;
}

export type Command =
  | { kind: 'nodes add'; app: string; url: string; capacity: number; existOk: boolean }
  | { kind: 'nodes list'; app: string }
  | { kind: 'nodes update'; app: string; url: string; patch: NodePatch }
  | { kind: 'nodes remove'; app: string; url: string }
  | { kind: 'nodes reconcile'; app: string; dryRun: boolean }
  | { kind: 'nodes secret'; app: string; url: string; masterSecrets: string[]; tokenSecrets: TokenSecretsMode }
  | { kind: 'users show'; app: string; email: string }
  | { kind: 'users retire'; app: string; email: string }
  | { kind: 'users list'; app: string; node?: string; replaced: boolean; limit: number; after: string }
  | ({ kind: 'users purge' } & PurgeOptions)
  | { kind: 'backup'; file: string; source: string }
  | ({ kind: 'import' } & ImportOptions)
  | { kind: 'setup'; apps: string[]; url: string; capacity: number; devIdpDir: string }
  | { kind: 'dev assertion'; email: string; audience: string; generation?: number; ttlSeconds?: number; dataDir: string; generationClaim: string }
  | { kind: 'dev init'; dataDir: string; trustedIssuersFile: string }
  | { kind: 'health'; target: string; service: string };

export type Parsed = { kind: 'help'; text: string } | { kind: 'run'; command: Command; globals: Globals };

interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  /** Placeholder shown in help for string options. */
  value?: string;
  description: string;
  /** Shown in the usage line; build() enforces it. */
  required?: boolean;
}

type Values = Record<string, string | boolean | undefined>;

interface CommandSpec {
  name: string;
  /** Positional arguments; `[x]` is optional. */
  args: string[];
  summary: string;
  options: Record<string, OptionSpec>;
  needs: Backend[];
  build(args: Record<string, string | undefined>, opts: Values, env: Env): Command;
}

const GLOBAL_OPTIONS: Record<string, OptionSpec> = {
  json: { type: 'boolean', description: 'print machine-readable JSON on stdout' },
  directory: { type: 'string', value: 'HOST:PORT', description: `directory address (default: DIRECTORY_ADDR or ${DEFAULTS.DIRECTORY_ADDR})` },
  nodeassign: { type: 'string', value: 'HOST:PORT', description: `nodeassign address (default: NODEASSIGN_ADDR or ${DEFAULTS.NODEASSIGN_ADDR})` },
  timeout: { type: 'string', value: 'MS', description: `deadline of each call in milliseconds (default ${DEFAULTS.GRPC_DEADLINE_MS})` },
  help: { type: 'boolean', short: 'h', description: 'show help' },
};

// ---- argument validators: each names the argument it rejects ----

/** Runs a lib/config.ts parser on one value, turning its ConfigError into a UsageError. */
function viaConfig<T>(name: string, value: string, parse: (env: Env, name: string) => T): T {
  try {
    return parse({ [name]: value }, name);
  } catch (e) {
    if (e instanceof ConfigError) throw new UsageError(e.message);
    throw e;
  }
}

export function appArg(v: string): string {
  if (!/^[A-Za-z0-9_-]+$/.test(v)) throw new UsageError(`<app>: expected an application name like "sync", got ${JSON.stringify(v)}`);
  return v;
}

/** Node URLs are compared byte for byte (they are inside tokens), so they get the config rules: no trailing slash. */
export function urlArg(v: string, name = '<url>'): string {
  return viaConfig(name, v, (env, n) => url(env, n));
}

/** A node URL exactly as given, for what derives from every character of it (node secrets): the checks of urlArg, nothing trimmed. */
export function exactUrlArg(v: string, name = '<url>'): string {
  urlArg(v, name);
  if (v !== v.trim()) throw new UsageError(`${name}: no surrounding whitespace, got ${JSON.stringify(v)}`);
  return v;
}

export function emailArg(v: string): string {
  if (!/^[^\s@]+@[^\s@]+$/.test(v)) throw new UsageError(`<email>: expected an email address, got ${JSON.stringify(v)}`);
  return v;
}

export function wholeNumber(name: string, v: string | boolean | undefined, min = 0, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.trim() === '') throw new UsageError(`${name}: expected a whole number`);
  return viaConfig(name, v, (env, n) => int(env, n, 0, min, max));
}

/** A duration like 30s, 15m, 12h, 7d (a bare number is seconds) → milliseconds. */
export function durationArg(name: string, v: string | boolean | undefined): number | undefined {
  if (v === undefined) return undefined;
  const m = typeof v === 'string' ? /^(\d{1,9})([smhd]?)$/.exec(v.trim()) : null;
  if (!m) throw new UsageError(`${name}: expected a duration like 30s, 15m, 12h or 7d, got ${JSON.stringify(v)}`);
  const unit = { '': 1, s: 1, m: 60, h: 3600, d: 86_400 }[m[2] as '' | 's' | 'm' | 'h' | 'd'];
  return Number(m[1]) * unit * 1000;
}

/** How long a purge's claim keeps other purgers off a record: longer than its node deletes take. */
const PURGE_LEASE_MS = 10 * 60_000;

/** The SQLite file STORE_URL names; a MongoDB store is backed up with mongodump. */
function sqliteFile(env: Env): string {
  const u = storeUrl(env);
  if (!u.startsWith('sqlite:')) throw new UsageError('STORE_URL is a MongoDB: back it up with mongodump (docs/operating.md, "Backup and restore")');
  return u.slice('sqlite:'.length);
}

function required<T>(name: string, v: T | undefined): T {
  if (v === undefined) throw new UsageError(`${name} is required`);
  return v;
}

function dataDir(opts: Values, env: Env): string {
  return typeof opts['data-dir'] === 'string' && opts['data-dir'] !== '' ? opts['data-dir'] : str(env, 'DATA_DIR', DEFAULTS.DATA_DIR);
}

/** MASTER_SECRETS (or _FILE); next to `npm start` the ones it generated. */
function masterSecretsOrDev(env: Env): string[] {
  return masterSecrets(env, readDevMasterSecrets(str(env, 'DATA_DIR', DEFAULTS.DATA_DIR)));
}

function generationClaim(env: Env): string {
  return str(env, 'GENERATION_CLAIM', DEFAULTS.GENERATION_CLAIM);
}

const CAPACITY: OptionSpec = { type: 'string', value: 'N', description: 'how many users the node may hold', required: true };
/** Capacity of the nodes `setup` registers; an operator tunes it later with `nodes update`. */
const SETUP_CAPACITY = 1000;
const DATA_DIR: OptionSpec = { type: 'string', value: 'DIR', description: `where dev-idp.json lives (default: DATA_DIR or ${DEFAULTS.DATA_DIR})` };

function nodeUpdate(name: string, summary: string, patch: (opts: Values) => NodePatch, options: Record<string, OptionSpec> = {}): CommandSpec {
  return {
    name,
    args: ['<app>', '<url>'],
    summary,
    options,
    needs: ['nodeassign'],
    build: (a, o) => ({ kind: 'nodes update', app: appArg(a.app!), url: urlArg(a.url!), patch: patch(o) }),
  };
}

export const COMMANDS: CommandSpec[] = [
  {
    name: 'nodes add',
    args: ['<app>', '<url>'],
    summary: 'register an application node',
    options: {
      capacity: CAPACITY,
      'exist-ok': { type: 'boolean', description: 'succeed (and show the node) when it is registered already' },
    },
    needs: ['nodeassign'],
    build: (a, o) => ({
      kind: 'nodes add',
      app: appArg(a.app!),
      url: urlArg(a.url!),
      capacity: required('--capacity', wholeNumber('--capacity', o.capacity)),
      existOk: o['exist-ok'] === true,
    }),
  },
  {
    name: 'nodes list',
    args: ['[app]'],
    summary: 'list nodes (of one application, or all) with their live users',
    options: {},
    needs: ['nodeassign', 'directory'],
    build: (a) => ({ kind: 'nodes list', app: a.app === undefined ? '' : appArg(a.app) }),
  },
  nodeUpdate('nodes update', "change a node's capacity", (o) => ({ capacity: required('--capacity', wholeNumber('--capacity', o.capacity)) }), {
    capacity: CAPACITY,
  }),
  nodeUpdate('nodes down', 'mark a node down: no new users go to it', () => ({ downed: true })),
  nodeUpdate('nodes up', 'mark a node up again', () => ({ downed: false })),
  nodeUpdate('nodes backoff', 'stop (or with --off, resume) sending new users to a node', (o) => ({ backoff: o.off !== true }), {
    off: { type: 'boolean', description: 'clear the backoff flag' },
  }),
  {
    name: 'nodes remove',
    args: ['<app>', '<url>'],
    summary: "remove a node; its users get a new node at their next login",
    options: {},
    needs: ['nodeassign', 'directory'],
    build: (a) => ({ kind: 'nodes remove', app: appArg(a.app!), url: urlArg(a.url!) }),
  },
  {
    name: 'nodes reconcile',
    args: ['[app]'],
    summary: "recount each node's load from the directory (live users plus replaced uids not yet released) and correct the difference",
    options: { 'dry-run': { type: 'boolean', description: 'report the differences, change nothing' } },
    needs: ['nodeassign', 'directory'],
    build: (a, o) => ({ kind: 'nodes reconcile', app: a.app === undefined ? '' : appArg(a.app), dryRun: o['dry-run'] === true }),
  },
  {
    name: 'nodes secret',
    args: ['<app>', '<url>'],
    summary: "print the secrets the node's tokens are signed with, newest first (a syncstorage-rs node's SYNC_MASTER_SECRET); <url> exactly as registered",
    options: {},
    needs: [],
    build: (a, _o, env) => ({
      kind: 'nodes secret',
      app: appArg(a.app!),
      url: exactUrlArg(a.url!),
      masterSecrets: masterSecretsOrDev(env),
      tokenSecrets: tokenSecretsMode(env),
    }),
  },
  {
    name: 'users show',
    args: ['<app>', '<email>'],
    summary: "show a user's record",
    options: {},
    needs: ['directory'],
    build: (a) => ({ kind: 'users show', app: appArg(a.app!), email: emailArg(a.email!) }),
  },
  {
    name: 'users retire',
    args: ['<app>', '<email>'],
    summary: "retire a user (account deleted): the live record becomes a replaced one, its node slot goes back; the next login gets a new uid",
    options: {},
    needs: ['directory', 'nodeassign'],
    build: (a) => ({ kind: 'users retire', app: appArg(a.app!), email: emailArg(a.email!) }),
  },
  {
    name: 'users list',
    args: ['<app>'],
    summary: 'list users a page at a time (--after continues where the last page ended)',
    options: {
      node: { type: 'string', value: 'URL', description: 'only users on this node (with --replaced: with a replaced record there)' },
      replaced: { type: 'boolean', description: 'list replaced records (old uids waiting for purge) instead of live users' },
      limit: { type: 'string', value: 'N', description: 'users per page, 1 to 1000 (default 100)' },
      after: { type: 'string', value: 'CURSOR', description: 'the cursor printed after the previous page' },
    },
    needs: ['directory'],
    build: (a, o) => ({
      kind: 'users list',
      app: appArg(a.app!),
      node: typeof o.node === 'string' ? urlArg(o.node, '--node') : undefined,
      replaced: o.replaced === true,
      limit: wholeNumber('--limit', o.limit, 1, 1000) ?? 100,
      after: typeof o.after === 'string' ? o.after : '',
    }),
  },
  {
    name: 'users purge',
    args: [],
    summary: "delete replaced records past the grace period (their data on the node first) and trim seen client states",
    options: {
      app: { type: 'string', value: 'APP', description: 'only this application (default: all)' },
      grace: { type: 'string', value: 'DURATION', description: `keep records replaced more recently than this (default ${DEFAULTS.PURGE_GRACE_SECONDS / 86_400}d)` },
      max: { type: 'string', value: 'N', description: 'purge at most this many records in this run' },
      'keep-client-states': {
        type: 'string',
        value: 'N',
        description: `seen client states kept per user (default: PURGE_KEEP_CLIENT_STATES or ${DEFAULTS.PURGE_KEEP_CLIENT_STATES})`,
      },
      'dry-run': { type: 'boolean', description: 'report what would be done, change nothing' },
      'skip-node-delete': { type: 'boolean', description: "delete the records without deleting the users' data on their nodes" },
    },
    needs: ['directory', 'nodeassign'],
    build: (_a, o, env) => {
      const dryRun = o['dry-run'] === true;
      const skipNodeDelete = o['skip-node-delete'] === true;
      // Minting the node-delete tokens needs the master secrets; next to `npm start` the generated ones.
      const needSecrets = !dryRun && !skipNodeDelete;
      return {
        kind: 'users purge',
        app: typeof o.app === 'string' ? appArg(o.app) : '',
        graceMs: durationArg('--grace', o.grace) ?? DEFAULTS.PURGE_GRACE_SECONDS * 1000,
        max: wholeNumber('--max', o.max, 1) ?? Number.MAX_SAFE_INTEGER,
        dryRun,
        skipNodeDelete,
        keepClientStates:
          wholeNumber('--keep-client-states', o['keep-client-states']) ?? int(env, 'PURGE_KEEP_CLIENT_STATES', DEFAULTS.PURGE_KEEP_CLIENT_STATES, 0, 1000),
        leaseMs: PURGE_LEASE_MS,
        masterSecrets: needSecrets ? masterSecretsOrDev(env) : [],
        tokenSecrets: tokenSecretsMode(env),
        versions: applications(env),
        oauthEmailDomain: domain(env, 'OAUTH_EMAIL_DOMAIN', DEFAULTS.OAUTH_EMAIL_DOMAIN),
        deadlineMs: DEFAULTS.UPSTREAM_TIMEOUT_MS,
      };
    },
  },
  {
    name: 'backup',
    args: ['<file>'],
    summary: "copy the SQLite store online (SQLite's backup API) and verify the copy",
    options: {},
    needs: [],
    build: (a, _o, env) => ({ kind: 'backup', file: a.file!, source: sqliteFile(env) }),
  },
  {
    name: 'import',
    args: [],
    summary: "copy a Mozilla tokenserver's nodes and users (MySQL or PostgreSQL) into these stores, keeping every uid",
    options: {
      from: {
        type: 'string',
        value: 'URL',
        description: "Mozilla's tokenserver database: mysql://USER@HOST/DB (password in MYSQL_PWD) or postgres://USER@HOST/DB (PGPASSWORD)",
        required: true,
      },
      service: { type: 'string', value: 'NAME', description: `Mozilla's service to copy (default ${DEFAULT_MOZILLA_SERVICE})` },
      app: { type: 'string', value: 'APP', description: 'our application for it (default: the service without its version, e.g. sync)' },
      'dry-run': { type: 'boolean', description: 'report what would be imported, change nothing' },
      'any-email-domain': {
        type: 'boolean',
        description: 'import accounts of e-mail domains other than OAUTH_EMAIL_DOMAIN too (BrowserID-era accounts that log in under their own address)',
      },
    },
    needs: ['directory', 'nodeassign'],
    build: (_a, o, env) => {
      const from = required('--from', typeof o.from === 'string' ? o.from : undefined);
      if (!sourceKind(from)) throw new UsageError('--from: expected a mysql:// or postgres:// URL');
      const service = typeof o.service === 'string' && o.service !== '' ? o.service : DEFAULT_MOZILLA_SERVICE;
      // The password from the environment (MYSQL_PWD, PGPASSWORD, as their own clients take it), so it is never on a command line.
      const password = (sourceKind(from) === 'mysql' ? env.MYSQL_PWD : env.PGPASSWORD) || undefined;
      return {
        kind: 'import',
        from,
        password,
        service,
        app: appArg(typeof o.app === 'string' ? o.app : appOf(service)),
        dryRun: o['dry-run'] === true,
        emailDomain: domain(env, 'OAUTH_EMAIL_DOMAIN', DEFAULTS.OAUTH_EMAIL_DOMAIN),
        anyEmailDomain: o['any-email-domain'] === true,
      };
    },
  },
  {
    name: 'setup',
    args: [],
    summary: 'register one node for each configured application (idempotent)',
    options: {
      'node-url': { type: 'string', value: 'URL', description: 'the node URL (default: NODE_URL)' },
      capacity: { ...CAPACITY, required: false, description: `capacity of each node (default ${SETUP_CAPACITY})` },
      'dev-idp': { type: 'string', value: 'DIR', description: 'also create the development IdP there (see dev init)' },
    },
    needs: ['nodeassign'],
    build: (_a, o, env) => {
      const nodeUrl = typeof o['node-url'] === 'string' ? o['node-url'] : env.NODE_URL?.trim() ? env.NODE_URL : undefined;
      return {
        kind: 'setup',
        apps: [...applications(env).keys()],
        url: urlArg(required('--node-url (or NODE_URL)', nodeUrl), '--node-url'),
        capacity: wholeNumber('--capacity', o.capacity) ?? SETUP_CAPACITY,
        devIdpDir: typeof o['dev-idp'] === 'string' ? o['dev-idp'] : '',
      };
    },
  },
  {
    name: 'dev assertion',
    args: ['<email>'],
    summary: 'print an assertion signed by the development IdP (for trying the system)',
    options: {
      audience: { type: 'string', value: 'A', description: 'the "aud" claim (default: first of AUDIENCES)' },
      generation: { type: 'string', value: 'N', description: 'generation number in the certificate' },
      ttl: { type: 'string', value: 'SECONDS', description: 'lifetime of certificate and assertion (default 600; login refuses assertions beyond its MAX_ASSERTION_LIFETIME, default 600)' },
      'data-dir': DATA_DIR,
    },
    needs: [],
    build: (a, o, env) => {
      const audience = typeof o.audience === 'string' && o.audience !== '' ? o.audience : list(env, 'AUDIENCES', '')[0];
      return {
        kind: 'dev assertion',
        email: emailArg(a.email!),
        audience: required('--audience (or AUDIENCES)', audience),
        generation: wholeNumber('--generation', o.generation),
        ttlSeconds: wholeNumber('--ttl', o.ttl, 1, 86_400),
        dataDir: dataDir(o, env),
        generationClaim: generationClaim(env),
      };
    },
  },
  {
    name: 'dev init',
    args: [],
    summary: 'create the development IdP key and a TRUSTED_ISSUERS file that trusts it',
    options: {
      'data-dir': DATA_DIR,
      'trusted-issuers': { type: 'string', value: 'FILE', description: 'where to write the issuers file (default: <data-dir>/trusted-issuers.json)' },
    },
    needs: [],
    build: (_a, o, env) => {
      const dir = dataDir(o, env);
      const file = typeof o['trusted-issuers'] === 'string' && o['trusted-issuers'] !== '' ? o['trusted-issuers'] : path.join(dir, 'trusted-issuers.json');
      return { kind: 'dev init', dataDir: dir, trustedIssuersFile: file };
    },
  },
  {
    name: 'health',
    args: ['<target>'],
    summary: 'probe a service: HOST:PORT (grpc.health.v1) or an http(s) URL (expects 2xx); exit 0 when healthy',
    options: {
      service: { type: 'string', value: 'NAME', description: 'gRPC service name to check (default: the whole server)' },
    },
    needs: [],
    build: (a, o) => {
      const target = a.target!;
      if (/^https?:\/\//.test(target)) urlArg(target, '<target>');
      else viaConfig('<target>', target, (e, n) => address(e, n, ''));
      return { kind: 'health', target, service: typeof o.service === 'string' ? o.service : '' };
    },
  },
];

// ---- help ----

function optionLines(options: Record<string, OptionSpec>): string[] {
  return Object.entries(options).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : ''}--${name}${o.type === 'string' ? ` ${o.value ?? 'VALUE'}` : ''}`;
    return `  ${flag.padEnd(26)} ${o.description}`;
  });
}

function usageLine(spec: CommandSpec): string {
  const required = Object.entries(spec.options)
    .filter(([, o]) => o.required)
    .map(([name, o]) => `--${name} ${o.value}`);
  return [PROGRAM, spec.name, ...spec.args, ...required, '[options]'].join(' ');
}

export function commandHelp(spec: CommandSpec): string {
  const lines = [`usage: ${usageLine(spec)}`, '', `${spec.summary}.`, ''];
  if (Object.keys(spec.options).length > 0) lines.push('options:', ...optionLines(spec.options), '');
  lines.push('global options:', ...optionLines(GLOBAL_OPTIONS), '');
  return lines.join('\n');
}

function listing(specs: CommandSpec[]): string[] {
  return specs.map((s) => `  ${`${s.name} ${s.args.join(' ')}`.trimEnd().padEnd(30)} ${s.summary}`);
}

export function groupHelp(group: string): string {
  const specs = COMMANDS.filter((s) => s.name.split(' ')[0] === group);
  return [`usage: ${PROGRAM} ${group} <command> [options]`, '', 'commands:', ...listing(specs), '', `"${PROGRAM} ${group} <command> --help" for details.`, ''].join('\n');
}

export function topHelp(): string {
  return [
    `usage: ${PROGRAM} <command> [options]      (npm run cli -- <command>)`,
    '',
    'Operator tool for the token server: nodes, users, development helpers, health probes.',
    '',
    'commands:',
    ...listing(COMMANDS),
    '',
    'global options:',
    ...optionLines(GLOBAL_OPTIONS),
    '',
    'Exit status: 0 success, 1 failure (service error or unreachable), 2 bad arguments.',
    `"${PROGRAM} <command> --help" for details.`,
    '',
  ].join('\n');
}

// ---- parsing ----

const ALL_OPTIONS = Object.assign({}, GLOBAL_OPTIONS, ...COMMANDS.map((c) => c.options)) as Record<string, OptionSpec>;

function parseOptions(argv: string[], options: Record<string, OptionSpec>, strict: boolean) {
  const config = Object.fromEntries(Object.entries(options).map(([k, o]) => [k, o.short ? { type: o.type, short: o.short } : { type: o.type }]));
  return parseArgs({ args: argv, options: config, allowPositionals: true, strict });
}

/** The command a list of leading words names, or the group they name, or nothing. */
function findCommand(words: string[]): { spec?: CommandSpec; group?: string } {
  const two = COMMANDS.find((c) => c.name === `${words[0]} ${words[1]}`);
  if (two) return { spec: two };
  const one = COMMANDS.find((c) => c.name === words[0]);
  if (one) return { spec: one };
  if (words[0] !== undefined && COMMANDS.some((c) => c.name.startsWith(`${words[0]} `))) return { group: words[0] };
  return {};
}

function resolveGlobals(spec: CommandSpec, values: Values, env: Env): Globals {
  const addrs: Partial<Record<Backend, string>> = {};
  for (const backend of spec.needs) {
    const flag = values[backend];
    const variable = backend === 'directory' ? 'DIRECTORY_ADDR' : 'NODEASSIGN_ADDR';
    const fallback = backend === 'directory' ? DEFAULTS.DIRECTORY_ADDR : DEFAULTS.NODEASSIGN_ADDR;
    addrs[backend] =
      typeof flag === 'string' ? viaConfig(`--${backend}`, flag, (e, n) => address(e, n, '')) : viaConfig(variable, env[variable] ?? '', (e, n) => address(e, n, fallback));
  }
  // Health is open (probes need no secret); next to an `npm start` stack the secret it generated is used.
  const secret = spec.needs.length > 0 ? internalSecret(env, readDevInternalSecret(str(env, 'DATA_DIR', DEFAULTS.DATA_DIR))) : undefined;
  return {
    json: values.json === true,
    deadlineMs: wholeNumber('--timeout', values.timeout, 50, 600_000) ?? DEFAULTS.GRPC_DEADLINE_MS,
    addrs,
    auth: { internalSecret: secret, tls: grpcTls(env) },
  };
}

/** argv (without node and script) + environment → help text or one validated command. */
export function parseCli(argv: string[], env: Env): Parsed {
  let loose;
  try {
    loose = parseOptions(argv, ALL_OPTIONS, false);
  } catch (e) {
    throw new UsageError((e as Error).message, topHelp());
  }
  const words = loose.positionals;
  const { spec, group } = findCommand(words);
  const wantsHelp = loose.values.help === true;
  if (!spec) {
    if (group) {
      if (wantsHelp) return { kind: 'help', text: groupHelp(group) };
      throw new UsageError(words[1] === undefined ? `${group}: missing command` : `${group}: unknown command ${JSON.stringify(words[1])}`, groupHelp(group));
    }
    if (wantsHelp || words[0] === 'help') return { kind: 'help', text: topHelp() };
    throw new UsageError(words[0] === undefined ? 'missing command' : `unknown command ${JSON.stringify(words[0])}`, topHelp());
  }
  if (wantsHelp) return { kind: 'help', text: commandHelp(spec) };

  const help = `usage: ${usageLine(spec)}\n"${PROGRAM} ${spec.name} --help" for details.\n`;
  let parsed;
  try {
    parsed = parseOptions(argv, { ...GLOBAL_OPTIONS, ...spec.options }, true);
  } catch (e) {
    // node's messages are good but long ("Unknown option '--x'. To specify a positional argument starting with a '-', …"): keep the first sentence.
    throw new UsageError(`${spec.name}: ${(e as Error).message.split(/\.\s/)[0]}`, help);
  }
  const given = parsed.positionals.slice(spec.name.split(' ').length);
  const args: Record<string, string | undefined> = {};
  spec.args.forEach((a, i) => {
    const name = a.slice(1, -1);
    if (a.startsWith('<') && given[i] === undefined) throw new UsageError(`${spec.name}: missing ${a}`, help);
    args[name] = given[i];
  });
  if (given.length > spec.args.length) throw new UsageError(`${spec.name}: unexpected argument ${JSON.stringify(given[spec.args.length])}`, help);
  const values = parsed.values as Values;
  try {
    return { kind: 'run', command: spec.build(args, values, env), globals: resolveGlobals(spec, values, env) };
  } catch (e) {
    if (e instanceof UsageError) throw new UsageError(`${spec.name}: ${e.message}`, help);
    if (e instanceof ConfigError) throw new UsageError(`${spec.name}: ${e.message}`, help);
    throw e;
  }
}
