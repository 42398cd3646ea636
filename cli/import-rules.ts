// `import`'s rules as pure functions: Mozilla's tokenserver rows (its
// `services`, `nodes` and `users` tables, as the drivers hand them over) turned
// into our node and user records, and the text the command prints.
//
// Mozilla keeps one `users` row per uid an account ever had. Its get_user reads
// an account's rows, takes the one with the highest generation (then the newest)
// as current, and marks every other row replaced, repairing the races that
// left several live rows. The client states of the other rows are the ones it
// refuses to see again. We make the same choice once, at import.
import { DEFAULTS } from '../lib/config.js';
import { emailDomain, normalizeEmail } from '../lib/email.js';
import type { ReplacedUser, User } from '../lib/gen/directory.js';
import type { Node } from '../lib/gen/nodeassign.js';
import { MAX_IMPORTED_UID } from '../services/directory/import-rules.js';
import { MAX_REPLACED, MAX_SEEN_CLIENT_STATES, RETIRED_UID } from '../services/directory/rules.js';

/** OAUTH_EMAIL_DOMAIN's default (lib/config.ts). */
const DEFAULT_EMAIL_DOMAIN = DEFAULTS.OAUTH_EMAIL_DOMAIN;

/** Mozilla's standard Sync service (its migrations create it). */
export const DEFAULT_MOZILLA_SERVICE = 'sync-1.5';

/** Mozilla's retire_user sets every row of a deleted account to this generation (i64::MAX). */
export const MOZILLA_RETIRED_GENERATION = 2n ** 63n - 1n;

/** A column value as pg or mysql2 hand it over: BIGINTs as strings, INTs as numbers. */
export type Raw = string | number | bigint | null;

export interface RawNode {
  id: Raw;
  node: string;
  available: Raw;
  current_load: Raw;
  capacity: Raw;
  downed: Raw;
  backoff: Raw;
}

export interface RawUser {
  uid: Raw;
  email: string;
  generation: Raw;
  client_state: string;
  created_at: Raw;
  replaced_at: Raw;
  nodeid: Raw;
  keys_changed_at: Raw;
}

/** One `users` row, parsed. */
export interface MozillaUser {
  uid: number;
  email: string;
  /** 'retired': Mozilla's tombstone generation (the account was deleted). */
  generation: number | 'retired';
  clientState: string;
  createdAt: number;
  replacedAt: number | null;
  nodeid: number;
  keysChangedAt: number | null;
}

/** A row that does not fit our records (a value beyond 2^53, a negative uid): its account is left out and reported. */
export class RowProblem extends Error {}

function integer(v: Raw, column: string): bigint {
  if (v === null || (typeof v === 'number' && !Number.isInteger(v)) || (typeof v === 'string' && !/^-?\d+$/.test(v))) {
    throw new RowProblem(`${column} is not an integer: ${String(v)}`);
  }
  return BigInt(v);
}

/** A non-negative whole number that JavaScript holds exactly. */
function count(v: Raw, column: string): number {
  const n = integer(v, column);
  if (n < 0n || n > BigInt(Number.MAX_SAFE_INTEGER)) throw new RowProblem(`${column} ${n} is out of range (0 to 2^53 - 1)`);
  return Number(n);
}

export function parseUser(r: RawUser): MozillaUser {
  const generation = integer(r.generation, 'generation');
  return {
    uid: count(r.uid, 'uid'),
    email: r.email,
    generation: generation === MOZILLA_RETIRED_GENERATION ? 'retired' : count(r.generation, 'generation'),
    clientState: r.client_state,
    createdAt: count(r.created_at, 'created_at'),
    replacedAt: r.replaced_at === null ? null : count(r.replaced_at, 'replaced_at'),
    nodeid: count(r.nodeid, 'nodeid'),
    keysChangedAt: r.keys_changed_at === null ? null : count(r.keys_changed_at, 'keys_changed_at'),
  };
}

