// The login service's two gRPC backends: one client each, created once and
// reused. Every call carries the configured deadline and the request id, and
// is timed (by method and outcome) in the one `rpc` below; lib/grpc.ts maps
// errors back to ProtocolErrors (a backend down or slow → ServiceUnavailable, 503).
// Logins go to the directory coalesced: those that arrive in one turn of the
// event loop travel in one LoginBatch call, which costs little more than one
// unary call (bench/rpc.ts); the directory still decides each of them.
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import type { LoginConfig } from '../../lib/config.js';
import { InternalError } from '../../lib/errors.js';
import { call, grpcClient, MAX_BATCH_ITEMS, rebuiltError, type CallOptions, type UnaryMethod } from '../../lib/grpc.js';
import { DirectoryClient, type AssignNodeReply, type AssignNodeRequest, type LoginBatchItem, type LoginRequest, type RetiredUser, type User } from '../../lib/gen/directory.js';
import { NodeAssignClient } from '../../lib/gen/nodeassign.js';
import type { LoginMetrics } from '../../lib/metrics.js';

const HealthClient = grpc.makeGenericClientConstructor(healthService, 'grpc.health.v1.Health');

type HealthCheck = (
  req: { service: string },
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  cb: (err: grpc.ServiceError | null, res: { status: string }) => void,
) => grpc.ClientUnaryCall;

export interface BackendHealth {
  directory: boolean;
  nodeassign: boolean;
}

export interface Backends {
  login(req: LoginRequest, requestId: string): Promise<User>;
  /** A node URL for a new user of `service`; NoNodeAvailable (503) when none has room. */
  allocate(service: string, requestId: string): Promise<string>;
  /** The user's record after assignment (its node is whichever was assigned first), and what to release. */
  assignNode(req: AssignNodeRequest, requestId: string): Promise<AssignNodeReply & { user: User }>;
  /** Gives back one slot of a node. */
  release(service: string, url: string, requestId: string): Promise<void>;
  /**
   * Account deleted (DESIGN §9.4): directory RetireUser for `service` ('' = every
   * application), then NodeAssign Release once for each retired uid that had a
   * node. Idempotent: a second call retires and releases nothing. Returns what
   * was retired. If a Release fails the error propagates, and that slot stays
   * counted: the directory marked it released already, so a redelivery of the
   * event finds nothing left to retire (a purge job would have to recount).
   */
  retireUser(email: string, service: string, requestId: string): Promise<RetiredUser[]>;
  /** Password changed (DESIGN §9.4): directory RaiseGeneration; never lowers. Records raised. */
  raiseGeneration(email: string, generation: number, requestId: string): Promise<number>;
  /** Directory ClaimEventToken: true for the first delivery of a security event token, false for a replay. */
  claimEventToken(key: string, expiresAt: number, requestId: string): Promise<boolean>;
  /** Directory ReleaseEventToken: the token's events were not applied, so a redelivery counts as new. */
  releaseEventToken(key: string, requestId: string): Promise<void>;
  health(): Promise<BackendHealth>;
  /** Connects to both backends now rather than at the first request; true when both are connected within `ms`. */
  connect(ms: number): Promise<boolean>;
  close(): void;
}

function userOf(reply: { user?: User | undefined }, method: string): User {
  if (!reply.user) throw new InternalError(`directory ${method} returned no user`);
  return reply.user;
}

