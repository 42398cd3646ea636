// The import's rules (cli import) as pure functions: what a record carried
// over from another token server must look like, whether the store has it
// already, and how far the uid counter moves so that no imported uid is ever
// handed out again.
import { BadRequest } from '../../lib/errors.js';
import { isValidGeneration, MAX_REPLACED, MAX_SEEN_CLIENT_STATES, requestProblem, RETIRED_UID } from './rules.js';
import type { UidCounter, UidHolder, UserRecord } from './store.js';

/**
 * The highest uid an import may bring (2^52): the counter continues above the
 * highest imported uid, and this leaves as many uids again for accounts made
 * here before it would reach 2^53, past which a number no longer holds a uid exactly.
 */
export const MAX_IMPORTED_UID = 2 ** 52;

/** An imported record as the request carries it: a UserRecord without the store's own bookkeeping. */
export type ImportedUser = Omit<UserRecord, 'stateChanges' | 'version'>;

export type ImportOutcome = 'created' | 'unchanged' | 'kept';

const isTime = isValidGeneration;
const isUid = (uid: number) => Number.isSafeInteger(uid) && uid > 0 && uid <= MAX_IMPORTED_UID;

/** The first problem with an imported record, or null. */
export function importProblem(u: ImportedUser): BadRequest | null {
  const request = requestProblem(u);
  if (request) return request;
  if (u.uid !== RETIRED_UID && !isUid(u.uid)) return new BadRequest(`uid must be a positive integer up to ${MAX_IMPORTED_UID} (0: retired), got ${u.uid}`);
  if (u.uid === RETIRED_UID && (u.node !== '' || u.clientState !== '' || u.seenClientStates.length > 0)) {
    return new BadRequest('a retired record (uid 0) has no node, client state or seen client states');
  }
  if (!isValidGeneration(u.generation)) return new BadRequest('generation must be a non-negative integer');
  if (u.keysChangedAt !== null && !isValidGeneration(u.keysChangedAt)) return new BadRequest('keys_changed_at must be a non-negative integer');
  if (!isTime(u.createdAt)) return new BadRequest('created_at must be a non-negative integer');
  if (u.seenClientStates.length > MAX_SEEN_CLIENT_STATES) return new BadRequest(`at most ${MAX_SEEN_CLIENT_STATES} seen client states`);
  for (const state of u.seenClientStates) {
    const problem = requestProblem({ ...u, clientState: state });
    if (problem) return new BadRequest(`seen ${problem.message}`);
    if (state === '' || state === u.clientState) return new BadRequest('seen client states are non-empty and differ from the current one');
  }
  if (u.replaced.length > MAX_REPLACED) return new BadRequest(`at most ${MAX_REPLACED} replaced uids`);
  const uids = new Set(u.uid === RETIRED_UID ? [] : [u.uid]);
  for (const r of u.replaced) {
    if (!isUid(r.uid)) return new BadRequest(`replaced uid must be a positive integer up to ${MAX_IMPORTED_UID}, got ${r.uid}`);
    if (uids.has(r.uid)) return new BadRequest(`uid ${r.uid} appears twice`);
    uids.add(r.uid);
    if (!isTime(r.replacedAt)) return new BadRequest('replaced_at must be a non-negative integer');
  }
  return null;
}

/** The highest uid a record holds (live or replaced); 0 when it holds none. */
export function highestUid(u: Pick<ImportedUser, 'uid' | 'replaced'>): number {
  return Math.max(u.uid, ...u.replaced.map((r) => r.uid));
}

/** The record the store keeps for an import: a fresh record, as if its history had happened here. */
export function importedRecord(u: ImportedUser): UserRecord {
  return {
    ...u,
    seenClientStates: [...u.seenClientStates],
    replaced: u.replaced.map(({ uid, node, replacedAt, released }) => ({ uid, node, replacedAt, released })),
    stateChanges: [],
    version: 1,
  };
}

/** Whether `stored` is what importing `u` wrote (a purger's claim or later writes' version do not count). */
export function sameImport(stored: UserRecord, u: ImportedUser): boolean {
  const replaced = (r: UserRecord['replaced']) => r.map(({ uid, node, replacedAt, released }) => [uid, node, replacedAt, released]);
  return (
    stored.uid === u.uid &&
    stored.node === u.node &&
    stored.generation === u.generation &&
    stored.keysChangedAt === u.keysChangedAt &&
    stored.clientState === u.clientState &&
    stored.createdAt === u.createdAt &&
    JSON.stringify(stored.seenClientStates) === JSON.stringify(u.seenClientStates) &&
    JSON.stringify(replaced(stored.replaced)) === JSON.stringify(replaced(u.replaced))
  );
}

/**
 * What importing `u` does when the store holds `stored`: create it; nothing
 * (the same import ran before); or keep the stored record, which a login here
 * (or an import of other data) wrote and which must not be overwritten.
 */
export function importOutcome(stored: UserRecord | null, u: ImportedUser): ImportOutcome {
  if (!stored) return 'created';
  return sameImport(stored, u) ? 'unchanged' : 'kept';
}

export type Reservation = { refused: string } | { next: UidCounter };

/**
 * ReserveUids: the counter after reserving every uid up to `upTo` for an
 * import. Imported uids may only take numbers this store never handed out, so
 * the reservation is refused once the store has handed out a uid itself beyond
 * the last reservation (or before any); it never lowers the counter.
 */
export function uidReservation(counter: UidCounter, upTo: number): Reservation {
  if (upTo > MAX_IMPORTED_UID) {
    return { refused: `uid ${upTo} is above ${MAX_IMPORTED_UID}, the highest an import may bring: the uid counter must stay well below 2^53` };
  }
  if (counter.value !== counter.imported) {
    return {
      refused:
        `this store has handed out uids itself (up to ${counter.value}${counter.imported > 0 ? `, imports reserved up to ${counter.imported}` : ''}): ` +
        'imported uids could collide with them; import into a new store, before the first login',
    };
  }
  const top = Math.max(counter.value, upTo);
  return { next: { value: top, imported: top } };
}

/**
 * Why `u` cannot be written when the uid index gives some of its uids to
 * `holders`: those held by another account (one uid is one account's data on
 * its node); null when none is.
 */
export function uidConflict(u: Pick<ImportedUser, 'service' | 'email'>, holders: readonly UidHolder[]): string | null {
  const others = holders.filter((h) => h.service !== u.service || h.email !== u.email);
  if (others.length === 0) return null;
  return others.map((h) => `uid ${h.uid} is another account's here (${h.service} ${h.email})`).join('; ');
}
