// Directory gRPC handlers: read the record, let the rules decide, write with a
// compare-and-set (or an insert for a new user), and decide again on the
// fresh record when another request wrote first. LoginBatch makes the first
// attempt of all its logins together: one read, one write.
import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import { BadRequest, Conflict, RecordNotFound, ServiceUnavailable } from '../../lib/errors.js';
import { answeringStream, carriedError, logged, MAX_BATCH_ITEMS, OpenStreams, unary } from '../../lib/grpc.js';
import { requestIdFrom } from '../../lib/request-id.js';
import type { Logger } from '../../lib/log.js';
import type {
  AssignNodeReply,
  AssignNodeRequest,
  ClaimEventTokenReply,
  ClaimEventTokenRequest,
  ClaimReplacedReply,
  ClaimReplacedRequest,
  CountUsersReply,
  CountUsersRequest,
  DeleteReplacedReply,
  DeleteReplacedRequest,
  GetUserRequest,
  ListUsersReply,
  ListUsersRequest,
  TrimClientStatesReply,
  TrimClientStatesRequest,
  LoginBatchReply,
  LoginStreamReply,
  LoginStreamRequest,
  LoginBatchRequest,
  LoginRequest,
  LoginResult,
  RaiseGenerationReply,
  RaiseGenerationRequest,
  ReleaseEventTokenReply,
  ReleaseEventTokenRequest,
  RetiredUser,
  RetireUserReply,
  RetireUserRequest,
  UnassignNodeReply,
  UnassignNodeRequest,
  User,
  UserReply,
} from '../../lib/gen/directory.js';
import type { ImportUserResult, ImportUsersReply, ImportUsersRequest, ReserveUidsReply, ReserveUidsRequest } from '../../lib/gen/directory.js';
import { highestUid, importedRecord, importOutcome, importProblem, MAX_IMPORTED_UID, uidConflict, uidReservation, type ImportedUser } from './import-rules.js';
import { assignment, decideLogin, isValidGeneration, raisedGeneration, requestProblem, retirement, type LoginPolicy } from './rules.js';
import { claimReplaced, removeReplaced, trimSeenClientStates } from './purge-rules.js';
import { recordUids, UidTaken, type GuardedWrite, type ListPosition, type UserRecord, type UserStore } from './store.js';

/**
 * Writes lost to concurrent writers before giving up. Each loss means another
 * request wrote, so with up to 50 concurrent logins of one user every request
 * finishes; beyond that a 503 asks the client to come back.
 */
const MAX_ATTEMPTS = 50;

function toUser(r: UserRecord): User {
  return {
    service: r.service,
    email: r.email,
    uid: r.uid,
    node: r.node,
    generation: r.generation,
    ...(r.keysChangedAt !== null ? { keysChangedAt: r.keysChangedAt } : {}),
    clientState: r.clientState,
    seenClientStates: r.seenClientStates,
    replaced: r.replaced.map(({ uid, node, replacedAt, released }) => ({ uid, node, replacedAt, released })),
    createdAt: r.createdAt,
  };
}

function check(req: { service: string; email: string; clientState?: string }): void {
  const problem = requestProblem(req);
  if (problem) throw problem;
}

function contention(): ServiceUnavailable {
  return new ServiceUnavailable('too many concurrent updates of one user, try again');
}

export async function login(store: UserStore, req: LoginRequest, policy: LoginPolicy): Promise<UserRecord> {
  check(req);
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const existing = await store.get(req.service, req.email);
    const decision = decideLogin(existing, req, Date.now(), policy);
    switch (decision.action) {
      case 'reject':
        throw decision.error;
      case 'keep':
        return existing!;
      case 'update':
        if (await store.replace(decision.record, existing!.version)) return decision.record;
        break;
      case 'create': {
        const record = decision.build(await store.nextUid());
        if (await store.insert(record)) return record;
        break;
      }
      case 'newUid': {
        const record = decision.build(await store.nextUid());
        if (await store.replace(record, existing!.version)) return record;
        break;
      }
    }
  }
  throw contention();
}

export interface AssignResult {
  record: UserRecord;
  /** This call wrote the node. */
  assigned: boolean;
  /** Slots of replaced uids on that node to give back; only the writing call gets them, so they are given back once. */
  released: number;
}

/**
 * Read → decide → compare-and-set on one existing record, deciding again on
 * the fresh record after a lost race. `decide` returns the record to write (if
 * any) and the answer.
 */
