// gRPC plumbing shared by every service: handlers that turn thrown errors into
// gRPC status + metadata (the only place that does), clients that apply a
// deadline and turn gRPC errors back into the same ProtocolError classes, and
// internal authentication (shared secret in metadata, optional mutual TLS).
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { GrpcAuth, GrpcTls } from './config.js';
import { BadRequest, errorClasses, InternalError, ProtocolError, ServiceUnavailable, TooManyRequests } from './errors.js';
import { logger, type Logger } from './log.js';
import { outcomeOf } from './metrics.js';
import { addReflection } from './reflection.js';
import { requestIdFrom } from './request-id.js';

const ERROR_CLASS = 'x-error-class';
/** A rate limit's Retry-After, which only the server knows. */
const RETRY_AFTER = 'x-retry-after';
export const REQUEST_ID = 'x-request-id';
/** Metadata entry carrying INTERNAL_SECRET on every internal call. */
export const INTERNAL_SECRET_HEADER = 'x-internal-secret';
/** Most items one batched call may carry (directory LoginBatch); login sends at most this many at once. */
export const MAX_BATCH_ITEMS = 256;
/**
 * Left open so that orchestrators can probe without the secret; it reveals only SERVING or not.
 * Server reflection is not: it reveals only the schema, which is public, but an open one would tell
 * anyone who reaches the port what runs there and hand them a parser to feed. Operators who
 * run grpcurl hold the secret anyway (`-H x-internal-secret:…`), as the CLI does; probes cannot.
 */
const OPEN_PATH_PREFIX = '/grpc.health.v1.Health/';

function grpcCode(err: ProtocolError): grpc.status {
  switch (err.status) {
    case 400:
      return grpc.status.INVALID_ARGUMENT;
    case 401:
      return grpc.status.UNAUTHENTICATED;
    case 403:
      return grpc.status.PERMISSION_DENIED;
    case 404:
      return grpc.status.NOT_FOUND;
    case 429:
      return grpc.status.RESOURCE_EXHAUSTED;
    case 409:
      return grpc.status.ALREADY_EXISTS;
    case 503:
      return grpc.status.RESOURCE_EXHAUSTED;
    default:
      return grpc.status.INTERNAL;
  }
}

/** A thrown error as it travels: its lib/errors.ts class name, message, and a rate limit's Retry-After (0: none). */
export interface CarriedError {
  errorClass: string;
  message: string;
  retryAfter: number;
}

/** What a handler sends for a thrown error; anything not a ProtocolError is logged and hidden. */
export function carriedError(err: unknown, log: Logger, method: string): CarriedError {
  if (err instanceof ProtocolError) {
    if (!err.expose) log.warn({ method, err: err.message, class: err.name }, 'rpc failed');
    return { errorClass: err.name, message: err.message, retryAfter: err instanceof TooManyRequests ? err.retryAfter : 0 };
  }
  log.error({ method, err }, 'rpc failed unexpectedly');
  return { errorClass: 'InternalError', message: 'internal error', retryAfter: 0 };
}

/** The gRPC form of carriedError: status code, details, and the class (and Retry-After) in metadata. */
export function toServiceError(err: unknown, log: Logger, method: string): Partial<grpc.ServiceError> {
  const carried = carriedError(err, log, method);
  const metadata = new grpc.Metadata();
  metadata.set(ERROR_CLASS, carried.errorClass);
  if (carried.retryAfter > 0) metadata.set(RETRY_AFTER, String(carried.retryAfter));
  return { code: err instanceof ProtocolError ? grpcCode(err) : grpc.status.INTERNAL, details: carried.message, metadata };
}

export interface CallContext {
  requestId: string;
  /** Whether the caller is gone (cancelled, or its deadline passed): nothing it asked for may still take effect. */
  gone(): boolean;
}