/** A `nodes` row as our node of `app`, with Mozilla's id. */
export function parseNode(r: RawNode, app: string): { id: number; node: Node } {
  return {
    id: count(r.id, 'id'),
    node: {
      service: app,
      url: r.node,
      capacity: count(r.capacity, 'capacity'),
      currentLoad: count(r.current_load, 'current_load'),
      available: count(r.available, 'available'),
      downed: integer(r.downed, 'downed') !== 0n,
      backoff: integer(r.backoff, 'backoff') !== 0n,
    },
  };
}

/** Our application name for a Mozilla service: `sync-1.5` → `sync` (its name without the version). */
export function appOf(service: string): string {
  return /^(.+)-\d+(?:\.\d+)*$/.exec(service)?.[1] ?? service;
}

/** The account's rows in get_user's order: highest generation, then newest, then highest uid. */
function currentFirst(a: MozillaUser, b: MozillaUser): number {
  const gen = (u: MozillaUser) => (u.generation === 'retired' ? Infinity : u.generation);
  return gen(b) - gen(a) || b.createdAt - a.createdAt || b.uid - a.uid;
}

/**
 * The uids whose node slot went on to the account's next row. Mozilla adds one
 * to a node's current_load when it allocates an account to the node; a row
 * that replaces another on the same node (a client-state change) keeps the
 * slot and adds nothing. Such a replaced uid is imported as released, as
 * login here marks a replaced uid whose account came back to its node
 * (directory rules.ts assignment): so a node's imported load equals its live
 * users plus its unreleased replaced uids, and purge gives back only the
 * slots Mozilla counted.
 */
export function slotsPassedOn(rows: readonly MozillaUser[]): Set<number> {
  const byAge = [...rows].sort((a, b) => a.createdAt - b.createdAt || a.uid - b.uid);
  const passed = new Set<number>();
  for (let i = 0; i + 1 < byAge.length; i++) if (byAge[i + 1].nodeid === byAge[i].nodeid) passed.add(byAge[i].uid);
  return passed;
}

export interface ResolvedAccount {
  user: User;
  /** Mozilla held more than one live row (a race its next login would have repaired). */
  severalLive: boolean;
  /** Deleted at Mozilla: no live uid here (uid 0), every uid replaced. */
  retired: boolean;
  /** The current uid has no node (Mozilla replaced it, or its node is gone): it gets one at its next login. */
  unassigned: boolean;
  /** The oldest replaced uids beyond the MAX_REPLACED a record keeps; their data stays where it is. */
  replacedDropped: number;
}

/**
 * One account's rows (all of one e-mail in one service) as our record.
 * `nodeUrl` maps Mozilla's node ids to the URLs imported for them.
 */
export function resolveAccount(rows: MozillaUser[], app: string, nodeUrl: (id: number) => string | undefined): ResolvedAccount {
  if (rows.length === 0) throw new Error('an account has at least one row');
  const ordered = [...rows].sort(currentFirst);
  const current = ordered[0];
  const retired = current.generation === 'retired';
  const others = retired ? ordered : ordered.slice(1);
  const passedOn = slotsPassedOn(rows);
  const replaced: ReplacedUser[] = others
    .map((r) => {
      const node = nodeUrl(r.nodeid) ?? '';
      // Mozilla marks a stray live row replaced at the current row's creation.
      return { uid: r.uid, node, replacedAt: r.replacedAt ?? current.createdAt, released: node !== '' && passedOn.has(r.uid) };
    })
    .sort((a, b) => a.replacedAt - b.replacedAt || a.uid - b.uid);
  const seen = [...new Set([...others].sort((a, b) => a.createdAt - b.createdAt || a.uid - b.uid).map((r) => r.clientState))].filter(
    (s) => s !== '' && s !== current.clientState,
  );
  const node = !retired && current.replacedAt === null ? (nodeUrl(current.nodeid) ?? '') : '';
  const user: User = {
    service: app,
    email: normalizeEmail(current.email),
    uid: retired ? RETIRED_UID : current.uid,
    node,
    generation: current.generation === 'retired' ? 0 : current.generation,
    clientState: retired ? '' : current.clientState,
    seenClientStates: retired ? [] : seen.slice(-MAX_SEEN_CLIENT_STATES),
    replaced: replaced.slice(-MAX_REPLACED),
    createdAt: Math.min(...rows.map((r) => r.createdAt)),
    ...(!retired && current.keysChangedAt !== null ? { keysChangedAt: current.keysChangedAt } : {}),
  };
  return {
    user,
    severalLive: rows.filter((r) => r.replacedAt === null).length > 1,
    retired,
    unassigned: !retired && node === '',
    replacedDropped: Math.max(0, replaced.length - MAX_REPLACED),
  };
}

