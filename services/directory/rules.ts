// The login rules (DESIGN §3 step 6) as pure functions: given the stored
// record (or none) and the request, decide what to write. The service applies
// the decision with a compare-and-set and decides again if it lost a race.
import {
  BadRequest,
  InvalidClientState,
  InvalidGeneration,
  NewUsersDisabled,
  TooManyRequests,
  type ProtocolError,
} from '../../lib/errors.js';
import type { UserRecord } from './store.js';

export interface LoginInput {
  service: string;
  email: string;
  /** Absent when the identity provider supplies no generation. */
  generation?: number;
  /** '' when the client sent no X-Client-State. */
  clientState: string;
  allowNewUsers: boolean;
}

export type LoginDecision =
  | { action: 'reject'; error: ProtocolError }
  /** Nothing to write: answer with the stored record. */
  | { action: 'keep' }
  /** Same uid, higher generation: replace the stored record with `record`. */
  | { action: 'update'; record: UserRecord }
  /** Needs a fresh uid: insert (create) or replace (newUid) with build(uid). */
  | { action: 'create' | 'newUid'; build(uid: number): UserRecord };

/** What the directory's configuration decides. */
export interface LoginPolicy {
  /** CLIENT_STATE_CHANGES_PER_DAY. */
  clientStateChangesPerDay: number;
}

/**
 * Bounds on a record's lists, so churn cannot grow it without limit. Older
 * seen states beyond the cap may come back, but only after this many changes,
 * which the rate limit spreads over days.
 */
export const MAX_SEEN_CLIENT_STATES = 100;
export const MAX_REPLACED = 100;
const DAY_MS = 86_400_000;

const CLIENT_STATE = /^[a-zA-Z0-9._-]{0,32}$/;
const MAX_KEY_LENGTH = 255;

/** Malformed request fields (login validates them too; this guards the store from other callers). */
export function requestProblem(req: { service: string; email: string; clientState?: string }): BadRequest | null {
  if (req.service === '' || req.service.length > MAX_KEY_LENGTH) return new BadRequest('service must be 1 to 255 characters');
  if (req.email === '' || req.email.length > MAX_KEY_LENGTH) return new BadRequest('email must be 1 to 255 characters');
  if (req.clientState !== undefined && !CLIENT_STATE.test(req.clientState)) {
    return new BadRequest('client state must match [a-zA-Z0-9._-]{0,32}');
  }
  return null;
}

export function isValidGeneration(generation: number): boolean {
  return Number.isSafeInteger(generation) && generation >= 0;
}

export function newUserRecord(req: LoginInput, uid: number, now: number): UserRecord {
  return {
    service: req.service,
    email: req.email,
    uid,
    node: '',
    generation: req.generation ?? 0,
    clientState: req.clientState,
    seenClientStates: [],
    replaced: [],
    stateChanges: [],
    createdAt: now,
    version: 1,
  };
}

/**
 * The user moves to a new uid with no node: the old client state joins the
 * seen list (so it can never come back), the old uid/node wait for clean-up.
 */
export function withNewUid(
  existing: UserRecord,
  req: LoginInput,
  generation: number,
  uid: number,
  now: number,
  recentChanges: number[],
): UserRecord {
  const seen = existing.clientState !== '' && !existing.seenClientStates.includes(existing.clientState)
    ? [...existing.seenClientStates, existing.clientState]
    : existing.seenClientStates;
  return {
    ...existing,
    uid,
    node: '',
    generation,
    clientState: req.clientState,
    seenClientStates: seen.slice(-MAX_SEEN_CLIENT_STATES),
    replaced: [...existing.replaced, { uid: existing.uid, node: existing.node, replacedAt: now, released: false }].slice(-MAX_REPLACED),
    stateChanges: [...recentChanges, now],
    version: existing.version + 1,
  };
}

/** The changes of the last 24 hours, oldest first. */
export function recentStateChanges(record: UserRecord, now: number): number[] {
  return record.stateChanges.filter((t) => t > now - DAY_MS && t <= now);
}

/** A 429 when `recent` changes already fill the day's allowance, with the seconds until one expires; else null. */
export function stateChangeLimit(recent: number[], limit: number, now: number): TooManyRequests | null {
  if (recent.length < limit) return null;
  // The change that must leave the 24-hour window before another fits.
  const expiring = recent[recent.length - limit];
  const retryAfter = Math.max(1, Math.ceil((expiring + DAY_MS - now) / 1000));
  return new TooManyRequests(`at most ${limit} client-state changes in 24 hours`, retryAfter);
}

/** Why a client-state change is refused, or null when it is allowed. */
export function clientStateChangeProblem(existing: UserRecord, req: LoginInput, generationIncreased: boolean): string | null {
  // The states differ, so an empty one follows a non-empty one.
  if (req.clientState === '') return 'an empty client state cannot follow a non-empty one';
  if (existing.seenClientStates.includes(req.clientState)) return 'stale client state';
  if (req.generation !== undefined && !generationIncreased) return 'a new client state needs a new generation';
  return null;
}

export function decideLogin(existing: UserRecord | null, req: LoginInput, now: number, policy: LoginPolicy): LoginDecision {
  if (req.generation !== undefined && !isValidGeneration(req.generation)) {
    return { action: 'reject', error: new InvalidGeneration('generation must be a non-negative integer') };
  }
  if (existing === null) {
    if (!req.allowNewUsers) return { action: 'reject', error: new NewUsersDisabled('new users are not accepted') };
    return { action: 'create', build: (uid) => newUserRecord(req, uid, now) };
  }
  if (req.generation !== undefined && req.generation < existing.generation) {
    return { action: 'reject', error: new InvalidGeneration('generation is older than the recorded one') };
  }
  // A missing generation counts as 0, as on Mozilla's servers: once the IdP has
  // sent one, an assertion without it is older than the recorded one.
  if (req.generation === undefined && existing.generation > 0) {
    return { action: 'reject', error: new InvalidGeneration('a generation is required once one is recorded') };
  }
  // An absent generation (never recorded either) changes nothing.
  const generationIncreased = req.generation !== undefined && req.generation > existing.generation;
  const generation = generationIncreased ? req.generation! : existing.generation;

  if (req.clientState !== existing.clientState) {
    const problem = clientStateChangeProblem(existing, req, generationIncreased);
    if (problem) return { action: 'reject', error: new InvalidClientState(problem) };
    // Each change costs a uid and a node slot: a per-user daily allowance bounds the churn.
    const recent = recentStateChanges(existing, now);
    const limited = stateChangeLimit(recent, policy.clientStateChangesPerDay, now);
    if (limited) return { action: 'reject', error: limited };
    return { action: 'newUid', build: (uid) => withNewUid(existing, req, generation, uid, now, recent) };
  }
  if (generationIncreased) return { action: 'update', record: { ...existing, generation, version: existing.version + 1 } };
  return { action: 'keep' };
}

/**
 * AssignNode's write: the node for the user's current uid, if it has none yet
 * (otherwise null: the stored record wins). Replaced uids of this user on the
 * same node are marked released and counted: the account holds one slot there
 * again, so their slots go back to the node now rather than when their data is
 * purged. Replaced uids on other nodes keep their slots until then.
 */
export function assignment(existing: UserRecord, uid: number, node: string): { record: UserRecord; released: number } | null {
  if (existing.uid !== uid || existing.node !== '') return null;
  let released = 0;
  const replaced = existing.replaced.map((r) => {
    if (r.released || r.node !== node) return r;
    released++;
    return { ...r, released: true };
  });
  return { record: { ...existing, node, replaced, version: existing.version + 1 }, released };
}