async function updateRecord<T>(
  store: UserStore,
  req: { service: string; email: string },
  decide: (existing: UserRecord) => { write?: UserRecord; result: T },
): Promise<T> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const existing = await store.get(req.service, req.email);
    if (!existing) throw new RecordNotFound(`no user ${req.email} in ${req.service}`);
    const { write, result } = decide(existing);
    if (!write || (await store.replace(write, existing.version))) return result;
  }
  throw contention();
}

/** Records `node` for the user if it still has that uid and no node; otherwise the stored record wins. */
export async function assignNode(store: UserStore, req: AssignNodeRequest): Promise<AssignResult> {
  check(req);
  if (req.node === '') throw new BadRequest('node is required');
  return updateRecord<AssignResult>(store, req, (existing) => {
    const next = assignment(existing, req.uid, req.node);
    if (!next) return { result: { record: existing, assigned: false, released: 0 } };
    return { write: next.record, result: { record: next.record, assigned: true, released: next.released } };
  });
}

// ---- listing and purge ----

export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1000;

/** The opaque cursor of a listing: where the next page starts. */
export function encodeCursor(p: ListPosition): string {
  return Buffer.from(JSON.stringify([p.service, p.email])).toString('base64url');
}

export function decodeCursor(cursor: string): ListPosition {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string') return { service: v[0], email: v[1] };
  } catch {
    // falls through to the error below
  }
  throw new BadRequest('after: not a cursor from a previous page');
}

export async function listUsers(store: UserStore, req: ListUsersRequest): Promise<{ users: UserRecord[]; next: string }> {
  const limit = req.limit === 0 ? DEFAULT_PAGE : req.limit;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new BadRequest(`limit must be 1 to ${MAX_PAGE}`);
  const after = req.after === '' ? undefined : decodeCursor(req.after);
  const users = await store.list({ service: req.service, node: req.node, replaced: req.replaced, after, limit });
  // A full page may have a successor; the next call finds out (an empty page ends it).
  const last = users.length === limit ? users[users.length - 1] : undefined;
  return { users, next: last ? encodeCursor(last) : '' };
}

function purgeTarget(req: { service: string; email: string; uid: number; claimant: string }): void {
  check(req);
  if (!Number.isSafeInteger(req.uid) || req.uid <= 0) throw new BadRequest('uid must be a positive integer');
  if (req.claimant === '' || req.claimant.length > 255) throw new BadRequest('claimant must be 1 to 255 characters');
}

export async function claim(store: UserStore, req: ClaimReplacedRequest, now = Date.now()): Promise<ClaimReplacedReply> {
  purgeTarget(req);
  if (!Number.isSafeInteger(req.leaseMs) || req.leaseMs <= 0) throw new BadRequest('lease_ms must be positive');
  return updateRecord<ClaimReplacedReply>(store, req, (existing) => {
    const out = claimReplaced(existing, req.uid, req.claimant, now, req.leaseMs, req.replacedBefore);
    if (!out.claimed) return { result: { claimed: false, reason: out.reason, replaced: undefined } };
    const { uid, node, replacedAt, released } = out.entry;
    return { write: out.record, result: { claimed: true, reason: '', replaced: { uid, node, replacedAt, released } } };
  });
}

export async function deleteReplaced(store: UserStore, req: DeleteReplacedRequest): Promise<DeleteReplacedReply> {
  purgeTarget(req);
  return updateRecord<DeleteReplacedReply>(store, req, (existing) => {
    const out = removeReplaced(existing, req.uid, req.claimant);
    if (!out.removed) return { result: { deleted: false, reason: out.reason, releaseSlot: false, node: '' } };
    return { write: out.record, result: { deleted: true, reason: '', releaseSlot: out.releaseSlot, node: out.entry.node } };
  });
}

export async function trimClientStates(store: UserStore, req: TrimClientStatesRequest): Promise<TrimClientStatesReply> {
  check(req);
  if (!Number.isSafeInteger(req.max) || req.max < 0) throw new BadRequest('max must be a non-negative integer');
  return updateRecord(store, req, (existing) => {
    const out = trimSeenClientStates(existing, req.max);
    return out ? { write: out.record, result: { removed: out.removed } } : { result: { removed: 0 } };
  });
}

/**
 * Writes `change(record)` to every record of `email` (in `service`, or in all
 * when it is ''), each with its own compare-and-set, re-read after a lost race.
 * Returns the records written; a record `change` leaves alone (null) is skipped.
 */
