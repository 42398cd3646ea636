// Text output of the CLI: pure functions from gRPC replies to what a person
// reads. (--json prints the replies themselves.)
import type { Node } from '../lib/gen/nodeassign.js';
import type { User } from '../lib/gen/directory.js';

export function nodeState(n: Pick<Node, 'downed' | 'backoff'>): string {
  const flags = [n.downed ? 'down' : '', n.backoff ? 'backoff' : ''].filter(Boolean);
  return flags.length > 0 ? flags.join(',') : 'up';
}

/** Left-aligned columns, two spaces apart; the last column is not padded. */
export function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ')).join('\n') + '\n';
}

export function formatNodes(nodes: Array<Node & { liveUsers: number }>): string {
  if (nodes.length === 0) return 'no nodes\n';
  return table([
    ['APP', 'URL', 'CAPACITY', 'LOAD', 'AVAILABLE', 'USERS', 'STATE'],
    ...nodes.map((n) => [n.service, n.url, String(n.capacity), String(n.currentLoad), String(n.available), String(n.liveUsers), nodeState(n)]),
  ]);
}

export function formatNode(verb: string, n: Node): string {
  return `${verb} ${n.service} ${n.url}: capacity ${n.capacity}, load ${n.currentLoad}, available ${n.available}, ${nodeState(n)}\n`;
}

export function formatRemoved(app: string, url: string, removed: boolean, unassigned: number): string {
  const head = removed ? `removed ${app} ${url}` : `${app} ${url} was not registered (already removed?)`;
  const users = unassigned === 1 ? '1 user' : `${unassigned} users`;
  return `${head}; ${users} unassigned (they get a new node at their next login)\n`;
}

function when(ms: number): string {
  return ms > 0 ? new Date(ms).toISOString() : '-';
}

export function formatUser(u: User): string {
  const rows = [
    ['app', u.service],
    ['email', u.email],
    // uid 0: RetireUser (account deleted); the next login gets a new uid.
    ['uid', u.uid === 0 ? '(none: account deleted)' : String(u.uid)],
    ['node', u.node || '(none: assigned at next login)'],
    ['generation', String(u.generation)],
    ['keys changed', u.keysChangedAt === undefined ? '(none)' : String(u.keysChangedAt)],
    ['client state', u.clientState || '(none)'],
    ['seen states', u.seenClientStates.length > 0 ? u.seenClientStates.join(', ') : '(none)'],
    ['created', when(u.createdAt)],
    ['replaced', u.replaced.length > 0 ? '' : '(none)'],
  ];
  const head = rows.map(([k, v]) => `${`${k}:`.padEnd(14)}${v}`.trimEnd()).join('\n') + '\n';
  return head + u.replaced.map((r) => `  uid ${r.uid} on ${r.node || '(no node)'}, replaced ${when(r.replacedAt)}\n`).join('');
}

export function formatSetup(results: Array<{ node: Node; created: boolean }>): string {
  return results.map((r) => formatNode(r.created ? 'registered' : 'already registered', r.node)).join('');
}

/** A page of `users list`: live users, or (replaced) their replaced records, one per line; then how to continue. */
export function formatUserList(users: User[], next: string, replaced: boolean, node?: string): string {
  const rows = replaced
    ? users.flatMap((u) =>
        u.replaced.filter((r) => node === undefined || r.node === node).map((r) => [u.email, String(r.uid), r.node || '-', when(r.replacedAt)]),
      )
    : users.map((u) => [u.email, String(u.uid), u.node || '-', String(u.generation), when(u.createdAt)]);
  const head = replaced ? ['EMAIL', 'OLD UID', 'NODE', 'REPLACED'] : ['EMAIL', 'UID', 'NODE', 'GENERATION', 'CREATED'];
  const body = rows.length > 0 ? table([head, ...rows]) : replaced ? 'no replaced records\n' : 'no users\n';
  return body + (next ? `more: --after ${next}\n` : '');
}

/** One node's reconcile: its load, what the records call for, and what was done. */
export interface ReconcileRow {
  service: string;
  url: string;
  load: number;
  expected: number;
  outcome: string;
}

const RECONCILE_OUTCOMES: Record<string, string> = {
  ok: 'ok',
  corrected: 'corrected',
  found: 'would correct (dry run)',
  changed: 'load kept changing: run again',
  gone: 'node removed meanwhile',
};

export function formatReconcile(rows: ReconcileRow[]): string {
  if (rows.length === 0) return 'no nodes\n';
  return table([
    ['APP', 'URL', 'LOAD', 'RECORDS', 'DRIFT', 'RESULT'],
    ...rows.map((r) => {
      const drift = r.load - r.expected;
      return [r.service, r.url, String(r.load), String(r.expected), drift > 0 ? `+${drift}` : String(drift), RECONCILE_OUTCOMES[r.outcome] ?? r.outcome];
    }),
  ]);
}
