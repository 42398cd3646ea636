// `import`'s rules as pure functions: Mozilla's tokenserver rows (its
// `services`, `nodes` and `users` tables, as the drivers hand them over) turned
// into our node and user records, and the text the command prints.
//
// Mozilla keeps one `users` row per uid an account ever had. Its get_user reads
// an account's rows, takes the one with the highest generation (then the newest)
// as current, and marks every other row replaced, repairing the races that
// left several live rows. The client states of the other rows are the ones it
// refuses to see again. We make the same choice once, at import.
import { normalizeEmail } from '../lib/email.js';
import type { ReplacedUser, User } from '../lib/gen/directory.js';
import type { Node } from '../lib/gen/nodeassign.js';
import { MAX_REPLACED, MAX_SEEN_CLIENT_STATES, RETIRED_UID } from '../services/directory/rules.js';

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
  const replaced: ReplacedUser[] = others
    // Mozilla marks a stray live row replaced at the current row's creation.
    .map((r) => ({ uid: r.uid, node: nodeUrl(r.nodeid) ?? '', replacedAt: r.replacedAt ?? current.createdAt, released: false }))
    .sort((a, b) => a.replacedAt - b.replacedAt || a.uid - b.uid);
  // Every row's slot still counts on its node (Mozilla never gives one back), so each replaced uid gives its slot back when purged.
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
  result: 'kept' | 'invalid';
  detail: string;
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
  users: { created: number; unchanged: number; kept: number; invalid: number };
  retired: number;
  unassigned: number;
  replacedUids: number;
  severalLive: number;
  replacedDropped: number;
  /** The first few accounts and nodes that were not imported as they are, and why. */
  problems: ImportProblem[];
}

/** How many problems the summary lists by name. */
export const LISTED_PROBLEMS = 20;

export function emptySummary(source: string, service: string, app: string, dryRun: boolean): ImportSummary {
  return {
    source,
    service,
    app,
    dryRun,
    uidCounter: { previous: 0, current: 0 },
    nodes: { created: 0, updated: 0, unchanged: 0, invalid: 0 },
    rows: 0,
    accounts: 0,
    users: { created: 0, unchanged: 0, kept: 0, invalid: 0 },
    retired: 0,
    unassigned: 0,
    replacedUids: 0,
    severalLive: 0,
    replacedDropped: 0,
    problems: [],
  };
}

/** Accounts or nodes that did not land as Mozilla has them: the run's exit status is 1. */
export function importFailed(s: ImportSummary): boolean {
  return s.users.kept + s.users.invalid + s.nodes.invalid > 0;
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
      `${s.users.kept} kept as they are here, ${s.users.invalid} invalid`,
    `  ${s.replacedUids} replaced uids; ${s.retired} deleted accounts; ${s.unassigned} without a node (one is assigned at their next login); ` +
      `${s.severalLive} with several live rows (the current one kept, the others replaced)`,
  ];
  if (s.replacedDropped > 0) lines.push(`  ${s.replacedDropped} oldest replaced uids beyond the ${MAX_REPLACED} a record keeps were left out (their data stays on their nodes)`);
  lines.push(`uid counter: ${s.uidCounter.previous} → ${s.uidCounter.current}${s.dryRun ? ' (would be)' : ''}; new uids start above it`);
  const unlisted = s.users.kept + s.users.invalid + s.nodes.invalid - s.problems.length;
  for (const p of s.problems) lines.push(`  ${p.result}: ${p.what}${p.uids.length > 0 ? ` (uid ${p.uids.join(', ')})` : ''}${p.detail ? `: ${p.detail}` : ''}`);
  if (unlisted > 0) lines.push(`  … and ${unlisted} more`);
  lines.push(summaryLine(s));
  return lines.join('\n') + '\n';
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** The last line: what this run did, in one sentence. */
export function summaryLine(s: ImportSummary): string {
  if (!changed(s) && !importFailed(s)) {
    return `nothing to change: every node and account of ${s.service} is here already (${plural(s.nodes.unchanged, 'node')}, ${plural(s.users.unchanged, 'account')})`;
  }
  const verb = s.dryRun ? 'would import' : 'imported';
  const skipped = `${plural(s.users.kept + s.users.invalid, 'account')} and ${plural(s.nodes.invalid, 'node')} not imported (listed above)`;
  return `${verb} ${plural(s.users.created, 'account')} and ${plural(s.nodes.created + s.nodes.updated, 'node')} of ${s.service}${importFailed(s) ? `; ${skipped}` : ''}`;
}