async function changeAccount(
  store: UserStore,
  email: string,
  service: string,
  change: (record: UserRecord) => UserRecord | null,
): Promise<Array<{ before: UserRecord; after: UserRecord }>> {
  const written: Array<{ before: UserRecord; after: UserRecord }> = [];
  for (const found of await store.listByEmail(email)) {
    if (service !== '' && found.service !== service) continue;
    for (let attempt = 0, current: UserRecord | null = found; ; attempt++) {
      if (attempt === MAX_ATTEMPTS) throw contention();
      const next = current && change(current);
      if (!current || !next) break;
      if (await store.replace(next, current.version)) {
        written.push({ before: current, after: next });
        break;
      }
      current = await store.get(found.service, email);
    }
  }
  return written;
}

/** DESIGN §9.4 delete-user: the live uids of the account, which the caller releases. Idempotent. */
export async function retireUser(store: UserStore, req: RetireUserRequest, now = Date.now()): Promise<RetiredUser[]> {
  check({ service: req.service || 'any', email: req.email });
  const written = await changeAccount(store, req.email, req.service, (r) => retirement(r, now));
  return written.map(({ before }) => ({ service: before.service, uid: before.uid, node: before.node }));
}

/** DESIGN §9.4 password-change: raises the generation of every live record of the account; how many rose. */
export async function raiseGeneration(store: UserStore, req: RaiseGenerationRequest): Promise<number> {
  check({ service: 'any', email: req.email });
  if (!isValidGeneration(req.generation)) throw new BadRequest('generation must be a non-negative integer');
  return (await changeAccount(store, req.email, '', (r) => raisedGeneration(r, req.generation))).length;
}

const EVENT_KEY = /^[0-9a-f]{64}$/;
/** Claims are kept for one token's window; a day bounds what a caller can make the store hold. */
const MAX_EVENT_CLAIM_MS = 86_400_000;

function checkEventKey(key: string): void {
  if (!EVENT_KEY.test(key)) throw new BadRequest('key must be 64 lowercase hex characters');
}

/** DESIGN §10: the first claim of a security event token wins until it expires; false for a replay. */
export async function claimEventToken(store: UserStore, req: ClaimEventTokenRequest, now = Date.now()): Promise<boolean> {
  checkEventKey(req.key);
  if (!Number.isSafeInteger(req.expiresAt) || req.expiresAt <= now || req.expiresAt > now + MAX_EVENT_CLAIM_MS) {
    throw new BadRequest('expires_at must be in the future, at most a day ahead (ms)');
  }
  return store.claimEventToken(req.key, req.expiresAt, now);
}

/** A batch login after the shared first attempt: its record, its error, or undefined when login() decides it alone. */
type FirstAttempt = { record: UserRecord } | { error: unknown } | undefined;

/**
 * The first attempt of a batch's logins together: one getMany, each decided as
 * login() decides it, the updates in one replaceMany. Creations and new uids
 * (each needs nextUid first) and writes whose guard lost (or whose batch
 * failed) are left undefined:
 * login() reads their record again and decides on it, as after any lost race.
 */
async function firstAttempts(store: UserStore, reqs: readonly LoginRequest[], policy: LoginPolicy): Promise<FirstAttempt[]> {
  const out: FirstAttempt[] = reqs.map(() => undefined);
  const valid: number[] = [];
  for (const [i, req] of reqs.entries()) {
    const problem = requestProblem(req);
    if (problem) out[i] = { error: problem };
    else valid.push(i);
  }
  if (valid.length === 0) return out;
  const records = await store.getMany(valid.map((i) => ({ service: reqs[i].service, email: reqs[i].email })));
  const now = Date.now();
  const writes: Array<{ index: number; write: GuardedWrite }> = [];
  for (const [k, i] of valid.entries()) {
    const existing = records[k];
    const decision = decideLogin(existing, reqs[i], now, policy);
    if (decision.action === 'reject') out[i] = { error: decision.error };
    else if (decision.action === 'keep') out[i] = { record: existing! };
    else if (decision.action === 'update') writes.push({ index: i, write: { record: decision.record, expectedVersion: existing!.version } });
  }
  if (writes.length === 0) return out;
  try {
    const made = await store.replaceMany(writes.map((w) => w.write));
    for (const [k, { index, write }] of writes.entries()) if (made[k]) out[index] = { record: write.record };
  } catch {
    // Which writes were made is unknown: the writers go the per-item way, which reads again
    // (and gets the store's error itself if the store is down).
  }
  return out;
}

