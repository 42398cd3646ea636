// The purge's rules (issue #10) as pure functions on one user record. A purger
// claims a replaced record for a lease, deletes its data on the node, then
// removes it; each step is a compare-and-set of the record (service.ts), so two
// purgers and any number of logins can race: only the claimant removes a
// replaced record, once, and the live record is never touched.
import type { ReplacedUser, UserRecord } from './store.js';

export type ClaimOutcome =
  | { claimed: true; record: UserRecord; entry: ReplacedUser }
  | { claimed: false; reason: 'gone' | 'too-recent' | 'claimed' };

/**
 * Claims replaced uid `uid` for `claimant` until now + leaseMs, if it was
 * replaced at or before `replacedBefore` and no other purger's lease is running.
 * The same claimant may renew its claim.
 */
export function claimReplaced(
  record: UserRecord,
  uid: number,
  claimant: string,
  now: number,
  leaseMs: number,
  replacedBefore: number,
): ClaimOutcome {
  const entry = record.replaced.find((r) => r.uid === uid);
  if (!entry) return { claimed: false, reason: 'gone' };
  if (entry.replacedAt > replacedBefore) return { claimed: false, reason: 'too-recent' };
  if (entry.claim && entry.claim.by !== claimant && entry.claim.until > now) return { claimed: false, reason: 'claimed' };
  const claimed = { ...entry, claim: { by: claimant, until: now + leaseMs } };
  return {
    claimed: true,
    entry: claimed,
    record: { ...record, replaced: record.replaced.map((r) => (r === entry ? claimed : r)), version: record.version + 1 },
  };
}

export type RemoveOutcome =
  | { removed: true; record: UserRecord; entry: ReplacedUser; releaseSlot: boolean }
  | { removed: false; reason: 'gone' | 'not-claimed' };

/**
 * Removes replaced uid `uid` when `claimant` holds its claim (its node has
 * confirmed the deletion, or the purger was told to skip it). `releaseSlot`:
 * the node still counts the uid against its capacity, so the caller gives the
 * slot back; only the caller whose write wins gets it, so it is given back once.
 */
export function removeReplaced(record: UserRecord, uid: number, claimant: string): RemoveOutcome {
  const entry = record.replaced.find((r) => r.uid === uid);
  if (!entry) return { removed: false, reason: 'gone' };
  // Another purger took over after this one's lease ran out: it removes the record.
  if (entry.claim?.by !== claimant) return { removed: false, reason: 'not-claimed' };
  return {
    removed: true,
    entry,
    releaseSlot: !entry.released && entry.node !== '',
    record: { ...record, replaced: record.replaced.filter((r) => r !== entry), version: record.version + 1 },
  };
}

/** The record with only its newest `max` seen client states (they are kept oldest first), or null when it has no more. */
export function trimSeenClientStates(record: UserRecord, max: number): { record: UserRecord; removed: number } | null {
  const removed = record.seenClientStates.length - max;
  if (removed <= 0) return null;
  return { record: { ...record, seenClientStates: record.seenClientStates.slice(removed), version: record.version + 1 }, removed };
}
