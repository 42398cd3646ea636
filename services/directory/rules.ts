// The login rules (DESIGN §3 step 6) as pure functions: given the stored
// record (or none) and the request, decide what to write. The service applies
// the decision with a compare-and-set and decides again if it lost a race.
import {
  BadRequest,
  InvalidClientState,
  InvalidGeneration,
  InvalidKeysChangedAt,
  MOZILLA_ERRORS,
  NewUsersDisabled,
  TooManyRequests,
  type ProtocolError,
} from '../../lib/errors.js';
import { isLiveUid } from '../../lib/token.js';
import type { UserRecord } from './store.js';

export interface LoginInput {
  service: string;
  email: string;
  /** Absent when the identity provider supplies no generation. */
  generation?: number;
  /** DESIGN §9.2, ms; absent or 0: none. */
  keysChangedAt?: number;
  /** Bearer (DESIGN §9.2): a missing generation is none. Otherwise (BrowserID, #13) it counts as 0 against a recorded one. */
  missingGenerationIsNone?: boolean;
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

/** A user's first record: the versions are §9.2's updates applied to a record that has none. */
export function newUserRecord(req: LoginInput, uid: number, now: number): UserRecord {
  return {
    service: req.service,
    email: req.email,
    uid,
    node: '',
    ...updatedVersions({ generation: 0, keysChangedAt: null }, claimsOf(req)),
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

/** `a > b` when both sides are present: DESIGN §9.2, "a comparison with a missing side is false". */
export function above(a: number | undefined, b: number | undefined): boolean {
  return a !== undefined && b !== undefined && a > b;
}

/** What a login carries, as the DESIGN §9.2 rules read it. */
export interface Claims {
  /** a_gen; for the generation check (rule 6) only, BrowserID's missing one reads as 0. */
  generation?: number;
  /** Rule 6's a_gen: `generation`, or 0 for a BrowserID login without one (#13). */
  generationForCheck?: number;
  /** a_kca; 0 means none. */
  keysChangedAt?: number;
  clientState: string;
}

export function claimsOf(req: LoginInput): Claims {
  return {
    generation: req.generation,
    // #13 (BrowserID): a missing generation counts as 0, as on Mozilla's Python server.
    // DESIGN §9.2 (Bearer): it is missing, and comparisons with it are false.
    generationForCheck: req.generation ?? (req.missingGenerationIsNone ? undefined : 0),
    keysChangedAt: req.keysChangedAt || undefined,
    clientState: req.clientState,
  };
}

/**
 * DESIGN §9.2's checks in order, first failure wins; null when the login may
 * proceed. `u` is the stored record, `a` the request.
 */
export function loginProblem(u: UserRecord, a: Claims): ProtocolError | null {
  const uKca = u.keysChangedAt ?? undefined;
  const changed = a.clientState !== u.clientState;
  // 1. Keys changed without the generation catching up.
  if (above(a.keysChangedAt, uKca) && above(a.keysChangedAt, a.generation)) {
    return new InvalidKeysChangedAt('keys_changed_at rose above the generation');
  }
  // 2.
  if (a.clientState === '' && (u.clientState !== '' || u.seenClientStates.length > 0)) {
    return new InvalidClientState(MOZILLA_ERRORS.emptyClientState.entry.description);
  }
  // 3.
  if (u.seenClientStates.includes(a.clientState)) return new InvalidClientState(MOZILLA_ERRORS.staleClientState.entry.description);
  // 4, 5. `a <= u` is `!(a > u)` only when both are present.
  if (changed && a.generation !== undefined && !above(a.generation, u.generation)) {
    return new InvalidClientState(MOZILLA_ERRORS.clientStateWithoutGeneration.entry.description);
  }
  if (changed && a.keysChangedAt !== undefined && uKca !== undefined && !above(a.keysChangedAt, uKca)) {
    return new InvalidClientState(MOZILLA_ERRORS.clientStateWithoutKeysChangedAt.entry.description);
  }
  // 6.
  if (above(u.generation, a.generationForCheck)) {
    return new InvalidGeneration(a.generation === undefined ? 'a generation is required once one is recorded' : 'generation is older than the recorded one');
  }
  // 7, 8.
  if (above(uKca, a.keysChangedAt)) return new InvalidKeysChangedAt('keys_changed_at is older than the recorded one');
  if (a.keysChangedAt === undefined && (uKca ?? 0) !== 0) return new InvalidKeysChangedAt('keys_changed_at is required once one is recorded');
  return null;
}

/** DESIGN §9.2's updates: the generation and keys_changed_at to record after an accepted login. */
export function updatedVersions(u: Pick<UserRecord, 'generation' | 'keysChangedAt'>, a: Claims): { generation: number; keysChangedAt: number | null } {
  const uKca = u.keysChangedAt ?? undefined;
  const keysChangedAt = a.keysChangedAt !== undefined && !above(uKca, a.keysChangedAt) ? a.keysChangedAt : u.keysChangedAt;
  let generation = u.generation;
  if (a.generation !== undefined) {
    if (a.generation >= u.generation) generation = a.generation;
  } else if (a.keysChangedAt !== undefined && a.keysChangedAt > u.generation && (uKca === undefined || a.keysChangedAt > uKca)) {
    // Keys changed, and the client reports no generation: the change is one.
    generation = a.keysChangedAt;
  }
  return { generation, keysChangedAt };
}

/**
 * A record whose account was deleted (RetireUser) has no current uid: uid 0.
 * Uids start at 1, so no live record has it.
 */
export const RETIRED_UID = 0;

export function isRetired(record: UserRecord): boolean {
  return record.uid === RETIRED_UID;
}


export function decideLogin(existing: UserRecord | null, req: LoginInput, now: number, policy: LoginPolicy): LoginDecision {
  if (req.generation !== undefined && !isValidGeneration(req.generation)) {
    return { action: 'reject', error: new InvalidGeneration('generation must be a non-negative integer') };
  }
  if (req.keysChangedAt !== undefined && !isValidGeneration(req.keysChangedAt)) {
    return { action: 'reject', error: new InvalidKeysChangedAt('keys_changed_at must be a non-negative integer') };
  }
  const claims = claimsOf(req);
  if (existing === null || isRetired(existing)) {
    if (!req.allowNewUsers) return { action: 'reject', error: new NewUsersDisabled('new users are not accepted') };
    const fresh = (uid: number) => newUserRecord(req, uid, now);
    if (existing === null) return { action: 'create', build: fresh };
    // The deleted account's old uids stay listed for clean-up.
    return { action: 'newUid', build: (uid) => ({ ...fresh(uid), replaced: existing.replaced, version: existing.version + 1 }) };
  }
  const problem = loginProblem(existing, claims);
  if (problem) return { action: 'reject', error: problem };
  const { generation, keysChangedAt } = updatedVersions(existing, claims);

  if (req.clientState !== existing.clientState) {
    // Each change costs a uid and a node slot: a per-user daily allowance bounds the churn.
    const recent = recentStateChanges(existing, now);
    const limited = stateChangeLimit(recent, policy.clientStateChangesPerDay, now);
    if (limited) return { action: 'reject', error: limited };
    return { action: 'newUid', build: (uid) => ({ ...withNewUid(existing, req, generation, uid, now, recent), keysChangedAt }) };
  }
  if (generation !== existing.generation || keysChangedAt !== existing.keysChangedAt) {
    return { action: 'update', record: { ...existing, generation, keysChangedAt, version: existing.version + 1 } };
  }
  return { action: 'keep' };
}

/**
 * RetireUser's write (DESIGN §9.4): the live uid joins the replaced list and
 * the record keeps no current uid, node or client-state history, so the next
 * login starts afresh. Its slot is marked given back: the caller releases it
 * now. Null when the record is retired already (idempotent).
 */
export function retirement(existing: UserRecord, now: number): UserRecord | null {
  if (isRetired(existing)) return null;
  return {
    ...existing,
    uid: RETIRED_UID,
    node: '',
    clientState: '',
    seenClientStates: [],
    stateChanges: [],
    replaced: [...existing.replaced, { uid: existing.uid, node: existing.node, replacedAt: now, released: true }].slice(-MAX_REPLACED),
    version: existing.version + 1,
  };
}

/** RaiseGeneration's write (DESIGN §9.4): never lowers; null when there is nothing to raise. */
export function raisedGeneration(existing: UserRecord, generation: number): UserRecord | null {
  if (isRetired(existing) || generation <= existing.generation) return null;
  return { ...existing, generation, version: existing.version + 1 };
}

/**
 * AssignNode's write: the node for the user's current uid, if it has none yet
 * (otherwise null: the stored record wins). Replaced uids of this user on the
 * same node are marked released and counted: the account holds one slot there
 * again, so their slots go back to the node now rather than when their data is
 * purged. Replaced uids on other nodes keep their slots until then.
 */
export function assignment(existing: UserRecord, uid: number, node: string): { record: UserRecord; released: number } | null {
  // A retired record (uid 0) gets no node: a login that raced the account's deletion must not
  // turn it into a live uid 0 that every such race would share.
  if (!isLiveUid(uid) || existing.uid !== uid || existing.node !== '') return null;
  let released = 0;
  const replaced = existing.replaced.map((r) => {
    if (r.released || r.node !== node) return r;
    released++;
    return { ...r, released: true };
  });
  return { record: { ...existing, node, replaced, version: existing.version + 1 }, released };
}
