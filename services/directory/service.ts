// Directory gRPC handlers: read the record, let the rules decide, write with a
// compare-and-set (or an insert for a new user), and decide again on the
// fresh record when another request wrote first.
import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import { BadRequest, RecordNotFound, ServiceUnavailable } from '../../lib/errors.js';
import { unary } from '../../lib/grpc.js';
import type { Logger } from '../../lib/log.js';
import type {
  AssignNodeReply,
  AssignNodeRequest,
  GetUserRequest,
  LoginRequest,
  UnassignNodeReply,
  UnassignNodeRequest,
  User,
  UserReply,
} from '../../lib/gen/directory.js';
import { assignment, decideLogin, requestProblem, type LoginPolicy } from './rules.js';
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

export function directoryService(store: UserStore, log: Logger, policy: LoginPolicy): UntypedServiceImplementation {
  return {
    login: unary<LoginRequest, UserReply>(log, 'Login', async (req) => ({ user: toUser(await login(store, req, policy)) })),
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
    unassignNode: unary<UnassignNodeRequest, UnassignNodeReply>(log, 'UnassignNode', async (req) => {
      if (req.service === '' || req.node === '') throw new BadRequest('service and node are required');
      return { count: await store.unassignNode(req.service, req.node) };
    }),
  };
}
