// Directory gRPC handlers: read the record, let the rules decide, write with a
// compare-and-set (or an insert for a new user), and decide again on the
// fresh record when another request wrote first.
import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import { BadRequest, RecordNotFound, ServiceUnavailable } from '../../lib/errors.js';
import { carriedError, logged, MAX_BATCH_ITEMS, unary } from '../../lib/grpc.js';
import { requestIdFrom } from '../../lib/request-id.js';
import type { Logger } from '../../lib/log.js';
import type {
  AssignNodeReply,
  AssignNodeRequest,
  GetUserRequest,
  LoginBatchReply,
  LoginBatchRequest,
  LoginRequest,
  LoginResult,
  RaiseGenerationReply,
  RaiseGenerationRequest,
  RetiredUser,
  RetireUserReply,
  RetireUserRequest,
  UnassignNodeReply,
  UnassignNodeRequest,
  User,
  UserReply,
} from '../../lib/gen/directory.js';
import { assignment, decideLogin, isValidGeneration, raisedGeneration, requestProblem, retirement, type LoginPolicy } from './rules.js';
import type { UserRecord, UserStore } from './store.js';

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
    replaced: r.replaced,
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

/** Records `node` for the user if it still has that uid and no node; otherwise the stored record wins. */
export async function assignNode(store: UserStore, req: AssignNodeRequest): Promise<AssignResult> {
  check(req);
  if (req.node === '') throw new BadRequest('node is required');
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const existing = await store.get(req.service, req.email);
    if (!existing) throw new RecordNotFound(`no user ${req.email} in ${req.service}`);
    const next = assignment(existing, req.uid, req.node);
    if (!next) return { record: existing, assigned: false, released: 0 };
    if (await store.replace(next.record, existing.version)) return { record: next.record, assigned: true, released: next.released };
  }
  throw contention();
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

/**
 * LoginBatch: each item decided as Login decides it (and logged as a Login
 * with its own request id); one item's error is that item's result.
 */
export async function loginBatch(store: UserStore, req: LoginBatchRequest, policy: LoginPolicy, log: Logger): Promise<LoginBatchReply> {
  if (req.items.length > MAX_BATCH_ITEMS) throw new BadRequest(`at most ${MAX_BATCH_ITEMS} items per batch`);
  const decide = async (r: LoginRequest): Promise<User> => toUser(await login(store, r, policy));
  const results = await Promise.all(
    req.items.map((item): Promise<LoginResult> => {
      const requestId = requestIdFrom(item.requestId);
      if (!item.login) return Promise.resolve({ error: carriedError(new BadRequest('login is required'), log, 'Login') });
      return logged(log, 'Login', requestId, decide, item.login).then(
        (user) => ({ user }),
        (err: unknown) => ({ error: carriedError(err, log.child({ requestId }), 'Login') }),
      );
    }),
  );
  return { results };
}

export function directoryService(store: UserStore, log: Logger, policy: LoginPolicy): UntypedServiceImplementation {
  return {
    login: unary<LoginRequest, UserReply>(log, 'Login', async (req) => ({ user: toUser(await login(store, req, policy)) })),
    loginBatch: unary<LoginBatchRequest, LoginBatchReply>(log, 'LoginBatch', (req) => loginBatch(store, req, policy, log)),
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
  };
}