/** Whether a server call's caller is gone: grpc-js marks a cancelled call; a passed deadline may not be marked yet. */
export function callGone(call: { cancelled: boolean; getDeadline(): grpc.Deadline }, now = Date.now()): boolean {
  if (call.cancelled) return true;
  const deadline = call.getDeadline();
  const ms = deadline instanceof Date ? deadline.getTime() : deadline;
  return ms <= now;
}

/**
 * Runs one call's handler and logs its `rpc` line with the caller's request
 * id, so that these lines join that request's; rejects with what it threw.
 */
export function logged<Req, Res>(
  log: Logger,
  method: string,
  requestId: string,
  fn: (req: Req, ctx: CallContext) => Promise<Res>,
  req: Req,
  gone: () => boolean = () => false,
): Promise<Res> {
  const started = performance.now();
  const done = (outcome: string): void => {
    log.debug({ requestId, method, outcome, ms: Math.round(performance.now() - started) }, 'rpc');
  };
  return fn(req, { requestId, gone }).then(
    (res) => {
      done('ok');
      return res;
    },
    (err: unknown) => {
      done(outcomeOf(err));
      throw err;
    },
  );
}

/** Wraps an async function as a grpc-js unary handler. */
export function unary<Req, Res>(
  log: Logger,
  method: string,
  fn: (req: Req, ctx: CallContext) => Promise<Res>,
): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    // The caller's id (login's request id) when sane.
    const requestId = requestIdFrom(call.metadata.get(REQUEST_ID)[0]);
    logged(log, method, requestId, fn, call.request, () => callGone(call)).then(
      (res) => callback(null, res),
      (err) => callback(toServiceError(err, log.child({ requestId }), method)),
    );
  };
}

/**
 * The long-lived streams a server has open (LoginStream), so that its close
 * ends each one cleanly rather than cutting it: see answeringStream.
 */
export class OpenStreams {
  private readonly drains = new Set<() => void>();

  /** Registers a stream's drain; returns what forgets it. */
  add(drain: () => void): () => void {
    this.drains.add(drain);
    return () => this.drains.delete(drain);
  }

  /** Every open stream answers what it has read, reads no more and ends with OK. */
  drain(): void {
    for (const drain of [...this.drains]) drain();
  }

  get size(): number {
    return this.drains.size;
  }
}

/**
 * A bidirectional stream whose every message is answered by one message,
 * each as soon as it is ready (`answer` never rejects: a failure is part of its
 * reply). When the caller half-closes, or the server drains it, it answers what
 * it has read and ends with OK; what arrives after a drain is never read, so
 * the caller may send it again elsewhere.
 */
export function answeringStream<Req, Res>(open: OpenStreams, answer: (req: Req) => Promise<Res>): grpc.handleBidiStreamingCall<Req, Res> {
  return (call) => {
    let pending = 0;
    let draining = false;
    let ended = false;
    const finish = (): void => {
      if (ended) return;
      ended = true;
      forget();
      call.end();
    };
    const drain = (): void => {
      draining = true;
      if (pending === 0) finish();
    };
    const forget = open.add(drain);
    const gone = (): void => {
      ended = true;
      forget();
    };
    call.on('data', (req: Req) => {
      if (draining) return;
      pending++;
      void answer(req).then((res) => {
        pending--;
        if (!ended) call.write(res);
        if (draining && pending === 0) finish();
      });
    });
    call.on('end', drain);
    call.on('cancelled', gone);
    // A write after the caller went away; without a listener it would be thrown.
    call.on('error', gone);
  };
}

/** The ProtocolError a server threw, from what travelled; an unknown class becomes InternalError. */
export function rebuiltError(carried: CarriedError, retryAfter: number): ProtocolError {
  const { errorClass, message } = carried;
  if (!Object.hasOwn(errorClasses, errorClass)) return new InternalError(`backend error ${errorClass}: ${message}`);
  const e = new errorClasses[errorClass](message);
  if (e instanceof TooManyRequests) {
    const seconds = carried.retryAfter;
    return new TooManyRequests(message, Number.isSafeInteger(seconds) && seconds > 0 ? seconds : e.retryAfter);
  }
  if (e instanceof ServiceUnavailable && e.retryAfter !== retryAfter) {
    return new (e.constructor as typeof ServiceUnavailable)(message, retryAfter);
  }
  return e;
}

