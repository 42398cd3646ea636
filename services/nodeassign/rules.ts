// Allocation rules (DESIGN §3 step 7) as pure functions: which nodes may take
// a user, which one should, and how many slots to open when none is left.
import { BadRequest } from '../../lib/errors.js';
import type { NodeRecord } from './store.js';

/** A node may take a new user: slots left, room below capacity, up, not backing off. */
export function isEligible(node: NodeRecord): boolean {
  return node.available > 0 && node.currentLoad < node.capacity && !node.downed && !node.backoff;
}

/**
 * A node whose slots may be opened again when no node has any (Mozilla's
 * release_capacity): none left, room below capacity, not down. A node in
 * backoff counts too, so that it has slots the moment its backoff ends.
 */
export function isReleasable(node: NodeRecord): boolean {
  return node.available <= 0 && node.currentLoad < node.capacity && !node.downed;
}

export function loadRatio(node: NodeRecord): number {
  return node.currentLoad / node.capacity;
}

/** Eligible nodes, least loaded (load / capacity) first; ties by url so the order is deterministic. */
export function rankNodes(nodes: NodeRecord[]): NodeRecord[] {
  return nodes
    .filter(isEligible)
    .sort((a, b) => loadRatio(a) - loadRatio(b) || (a.url < b.url ? -1 : a.url > b.url ? 1 : 0));
}

export function pickNode(candidates: NodeRecord[]): NodeRecord | null {
  return rankNodes(candidates)[0] ?? null;
}

// capacity × rate carries float noise (100 × 0.7 = 70.00000000000001); a
// relative epsilon keeps such products from rounding up a whole slot.
function ceilShare(capacity: number, rate: number): number {
  const x = capacity * rate;
  return Math.ceil(x - x * 1e-12);
}

/** Slots a new node opens with: ceil(capacity × rate), at most capacity. */
export function initialAvailable(capacity: number, rate: number): number {
  return Math.min(ceilShare(capacity, rate), capacity);
}

/** Slots to open on a releasable node: ceil(capacity × rate), at most the room left (never negative). */
export function releasedAvailable(node: NodeRecord, rate: number): number {
  return Math.max(0, Math.min(ceilShare(node.capacity, rate), node.capacity - node.currentLoad));
}

const MAX_FIELD = 255;
const MAX_URL = 2048;

export function serviceProblem(service: string): BadRequest | null {
  if (service === '' || service.length > MAX_FIELD) return new BadRequest('service must be 1 to 255 characters');
  return null;
}

/**
 * The form a node URL must be written in: its WHATWG serialisation (what
 * `new URL(text).href` gives, as browsers, Node and the gateway read it),
 * without the trailing slash of an empty path, as nodes are stored.
 */
export function nodeUrlForm(u: URL): string {
  return u.href.replace(/\/+$/, '');
}

/** A host the URL may name: letters, digits, '-' and '.' (IPv4 too), or a bracketed IPv6 literal. */
const NODE_HOST = /^(?:[a-z0-9.-]+|\[[0-9a-f:.]+\])$/;

/**
 * A node URL as tokens and api_endpoint carry it (`nodes add` and `import`
 * alike): http(s), no credentials, query or fragment, a host of letters,
 * digits, '-' and '.' or an IP literal, and text that is exactly its
 * serialisation (nodeUrlForm). Text that parsers read differently (a TAB
 * inside the host, a backslash, dot segments, `%2e%2e`, a hex IPv4, an
 * upper-case scheme, a Unicode host) is refused, naming the form it would
 * have to take: a node is the same URL for every program that reads it.
 */