/**
 * LoginBatch: each item decided as Login decides it (and logged as a Login
 * with its own request id); one item's error is that item's result. The
 * first attempts are made together (firstAttempts), the rest one by one.
 */
export async function loginBatch(store: UserStore, req: LoginBatchRequest, policy: LoginPolicy, log: Logger): Promise<LoginBatchReply> {
  if (req.items.length > MAX_BATCH_ITEMS) throw new BadRequest(`at most ${MAX_BATCH_ITEMS} items per batch`);
  const logins = req.items.flatMap((item) => (item.login ? [item.login] : []));
  const first = firstAttempts(store, logins, policy);
  // Each item awaits it; a failed read is then every item's error, and none is left unhandled.
  first.catch(() => undefined);
  const decide = async ([r, k]: [LoginRequest, number]): Promise<User> => {
    const attempt = (await first)[k];
    if (attempt && 'error' in attempt) throw attempt.error;
    return toUser(attempt ? attempt.record : await login(store, r, policy));
  };
  let k = 0;
  const results = await Promise.all(
    req.items.map((item): Promise<LoginResult> => {
      const requestId = requestIdFrom(item.requestId);
      if (!item.login) return Promise.resolve({ error: carriedError(new BadRequest('login is required'), log, 'Login') });
      return logged(log, 'Login', requestId, decide, [item.login, k++] as [LoginRequest, number]).then(
        (user) => ({ user }),
        (err: unknown) => ({ error: carriedError(err, log.child({ requestId }), 'Login') }),
      );
    }),
  );
  return { results };
}

// ---- import (cli import) ----

/** ReserveUids: raises the uid counter for an import (import-rules.ts uidReservation), compare-and-set. */
export async function reserveUids(store: UserStore, req: ReserveUidsRequest): Promise<ReserveUidsReply> {
  if (!isValidGeneration(req.upTo)) throw new BadRequest('up_to must be a non-negative integer');
  if (req.upTo > MAX_IMPORTED_UID) throw new BadRequest(`up_to must be at most ${MAX_IMPORTED_UID}, the highest uid an import may bring`);
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const counter = await store.uidCounter();
    const reservation = uidReservation(counter, req.upTo);
    if ('refused' in reservation) throw new Conflict(reservation.refused);
    const { next } = reservation;
    const unchanged = next.value === counter.value && next.imported === counter.imported;
    if (req.dryRun || unchanged || (await store.setUidCounter(counter, next))) return { previous: counter.value, current: next.value };
  }
  throw contention();
}

function importedUser(u: User): ImportedUser {
  return {
    service: u.service,
    email: u.email,
    uid: u.uid,
    node: u.node,
    generation: u.generation,
    keysChangedAt: u.keysChangedAt ?? null,
    clientState: u.clientState,
    seenClientStates: u.seenClientStates,
    replaced: u.replaced.map(({ uid, node, replacedAt, released }) => ({ uid, node, replacedAt, released })),
    createdAt: u.createdAt,
  };
}

/** One imported record: written only where the account has none (import-rules.ts importOutcome). */
async function importUser(store: UserStore, u: ImportedUser, write: { reservedUpTo: number } | null): Promise<ImportUserResult> {
  const problem = importProblem(u);
  if (problem) return { result: 'invalid', detail: problem.message };
  if (write && highestUid(u) > write.reservedUpTo) {
    return { result: 'invalid', detail: `uid ${highestUid(u)} is above the uids reserved for imports (${write.reservedUpTo}): ReserveUids first` };
  }
  const outcome = importOutcome(await store.get(u.service, u.email), u);
  if (outcome !== 'created') return { result: outcome, detail: '' };
  const conflict = uidConflict(u, await store.uidHolders(recordUids(u)));
  if (conflict) return { result: 'conflict', detail: conflict };
  if (!write) return { result: outcome, detail: '' };
  try {
    if (await store.insert(importedRecord(u))) return { result: 'created', detail: '' };
  } catch (err) {
    // Another import wrote one of its uids meanwhile.
    if (err instanceof UidTaken) return { result: 'conflict', detail: uidConflict(u, err.holders) ?? err.message };
    throw err;
  }
  // Another writer created the account first: decide on its record.
  return { result: importOutcome(await store.get(u.service, u.email), u), detail: '' };
}