/** A backend that could not be reached or did not answer in time: 503 with the configured Retry-After. */
export function backendUnavailable(details: string, retryAfter: number): ServiceUnavailable {
  return new ServiceUnavailable(`backend unavailable: ${details}`, retryAfter);
}

/** Rebuilds the ProtocolError a server threw; transport failures become 503. */
export function fromServiceError(err: grpc.ServiceError, retryAfter: number): ProtocolError {
  const cls = err.metadata?.get(ERROR_CLASS)[0];
  if (typeof cls === 'string' && cls in errorClasses) {
    return rebuiltError({ errorClass: cls, message: err.details, retryAfter: Number(err.metadata.get(RETRY_AFTER)[0]) }, retryAfter);
  }
  switch (err.code) {
    case grpc.status.UNAVAILABLE:
    case grpc.status.DEADLINE_EXCEEDED:
    case grpc.status.CANCELLED:
    case grpc.status.RESOURCE_EXHAUSTED:
      return backendUnavailable(err.details, retryAfter);
    default:
      return new InternalError(`backend error ${grpc.status[err.code]}: ${err.details}`);
  }
}

export type UnaryMethod<Req, Res> = (
  req: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  cb: (err: grpc.ServiceError | null, res: Res) => void,
) => grpc.ClientUnaryCall;

export interface CallOptions {
  deadlineMs: number;
  retryAfter: number;
  requestId?: string;
}

/** One unary call with a deadline; resolves with the reply or rejects with a ProtocolError. */
export function call<Req, Res>(client: grpc.Client, method: UnaryMethod<Req, Res>, req: Req, opts: CallOptions): Promise<Res> {
  const metadata = new grpc.Metadata();
  if (opts.requestId) metadata.set(REQUEST_ID, opts.requestId);
  return new Promise((resolve, reject) => {
    method.call(client, req, metadata, { deadline: Date.now() + opts.deadlineMs }, (err, res) => {
      if (err) reject(fromServiceError(err, opts.retryAfter));
      else resolve(res);
    });
  });
}

/**
 * Channel options shared by clients: fail fast while a backend is down, reconnect quickly when it
 * returns. Calls go round robin over every address the target resolves to (DESIGN §12:
 * `dns:///directory:50051` reaches each replica; an address that stops answering is left out until
 * it answers again). grpc-js looks the name up again when a connection ends, at most every 5 s;
 * a replica added later joins at the next such look-up (docs/scaling.md).
 */
export const CLIENT_OPTIONS: grpc.ClientOptions = {
  'grpc.initial_reconnect_backoff_ms': 200,
  'grpc.max_reconnect_backoff_ms': 2000,
  'grpc.keepalive_time_ms': 30_000,
  'grpc.keepalive_timeout_ms': 5_000,
  'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
  'grpc.dns_min_time_between_resolutions_ms': 5_000,
};

/** Whether `given` (a metadata value) is `expected`, in time independent of where they differ. */
export function secretMatches(expected: string, given: unknown): boolean {
  if (typeof given !== 'string') return false;
  // Equal-length digests: timingSafeEqual needs equal lengths, and the length of the secret stays hidden too.
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(expected), digest(given));
}

/** Server side: every call but health must carry the internal secret, else UNAUTHENTICATED before any handler runs. */
function requireSecret(secret: string, log: Logger): grpc.ServerInterceptor {
  return (method, call) => {
    if (method.path.startsWith(OPEN_PATH_PREFIX)) return new grpc.ServerInterceptingCall(call);
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, mdNext) => {
            const given = metadata.get(INTERNAL_SECRET_HEADER);
            if (given.length === 1 && secretMatches(secret, given[0])) return mdNext(metadata);
            // Never the value: only whether one came.
            log.warn({ method: method.path, peer: call.getPeer(), reason: given.length === 0 ? 'no secret' : 'wrong secret' }, 'rpc refused: internal secret');
            call.sendStatus({ code: grpc.status.UNAUTHENTICATED, details: 'missing or wrong internal secret' });
          },
        }),
    });
  };
}