export function connectBackends(
  config: Pick<LoginConfig, 'directoryAddr' | 'nodeAssignAddr' | 'auth' | 'grpcDeadlineMs' | 'retryAfter'>,
  metrics: LoginMetrics,
): Backends {
  const directory = grpcClient(DirectoryClient, config.directoryAddr, config.auth);
  const nodeAssign = grpcClient(NodeAssignClient, config.nodeAssignAddr, config.auth);
  // grpc-js shares one connection between clients of the same address and options.
  const directoryHealth = grpcClient(HealthClient, config.directoryAddr, config.auth);
  const nodeAssignHealth = grpcClient(HealthClient, config.nodeAssignAddr, config.auth);
  const opts = (requestId?: string): CallOptions => ({ deadlineMs: config.grpcDeadlineMs, retryAfter: config.retryAfter, requestId });

  /** Every backend call goes through here: `name` is the metrics label, e.g. "directory.Login". */
  function rpc<Req, Res>(name: string, client: grpc.Client, method: UnaryMethod<Req, Res>, req: Req, requestId?: string): Promise<Res> {
    return metrics.timeCall(name, () => call(client, method, req, opts(requestId)));
  }

  interface Waiting {
    item: LoginBatchItem;
    resolve(user: User): void;
    reject(err: unknown): void;
  }
  let waiting: Waiting[] = [];

  /** Sends what waits as LoginBatch calls and settles each login with its own result. */
  function flush(): void {
    const all = waiting;
    waiting = [];
    for (let i = 0; i < all.length; i += MAX_BATCH_ITEMS) {
      const batch = all.slice(i, i + MAX_BATCH_ITEMS);
      call(directory, directory.loginBatch, { items: batch.map((w) => w.item) }, opts()).then(
        ({ results }) => {
          batch.forEach((w, k) => {
            const r = results[k];
            if (r?.user) w.resolve(r.user);
            else if (r?.error) w.reject(rebuiltError(r.error, config.retryAfter));
            else w.reject(new InternalError('directory LoginBatch returned no result for an item'));
          });
        },
        // The call failed as a whole (backend down, deadline): every item fails alike.
        (err: unknown) => {
          for (const w of batch) w.reject(err);
        },
      );
    }
  }

  async function serving(name: string, client: grpc.Client): Promise<boolean> {
    const check = (client as unknown as { Check: HealthCheck }).Check;
    try {
      const res = await rpc(`${name}.Health.Check`, client, check, { service: '' });
      return res.status === 'SERVING';
    } catch {
      return false;
    }
  }

  return {
    login(req, requestId) {
      return metrics.timeCall(
        'directory.Login',
        () =>
          new Promise<User>((resolve, reject) => {
            // After the I/O callbacks of this turn, so that the logins they started share the call.
            if (waiting.length === 0) setImmediate(flush);
            waiting.push({ item: { requestId, login: req }, resolve, reject });
          }),
      );
    },
    async allocate(service, requestId) {
      const { node } = await rpc('nodeassign.Allocate', nodeAssign, nodeAssign.allocate, { service }, requestId);
      if (!node?.url) throw new InternalError('nodeassign Allocate returned no node');
      metrics.allocations.inc({ application: service });
      return node.url;
    },
    async assignNode(req, requestId) {
      const reply = await rpc('directory.AssignNode', directory, directory.assignNode, req, requestId);
      return { ...reply, user: userOf(reply, 'AssignNode') };
    },
    async release(service, url, requestId) {
      await rpc('nodeassign.Release', nodeAssign, nodeAssign.release, { service, url }, requestId);
    },
    async retireUser(email, service, requestId) {
      const { retired } = await rpc('directory.RetireUser', directory, directory.retireUser, { email, service }, requestId);
      for (const r of retired) {
        if (r.node !== '') await this.release(r.service, r.node, requestId);
      }
      return retired;
    },
    async raiseGeneration(email, generation, requestId) {
      const { count } = await rpc('directory.RaiseGeneration', directory, directory.raiseGeneration, { email, generation }, requestId);
      return count;
    },
    async claimEventToken(key, expiresAt, requestId) {
      return (await rpc('directory.ClaimEventToken', directory, directory.claimEventToken, { key, expiresAt }, requestId)).first;
    },
    async releaseEventToken(key, requestId) {
      await rpc('directory.ReleaseEventToken', directory, directory.releaseEventToken, { key }, requestId);
    },
    async health() {
      const [d, n] = await Promise.all([serving('directory', directoryHealth), serving('nodeassign', nodeAssignHealth)]);
      return { directory: d, nodeassign: n };
    },
    async connect(ms) {
      const deadline = Date.now() + ms;
      const ready = (client: grpc.Client) => new Promise<boolean>((resolve) => client.waitForReady(deadline, (err) => resolve(!err)));
      const [d, n] = await Promise.all([ready(directory), ready(nodeAssign)]);
      return d && n;
    },
    close() {
      for (const c of [directory, nodeAssign, directoryHealth, nodeAssignHealth]) c.close();
    },
  };
}
