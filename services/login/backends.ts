// The login service's two gRPC backends: one client each, created once and
// reused. Every call carries the configured deadline and the request id, and
// is timed (by method and outcome) in the one `rpc` below; lib/grpc.ts maps
// errors back to ProtocolErrors (a backend down or slow → ServiceUnavailable, 503).
// Logins go to the directory coalesced: those that arrive in one turn of the
// event loop travel as one batch, a message on a long-lived LoginStream, which
// costs a fraction of a unary call (bench/rpc.ts); the directory still decides
// each of them.
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import type { LoginConfig } from '../../lib/config.js';
import { InternalError } from '../../lib/errors.js';
import { backendUnavailable, call, fromServiceError, grpcClient, MAX_BATCH_ITEMS, rebuiltError, type CallOptions, type UnaryMethod } from '../../lib/grpc.js';
import { DirectoryClient, type AssignNodeReply, type AssignNodeRequest, type LoginBatchItem, type LoginRequest, type LoginStreamReply, type LoginStreamRequest, type RetiredUser, type User } from '../../lib/gen/directory.js';
import { NodeAssignClient } from '../../lib/gen/nodeassign.js';
import type { LoginMetrics } from '../../lib/metrics.js';

const HealthClient = grpc.makeGenericClientConstructor(healthService, 'grpc.health.v1.Health');

/**
 * How long one LoginStream carries new batches before the next batch opens another. Each stream is
 * one call to one directory replica, so this spreads a login process's logins over the replicas
 * (DESIGN §12), as unary calls did call by call.
 */
export const STREAM_MAX_AGE_MS = 10_000;

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
  streamMaxAgeMs = STREAM_MAX_AGE_MS,
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

  /** A batch sent on a stream, waiting for its answer until its deadline. */
  interface SentBatch {
    waiting: Waiting[];
    timer: NodeJS.Timeout;
  }
  interface OpenStream {
    call: grpc.ClientDuplexStream<LoginStreamRequest, LoginStreamReply>;
    sent: Map<number, SentBatch>;
    openedAt: number;
  }
  /** Where the next batch goes; a new one is opened when there is none, or when it is streamMaxAgeMs old. */
  let stream: OpenStream | undefined;
  let nextId = 1;

  function settle(batch: Waiting[], reply: LoginStreamReply): void {
    if (reply.error) {
      const err = rebuiltError(reply.error, config.retryAfter);
      for (const w of batch) w.reject(err);
      return;
    }
    const results = reply.batch?.results ?? [];
    batch.forEach((w, k) => {
      const r = results[k];
      if (r?.user) w.resolve(r.user);
      else if (r?.error) w.reject(rebuiltError(r.error, config.retryAfter));
      else w.reject(new InternalError('directory LoginStream returned no result for an item'));
    });
  }

  function openStream(): OpenStream {
    const opened: OpenStream = { call: directory.loginStream(), sent: new Map(), openedAt: Date.now() };
    const forget = (): Map<number, SentBatch> => {
      if (stream === opened) stream = undefined;
      const sent = new Map(opened.sent);
      opened.sent.clear();
      for (const batch of sent.values()) clearTimeout(batch.timer);
      return sent;
    };
    opened.call.on('data', (reply: LoginStreamReply) => {
      const batch = opened.sent.get(reply.id);
      // Its deadline passed: its logins have failed already.
      if (!batch) return;
      opened.sent.delete(reply.id);
      clearTimeout(batch.timer);
      settle(batch.waiting, reply);
    });
    // The stream failed (directory down, cut, cancelled): whether a batch still waiting was decided is
    // unknown, so each of its logins fails as a failed unary call would, with a 503.
    opened.call.on('error', (err: grpc.ServiceError) => {
      const failure = fromServiceError(err, config.retryAfter);
      for (const batch of forget().values()) for (const w of batch.waiting) w.reject(failure);
    });
    // Ended with OK: the directory drained it (it is shutting down) after answering every batch it read,
    // so a batch still waiting was never read, and goes again on another stream.
    opened.call.on('status', (status: grpc.StatusObject) => {
      if (status.code !== grpc.status.OK) return;
      for (const batch of forget().values()) send(batch.waiting);
    });
    return opened;
  }

  /** Sends one batch on the current stream, opening one when needed. */
  function send(batch: Waiting[]): void {
    const now = Date.now();
    if (stream && now - stream.openedAt >= streamMaxAgeMs) {
      // Half-closed: the directory answers what it has, then ends it. The next stream may go to another replica.
      stream.call.end();
      stream = undefined;
    }
    let target: OpenStream;
    try {
      target = stream ??= openStream();
    } catch (err) {
      // The client is closed (login is stopping): a login that gets here fails as a call would.
      const failure = backendUnavailable((err as Error).message, config.retryAfter);
      for (const w of batch) w.reject(failure);
      return;
    }
    const id = nextId++;
    const timer = setTimeout(() => {
      target.sent.delete(id);
      const late = backendUnavailable('Deadline exceeded', config.retryAfter);
      for (const w of batch) w.reject(late);
    }, config.grpcDeadlineMs);
    target.sent.set(id, { waiting: batch, timer });
    target.call.write({ id, batch: { items: batch.map((w) => w.item) } });
  }

  /** Sends what waits, in batches of at most MAX_BATCH_ITEMS; each login settles with its own result. */
  function flush(): void {
    const all = waiting;
    waiting = [];
    for (let i = 0; i < all.length; i += MAX_BATCH_ITEMS) send(all.slice(i, i + MAX_BATCH_ITEMS));
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
      stream?.call.cancel();
      for (const c of [directory, nodeAssign, directoryHealth, nodeAssignHealth]) c.close();
    },
  };
}