export function urlProblem(value: string): BadRequest | null {
  if (value === '' || value.length > MAX_URL) return new BadRequest('url must be 1 to 2048 characters');
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return new BadRequest(`url must be an absolute http or https URL, got ${JSON.stringify(value)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return new BadRequest(`url must be an http or https URL, got ${JSON.stringify(value)}`);
  if (u.username || u.password) return new BadRequest('url must not carry credentials');
  // Any '?' or '#' starts a query or fragment; an empty one ('…?', '…#') parses as none, but would still end up in api_endpoint.
  if (/[?#]/.test(value)) return new BadRequest('url must not carry a query or fragment');
  if (!NODE_HOST.test(u.hostname)) {
    return new BadRequest(`url's host must be letters, digits, '-' and '.', or an IP address, got ${JSON.stringify(u.hostname)}`);
  }
  const form = nodeUrlForm(u);
  if (value === form) return null;
  if (value.replace(/\/+$/, '') === form) return new BadRequest(`url must not end with a slash: write it as ${form}`);
  return new BadRequest(`url must be written as ${form}, the form every parser reads alike (its WHATWG serialisation), got ${JSON.stringify(value)}`);
}

export function capacityProblem(capacity: number): BadRequest | null {
  if (!Number.isSafeInteger(capacity) || capacity < 0) return new BadRequest('capacity must be a non-negative integer');
  return null;
}

/** The first problem with a node's identifying fields and (when given) its capacity, or null. */
export function nodeInputProblem(input: { service: string; url: string; capacity?: number }): BadRequest | null {
  return serviceProblem(input.service) ?? urlProblem(input.url) ?? (input.capacity === undefined ? null : capacityProblem(input.capacity));
}

/** A node an import carries whole (cli import): the fields of a new node, plus a load and free slots. */
export function importedNodeProblem(n: NodeRecord): BadRequest | null {
  const problem = nodeInputProblem(n);
  if (problem) return problem;
  if (!Number.isSafeInteger(n.currentLoad) || n.currentLoad < 0) return new BadRequest('current_load must be a non-negative integer');
  if (!Number.isSafeInteger(n.available) || n.available < 0) return new BadRequest('available must be a non-negative integer');
  return null;
}

export type NodeImportOutcome = 'created' | 'updated' | 'unchanged';

/** Importing `incoming` over `stored`: the imported state wins, so a node registered here before takes it. */
export function nodeImportOutcome(stored: NodeRecord | null, incoming: NodeRecord): NodeImportOutcome {
  if (!stored) return 'created';
  const same =
    stored.capacity === incoming.capacity &&
    stored.currentLoad === incoming.currentLoad &&
    stored.available === incoming.available &&
    stored.downed === incoming.downed &&
    stored.backoff === incoming.backoff;
  return same ? 'unchanged' : 'updated';
}

/** What the directory holds on one node: live users, and replaced uids whose slot was not given back. */
export interface NodeHolders {
  service: string;
  node: string;
  live: number;
  unreleased: number;
}

/** One node's load as read, and the load the directory's records call for. */
export interface LoadCheck {
  service: string;
  url: string;
  load: number;
  expected: number;
}

/**
 * Every node's load beside the load its records call for (live users plus
 * replaced uids not yet released; 0 for a node the directory has nothing on),
 * in the order of `nodes`. Records on a node that is not registered are left out.
 */
export function reconcileNodes(holders: NodeHolders[], nodes: Array<Pick<NodeRecord, 'service' | 'url' | 'currentLoad'>>): LoadCheck[] {
  const expected = new Map<string, number>();
  for (const h of holders) {
    const key = JSON.stringify([h.service, h.node]);
    expected.set(key, (expected.get(key) ?? 0) + h.live + h.unreleased);
  }
  return nodes.map((n) => ({ service: n.service, url: n.url, load: n.currentLoad, expected: expected.get(JSON.stringify([n.service, n.url])) ?? 0 }));
}

/** Slots counted that no record holds (positive), or records the load misses (negative). */
export function loadDrift(check: LoadCheck): number {
  return check.load - check.expected;
}

/** `available` after the load moves from `from` to `to`: slots move with the load, as claim and release move them; never below 0. */
export function correctedAvailable(available: number, from: number, to: number): number {
  return Math.max(0, available + from - to);
}
