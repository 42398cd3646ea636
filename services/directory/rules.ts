// The login rules (DESIGN §3 step 6) as pure functions: given the stored
// record (or none) and the request, decide what to write. The service applies
// the decision with a compare-and-set and decides again if it lost a race.
import {
  BadRequest,
  InvalidClientState,
  InvalidGeneration,
  NewUsersDisabled,
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
    createdAt: now,
    version: 1,
  };
}

/**
 * The user moves to a new uid with no node: the old client state joins the
 * seen list (so it can never come back), the old uid/node wait for clean-up.
 */
export function withNewUid(existing: UserRecord, req: LoginInput, generation: number, uid: number, now: number): UserRecord {
  const seen = existing.clientState !== '' && !existing.seenClientStates.includes(existing.clientState)
    ? [...existing.seenClientStates, existing.clientState]
    : existing.seenClientStates;
  return {
    ...existing,
    uid,
    node: '',
    generation,
    clientState: req.clientState,
    seenClientStates: seen,
    replaced: [...existing.replaced, { uid: existing.uid, node: existing.node, replacedAt: now }],
    version: existing.version + 1,
  };
}

/** Why a client-state change is refused, or null when it is allowed. */
export function clientStateChangeProblem(existing: UserRecord, req: LoginInput, generationIncreased: boolean): string | null {
  // The states differ, so an empty one follows a non-empty one.
  if (req.clientState === '') return 'an empty client state cannot follow a non-empty one';
  if (existing.seenClientStates.includes(req.clientState)) return 'stale client state';
  if (req.generation !== undefined && !generationIncreased) return 'a new client state needs a new generation';
  return null;
}

export function decideLogin(existing: UserRecord | null, req: LoginInput, now: number): LoginDecision {
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
    return { action: 'newUid', build: (uid) => withNewUid(existing, req, generation, uid, now) };
  }
  if (generationIncreased) return { action: 'update', record: { ...existing, generation, version: existing.version + 1 } };
  return { action: 'keep' };
}
