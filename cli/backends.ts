// The CLI's way to the services: the gRPC clients a command needs, made on
// first use, and the one-line failure (exit 1). Commands (commands.ts, purge.ts)
// and parsing (args.ts, which resolves Globals) share these types.
import * as grpc from '@grpc/grpc-js';
import { DEFAULTS } from '../lib/config.js';
import { ServiceUnavailable } from '../lib/errors.js';
import { call, grpcClient, type ClientAuth } from '../lib/grpc.js';
import { DirectoryClient } from '../lib/gen/directory.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';

export type Backend = 'directory' | 'nodeassign';

export interface Globals {
  json: boolean;
  deadlineMs: number;
  /** Only the backends the command talks to are resolved (and validated). */
  addrs: Partial<Record<Backend, string>>;
  /** INTERNAL_SECRET (only for commands that talk to a backend) and mutual TLS. */
  auth: ClientAuth;
}

/** A failure to report in one line (exit 1). */
export class CliFailure extends Error {}

type Clients = { directory: DirectoryClient; nodeassign: NodeAssignClient };

type UnaryMethod<Req, Res> = (
  req: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  cb: (err: grpc.ServiceError | null, res: Res) => void,
) => grpc.ClientUnaryCall;

/** The gRPC clients a command needs, made on first use; transport failures become "cannot reach …". */
export class Backends {
  private readonly clients: Partial<Clients> = {};

  constructor(private readonly globals: Globals) {}

  private client<B extends Backend>(backend: B): Clients[B] {
    const addr = this.addr(backend);
    this.clients[backend] ??= (backend === 'directory'
      ? grpcClient(DirectoryClient, addr, this.globals.auth)
      : grpcClient(NodeAssignClient, addr, this.globals.auth)) as Clients[B];
    return this.clients[backend] as Clients[B];
  }

  private addr(backend: Backend): string {
    const addr = this.globals.addrs[backend];
    if (!addr) throw new Error(`no address resolved for ${backend}`);
    return addr;
  }

  async rpc<B extends Backend, Req, Res>(backend: B, method: (c: Clients[B]) => UnaryMethod<Req, Res>, req: Req): Promise<Res> {
    const client = this.client(backend);
    try {
      return await call(client, method(client), req, { deadlineMs: this.globals.deadlineMs, retryAfter: DEFAULTS.RETRY_AFTER });
    } catch (e) {
      // call() reports transport trouble as a plain ServiceUnavailable; the channel state tells it from a server's own 503.
      if (e instanceof ServiceUnavailable && e.constructor === ServiceUnavailable) {
        const reason = transportReason(e.message);
        if (client.getChannel().getConnectivityState(false) !== grpc.connectivityState.READY) {
          throw new CliFailure(`cannot reach ${backend} at ${this.addr(backend)} (${reason})`);
        }
        throw new CliFailure(`${backend} at ${this.addr(backend)}: ${reason}`);
      }
      throw e;
    }
  }

  close(): void {
    for (const c of Object.values(this.clients)) c.close();
  }
}

/**
 * The useful part of grpc-js's "No connection established. Last error: Error: connect ECONNREFUSED ….
 * Resolution note: …"; round robin nests one such message in another, so the innermost "Last error" wins.
 */
export function transportReason(message: string): string {
  const details = message.replace(/^backend unavailable: /, '');
  const last = /^.*Last error: (?:Error: )?(.*?)(?:\.?\s*Resolution note:.*)?$/s.exec(details);
  return (last?.[1] || details).trim();
}