// ---- checks made before anything is written ----

/**
 * What the source's e-mails say before any is imported: how many rows
 * each domain has (as login spells domains), and the spellings that are not
 * the one login uses (domain case, NFD): only an address with such a spelling
 * can meet another spelling of itself, so only those accounts wait to be
 * grouped at the end, and memory stays small.
 */
export class EmailSurvey {
  readonly domains = new Map<string, number>();
  /** Login's spelling of each address that some row spells otherwise. */
  readonly respelled = new Set<string>();

  add(email: string): void {
    const domain = emailDomain(email);
    this.domains.set(domain, (this.domains.get(domain) ?? 0) + 1);
    const key = normalizeEmail(email);
    if (key !== email) this.respelled.add(key);
  }
}

/**
 * Refused when accounts carry another e-mail domain than OAUTH_EMAIL_DOMAIN
 * (DESIGN §11.4): a Bearer login looks the account up as
 * `<sub>@<OAUTH_EMAIL_DOMAIN>`, so each would get a new uid and empty storage.
 * BrowserID-era accounts log in with their own address: `anyDomain` takes them.
 */
export function emailDomainProblem(domains: ReadonlyMap<string, number>, expected: string, anyDomain: boolean): string | null {
  const others = [...domains].filter(([d]) => d !== expected).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  if (others.length === 0 || anyDomain) return null;
  const listed = others.slice(0, 5).map(([d, n]) => `${d} (${plural(n, 'row')})`).join(', ') + (others.length > 5 ? `, … ${others.length - 5} more` : '');
  return (
    `the accounts carry the e-mail domain ${listed}, but OAUTH_EMAIL_DOMAIN is ${expected}` +
    `${domains.has(expected) ? ` (${plural(domains.get(expected)!, 'row')} of ${expected})` : ''}: ` +
    `a Bearer login looks accounts up as <fxa uid>@${expected}, so these would get a new uid and empty storage. ` +
    `Set OAUTH_EMAIL_DOMAIN to Mozilla's fxa_email_domain, for login and for this command; ` +
    `or, for accounts that log in with BrowserID assertions under their own address, pass --any-email-domain`
  );
}

/** Refused when Mozilla's uids reach past what this store may take (MAX_IMPORTED_UID), naming the highest. */
export function uidRangeProblem(maxUid: bigint): string | null {
  if (maxUid <= BigInt(MAX_IMPORTED_UID)) return null;
  return (
    `the source holds uid ${maxUid}, above ${MAX_IMPORTED_UID}, the highest uid an import may bring: ` +
    `the uid counter continues above the highest imported uid and must stay below 2^53 for every account made here later. ` +
    `Nothing was written`
  );
}

/** Refused when one uid is on several rows of the source (any service): two accounts would share its data. */
export function duplicateUidProblem(uids: readonly string[]): string | null {
  if (uids.length === 0) return null;
  return `the source has uid ${uids.join(', ')} on more than one row: each uid must be one account's. Nothing was written; fix the source first`;
}

/** What login needs set, before it starts, to answer as Mozilla did (DESIGN §11.4). */
export interface LoginSettings {
  OAUTH_EMAIL_DOMAIN: string;
  METRICS_HASH_SECRET: string;
  NODE_TYPE: string;
}