const HEALTH_WATCH_PATH = '/grpc.health.v1.Health/Watch';
/** Health Watch streams one peer address may hold open: they need no secret, and each holds server memory. */
export const MAX_HEALTH_WATCHES_PER_PEER = 16;

/** The address of a grpc-js peer string (`host:port`, `[v6]:port`), without the port. */
export function peerAddress(peer: string): string {
  return peer.replace(/:\d+$/, '');
}

/** Caps the open health Watch streams per peer address; one more is RESOURCE_EXHAUSTED before the handler runs. */
function capHealthWatches(limit: number, log: Logger): grpc.ServerInterceptor {
  const open = new Map<string, number>();
  return (method, call) => {
    if (method.path !== HEALTH_WATCH_PATH) return new grpc.ServerInterceptingCall(call);
    const address = peerAddress(call.getPeer());
    let counted = false;
    const done = () => {
      if (!counted) return;
      counted = false;
      const n = (open.get(address) ?? 1) - 1;
      if (n > 0) open.set(address, n);
      else open.delete(address);
    };
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, mdNext) => {
            const n = open.get(address) ?? 0;
            if (n >= limit) {
              log.warn({ method: method.path, peer: address, open: n }, 'rpc refused: too many health watches');
              call.sendStatus({ code: grpc.status.RESOURCE_EXHAUSTED, details: `at most ${limit} health watches per address` });
              return;
            }
            open.set(address, n + 1);
            counted = true;
            mdNext(metadata);
          },
          onCancel: done,
        }),
      sendStatus: (status, next) => {
        done();
        next(status);
      },
    });
  };
}

function serverCredentials(tls: GrpcTls | undefined): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  // true: a client without a certificate signed by the CA is refused during the handshake.
  return grpc.ServerCredentials.createSsl(tls.ca, [{ private_key: tls.key, cert_chain: tls.cert }], true);
}

/** What a client needs to authenticate: the secret (not needed for health probes) and the TLS files. */
export type ClientAuth = Partial<GrpcAuth>;

/** The one way to make a gRPC client: TLS when configured, the internal secret on every call. */
export function grpcClient<C extends grpc.Client>(
  Client: new (address: string, credentials: grpc.ChannelCredentials, options: grpc.ClientOptions) => C,
  address: string,
  auth: ClientAuth,
): C {
  const credentials = auth.tls ? grpc.credentials.createSsl(auth.tls.ca, auth.tls.key, auth.tls.cert) : grpc.credentials.createInsecure();
  const secret = auth.internalSecret;
  // Metadata through an interceptor, not call credentials: grpc-js refuses call credentials on plaintext channels.
  const interceptors: grpc.Interceptor[] = secret
    ? [
        (options, nextCall) =>
          new grpc.InterceptingCall(nextCall(options), {
            start: (metadata, listener, next) => {
              metadata.set(INTERNAL_SECRET_HEADER, secret);
              next(metadata, listener);
            },
          }),
      ]
    : [];
  return new Client(address, credentials, { ...CLIENT_OPTIONS, interceptors });
}

/** What a request that cannot be decoded becomes, so that its handler can refuse it. */
const UNDECODABLE = Symbol('undecodable request');

interface Undecodable {
  [UNDECODABLE]: string;
}

function isUndecodable(request: unknown): request is Undecodable {
  return typeof request === 'object' && request !== null && UNDECODABLE in request;
}

/**
 * The service with unary requests that fail to decode (an int64 beyond
 * Number.MAX_SAFE_INTEGER, which ts-proto's decoder refuses; malformed wire
 * data) answered INVALID_ARGUMENT as BadRequest. grpc-js itself would answer
 * INTERNAL "Error deserializing request", as if the server had failed.
 */