/** ImportUsers: each record decided on its own; a dry run reads only. */
export async function importUsers(store: UserStore, req: ImportUsersRequest): Promise<ImportUsersReply> {
  if (req.users.length > MAX_BATCH_ITEMS) throw new BadRequest(`at most ${MAX_BATCH_ITEMS} users per call`);
  // Imported uids stay within what ReserveUids set aside, so none can meet a uid handed out here.
  const write = req.dryRun ? null : { reservedUpTo: (await store.uidCounter()).imported };
  return { results: await Promise.all(req.users.map((u) => importUser(store, importedUser(u), write))) };
}

/** LoginStream's answer to one message: its batch decided as LoginBatch decides it, or the batch's error. */
export function loginStreamAnswer(store: UserStore, policy: LoginPolicy, log: Logger): (req: LoginStreamRequest) => Promise<LoginStreamReply> {
  return (req) =>
    loginBatch(store, req.batch ?? { items: [] }, policy, log).then(
      (batch) => ({ id: req.id, batch }),
      (err: unknown) => ({ id: req.id, error: carriedError(err, log, 'LoginStream') }),
    );
}

/** `streams`: where LoginStream's open streams are kept, for the server to drain them when it closes. */
export function directoryService(store: UserStore, log: Logger, policy: LoginPolicy, streams = new OpenStreams()): UntypedServiceImplementation {
  return {
    login: unary<LoginRequest, UserReply>(log, 'Login', async (req) => ({ user: toUser(await login(store, req, policy)) })),
    loginBatch: unary<LoginBatchRequest, LoginBatchReply>(log, 'LoginBatch', (req) => loginBatch(store, req, policy, log)),
    loginStream: answeringStream(streams, loginStreamAnswer(store, policy, log)),
    assignNode: unary<AssignNodeRequest, AssignNodeReply>(log, 'AssignNode', async (req) => {
      const { record, assigned, released } = await assignNode(store, req);
      return { user: toUser(record), assigned, released };
    }),
    getUser: unary<GetUserRequest, UserReply>(log, 'GetUser', async (req) => {
      check(req);
      const record = await store.get(req.service, req.email);
      if (!record) throw new RecordNotFound(`no user ${req.email} in ${req.service}`);
      return { user: toUser(record) };
    }),
    retireUser: unary<RetireUserRequest, RetireUserReply>(log, 'RetireUser', async (req) => ({ retired: await retireUser(store, req) })),
    raiseGeneration: unary<RaiseGenerationRequest, RaiseGenerationReply>(log, 'RaiseGeneration', async (req) => ({ count: await raiseGeneration(store, req) })),
    unassignNode: unary<UnassignNodeRequest, UnassignNodeReply>(log, 'UnassignNode', async (req) => {
      if (req.service === '' || req.node === '') throw new BadRequest('service and node are required');
      return { count: await store.unassignNode(req.service, req.node) };
    }),
    listUsers: unary<ListUsersRequest, ListUsersReply>(log, 'ListUsers', async (req) => {
      const { users, next } = await listUsers(store, req);
      return { users: users.map(toUser), next };
    }),
    countUsers: unary<CountUsersRequest, CountUsersReply>(log, 'CountUsers', async (req) => ({ counts: await store.counts(req.service) })),
    claimReplaced: unary<ClaimReplacedRequest, ClaimReplacedReply>(log, 'ClaimReplaced', (req) => claim(store, req)),
    deleteReplaced: unary<DeleteReplacedRequest, DeleteReplacedReply>(log, 'DeleteReplaced', (req) => deleteReplaced(store, req)),
    trimClientStates: unary<TrimClientStatesRequest, TrimClientStatesReply>(log, 'TrimClientStates', (req) => trimClientStates(store, req)),
    claimEventToken: unary<ClaimEventTokenRequest, ClaimEventTokenReply>(log, 'ClaimEventToken', async (req) => ({ first: await claimEventToken(store, req) })),
    releaseEventToken: unary<ReleaseEventTokenRequest, ReleaseEventTokenReply>(log, 'ReleaseEventToken', async (req) => {
      checkEventKey(req.key);
      await store.releaseEventToken(req.key);
      return {};
    }),
    reserveUids: unary<ReserveUidsRequest, ReserveUidsReply>(log, 'ReserveUids', (req) => reserveUids(store, req)),
    importUsers: unary<ImportUsersRequest, ImportUsersReply>(log, 'ImportUsers', (req) => importUsers(store, req)),
  };
}