export function loginSettings(emailDomainValue: string): LoginSettings {
  return {
    OAUTH_EMAIL_DOMAIN: emailDomainValue,
    METRICS_HASH_SECRET: "Mozilla's fxa_metrics_hash_secret (SYNC_TOKENSERVER__FXA_METRICS_HASH_SECRET; not in its database), so hashed_fxa_uid stays the same",
    NODE_TYPE: "Mozilla's node_type (SYNC_TOKENSERVER__NODE_TYPE: its storage nodes' database, e.g. mysql), so the answers' node_type stays the same",
  };
}

/** Consecutive rows of one e-mail, as the source's `ORDER BY email` delivers them. */
export async function* accounts<R extends { email: string }>(rows: AsyncIterable<R>): AsyncGenerator<R[]> {
  let group: R[] = [];
  for await (const row of rows) {
    if (group.length > 0 && row.email !== group[0].email) {
      yield group;
      group = [];
    }
    group.push(row);
  }
  if (group.length > 0) yield group;
}

/**
 * The database URL with `password` (MYSQL_PWD, PGPASSWORD) put in where it has
 * none, for the driver only: the URL on the command line stays without it.
 */
export function withPassword(url: string, password: string | undefined): string {
  if (password === undefined || password === '') return url;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return url;
  }
  if (u.password !== '' || u.username === '') return url;
  u.password = encodeURIComponent(password);
  return u.toString();
}