function refusingUndecodable(
  definition: grpc.ServiceDefinition,
  implementation: grpc.UntypedServiceImplementation,
  log: Logger,
): { definition: grpc.ServiceDefinition; implementation: grpc.UntypedServiceImplementation } {
  const defs: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  const impls: grpc.UntypedServiceImplementation = { ...implementation };
  for (const [name, method] of Object.entries(definition)) {
    defs[name] = method;
    const handler = implementation[name];
    if (method.requestStream || method.responseStream || typeof handler !== 'function') continue;
    defs[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return method.requestDeserialize(bytes);
        } catch (err) {
          return { [UNDECODABLE]: err instanceof Error ? err.message : String(err) };
        }
      },
    };
    const unaryHandler = handler as grpc.handleUnaryCall<unknown, unknown>;
    impls[name] = ((call, callback) => {
      if (!isUndecodable(call.request)) return unaryHandler(call, callback);
      const refused = new BadRequest(`the request could not be decoded: ${call.request[UNDECODABLE]}`);
      callback(toServiceError(refused, log, method.path));
    }) as grpc.handleUnaryCall<unknown, unknown>;
  }
  return { definition: defs, implementation: impls };
}

export interface RunningServer {
  server: grpc.Server;
  port: number;
  health: HealthImplementation;
  close(): Promise<void>;
}

export interface ServiceSpec {
  definition: grpc.ServiceDefinition;
  implementation: grpc.UntypedServiceImplementation;
  name: string;
  /** Its file in proto/: server reflection describes it from there. */
  proto?: string;
  /** Its long-lived streams, drained when the server closes. */
  streams?: OpenStreams;
}

/**
 * Starts a gRPC server with the given services, grpc.health.v1 (overall and per service) and reflection
 * for those with a proto. `log` takes the server's own lines (refused calls, undecodable requests).
 */
export async function startServer(
  services: ServiceSpec[],
  host: string,
  port: number,
  auth: GrpcAuth,
  log: Logger = logger('grpc'),
): Promise<RunningServer> {
  const server = new grpc.Server({ interceptors: [requireSecret(auth.internalSecret, log), capHealthWatches(MAX_HEALTH_WATCHES_PER_PEER, log)] });
  const statuses: Record<string, 'SERVING'> = { '': 'SERVING' };
  for (const s of services) {
    const tolerant = refusingUndecodable(s.definition, s.implementation, log);
    server.addService(tolerant.definition, tolerant.implementation);
    statuses[s.name] = 'SERVING';
  }
  const protos = services.flatMap((s) => (s.proto ? [s.proto] : []));
  if (protos.length > 0) addReflection(server, protos);
  const health = new HealthImplementation(statuses);
  health.addToServer(server);
  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${port}`, serverCredentials(auth.tls), (err, p) => (err ? reject(err) : resolve(p)));
  });
  return {
    server,
    port: bound,
    health,
    close: () =>
      new Promise<void>((resolve) => {
        for (const name of Object.keys(statuses)) health.setStatus(name, 'NOT_SERVING');
        // tryShutdown waits for open calls: a stream ends only when drained.
        for (const s of services) s.streams?.drain();
        const timer = setTimeout(() => server.forceShutdown(), 2000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

/**
 * Starts one gRPC service on a store it owns: the store is closed after the
 * server on close, or at once when the server cannot start.
 */
export async function serveWithStore<S extends { close(): Promise<void> }>(
  store: S,
  service: ServiceSpec,
  host: string,
  port: number,
  auth: GrpcAuth,
): Promise<{ port: number; close(): Promise<void> }> {
  try {
    const running = await startServer([service], host, port, auth);
    return {
      port: running.port,
      close: async () => {
        await running.close();
        await store.close();
      },
    };
  } catch (err) {
    await store.close();
    throw err;
  }
}