/** The database URL with its password hidden, for output and errors. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

/** `[#####·····]  45%  450000/1000000 rows`: the progress line on a terminal. */
export function progressLine(done: number, total: number, width = 30): string {
  const share = total > 0 ? Math.min(1, done / total) : 1;
  const filled = Math.round(share * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${String(Math.floor(share * 100)).padStart(3)}%  ${done}/${total} rows`;
}

// ---- the summary ----

export interface ImportProblem {
  /** The e-mail, or the node URL. */
  what: string;
  uids: number[];
  /** conflict: a uid of the account is another account's here (nothing is written then). */
  result: 'kept' | 'invalid' | 'conflict';
  detail: string;
}

/** An account whose rows spell its e-mail in several ways (domain case, NFC/NFD): one record, the other rows' uids replaced. */
export interface RespelledAccount {
  email: string;
  spellings: string[];
  uid: number;
  replacedUids: number[];
}

export interface ImportSummary {
  source: string;
  service: string;
  app: string;
  dryRun: boolean;
  uidCounter: { previous: number; current: number };
  nodes: { created: number; updated: number; unchanged: number; invalid: number };
  rows: number;
  accounts: number;
  users: { created: number; unchanged: number; kept: number; invalid: number; conflict: number };
  retired: number;
  unassigned: number;
  replacedUids: number;
  severalLive: number;
  replacedDropped: number;
  /** Accounts written from rows with several spellings of one e-mail; the first few listed. */
  respelled: number;
  respelledAccounts: RespelledAccount[];
  /** The first few accounts and nodes that were not imported as they are, and why. */
  problems: ImportProblem[];
  /** What to set on login before it starts. */
  settings: LoginSettings;
}

/** How many problems the summary lists by name. */
export const LISTED_PROBLEMS = 20;

export function emptySummary(source: string, service: string, app: string, dryRun: boolean, settings: LoginSettings = loginSettings(DEFAULT_EMAIL_DOMAIN)): ImportSummary {
  return {
    source,
    service,
    app,
    dryRun,
    uidCounter: { previous: 0, current: 0 },
    nodes: { created: 0, updated: 0, unchanged: 0, invalid: 0 },
    rows: 0,
    accounts: 0,
    users: { created: 0, unchanged: 0, kept: 0, invalid: 0, conflict: 0 },
    retired: 0,
    unassigned: 0,
    replacedUids: 0,
    severalLive: 0,
    replacedDropped: 0,
    respelled: 0,
    respelledAccounts: [],
    problems: [],
    settings,
  };
}

/** Accounts or nodes that did not land as Mozilla has them: the run's exit status is 1. */
export function importFailed(s: ImportSummary): boolean {
  return s.users.kept + s.users.invalid + s.users.conflict + s.nodes.invalid > 0;
}

function changed(s: ImportSummary): boolean {
  return s.nodes.created + s.nodes.updated + s.users.created > 0 || s.uidCounter.current !== s.uidCounter.previous;
}

export function formatImport(s: ImportSummary): string {
  const would = s.dryRun ? 'would be ' : '';
  const lines = [
    `${s.dryRun ? 'dry run: nothing written. ' : ''}${s.source}, service ${s.service} → application ${s.app}`,
    `nodes: ${s.nodes.created} ${would}created, ${s.nodes.updated} ${would}updated, ${s.nodes.unchanged} unchanged, ${s.nodes.invalid} invalid`,
    `accounts: ${s.accounts} (from ${s.rows} rows): ${s.users.created} ${would}created, ${s.users.unchanged} unchanged, ` +
      `${s.users.kept} kept as they are here, ${s.users.invalid} invalid${s.users.conflict > 0 ? `, ${s.users.conflict} with a uid another account holds here` : ''}`,
    `  ${s.replacedUids} replaced uids; ${s.retired} deleted accounts; ${s.unassigned} without a node (one is assigned at their next login); ` +
      `${s.severalLive} with several live rows (the current one kept, the others replaced)`,
  ];
  if (s.respelled > 0) {
    lines.push(`  ${s.respelled} with rows under several spellings of one e-mail (domain case, Unicode form): the current row kept, the others' uids replaced`);
    for (const r of s.respelledAccounts) lines.push(`    ${r.email} (uid ${r.uid}): ${r.spellings.map((x) => JSON.stringify(x)).join(', ')}; replaced uids ${r.replacedUids.join(', ') || 'none'}`);
    if (s.respelled > s.respelledAccounts.length) lines.push(`    … and ${s.respelled - s.respelledAccounts.length} more`);
  }
  if (s.replacedDropped > 0) lines.push(`  ${s.replacedDropped} oldest replaced uids beyond the ${MAX_REPLACED} a record keeps were left out (their data stays on their nodes)`);
  lines.push(`uid counter: ${s.uidCounter.previous} → ${s.uidCounter.current}${s.dryRun ? ' (would be)' : ''}; new uids start above it`);
  const unlisted = s.users.kept + s.users.invalid + s.users.conflict + s.nodes.invalid - s.problems.length;
  for (const p of s.problems) lines.push(`  ${p.result}: ${p.what}${p.uids.length > 0 ? ` (uid ${p.uids.join(', ')})` : ''}${p.detail ? `: ${p.detail}` : ''}`);
  if (unlisted > 0) lines.push(`  … and ${unlisted} more`);
  lines.push('set on login before it starts:');
  for (const [name, value] of Object.entries(s.settings)) lines.push(`  ${name}: ${value}`);
  lines.push(summaryLine(s));
  return lines.join('\n') + '\n';
}

export function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** The last line: what this run did, in one sentence. */
export function summaryLine(s: ImportSummary): string {
  if (!changed(s) && !importFailed(s)) {
    return `nothing to change: every node and account of ${s.service} is here already (${plural(s.nodes.unchanged, 'node')}, ${plural(s.users.unchanged, 'account')})`;
  }
  const verb = s.dryRun ? 'would import' : 'imported';
  const skipped = `${plural(s.users.kept + s.users.invalid + s.users.conflict, 'account')} and ${plural(s.nodes.invalid, 'node')} not imported (listed above)`;
  return `${verb} ${plural(s.users.created, 'account')} and ${plural(s.nodes.created + s.nodes.updated, 'node')} of ${s.service}${importFailed(s) ? `; ${skipped}` : ''}`;
}
