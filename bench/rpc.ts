// The login → directory hop alone, four ways, to pick by measurement: the plain unary Login call, the logins of an
// event-loop turn coalesced into one unary LoginBatch call, the same batches as
// messages on one LoginStream (login's client, services/login/backends.ts), and
// one long-lived bidirectional stream with a message per login. The directory here answers
// at once with a fixed record (no store), in its own process, so the figures
// are the gRPC cost: logins/s and CPU µs per login of client and server,
// with `concurrency` logins in flight (32, as the login benchmark's
// connections) and with one at a time (latency, nothing to coalesce).
//
//   npx tsx bench/rpc.ts [--logins 20000]
import * as grpc from '@grpc/grpc-js';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DirectoryClient, DirectoryService, LoginBatchItem, LoginBatchReply, type LoginRequest, type LoginStreamReply, type LoginStreamRequest, type User } from '../lib/gen/directory.js';
import { answeringStream, call, grpcClient, OpenStreams, startServer } from '../lib/grpc.js';
import { LoginMetrics } from '../lib/metrics.js';
import { connectBackends } from '../services/login/backends.js';
import { BENCH_AUTH, cpuSeconds, median } from './proc.js';

const USER: User = {
  service: 'sync',
  email: 'bench0@users.bench.example',
  uid: 12345,
  node: 'http://bench-node.example',
  generation: 0,
  clientState: '',
  seenClientStates: [],
  replaced: [],
  createdAt: 1_700_000_000_000,
};
const REQUEST: LoginRequest = { service: 'sync', email: USER.email, clientState: '', allowNewUsers: true };

/** A stream whose every message is one login (with its request id) out, one result back, in order. */
const StreamService: grpc.ServiceDefinition = {
  logins: {
    path: '/bench.LoginStream/Logins',
    requestStream: true,
    responseStream: true,
    requestSerialize: (v: LoginBatchItem) => Buffer.from(LoginBatchItem.encode(v).finish()),
    requestDeserialize: (b: Buffer) => LoginBatchItem.decode(b),
    responseSerialize: (v: LoginBatchReply) => Buffer.from(LoginBatchReply.encode(v).finish()),
    responseDeserialize: (b: Buffer) => LoginBatchReply.decode(b),
  },
};

async function serve(): Promise<void> {
  const one = { user: USER };
  const running = await startServer(
    [
      {
        definition: DirectoryService,
        name: 'tokenserver.directory.v1.Directory',
        implementation: {
          login: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, one),
          loginBatch: (c: grpc.ServerUnaryCall<{ items: unknown[] }, unknown>, cb: grpc.sendUnaryData<unknown>) =>
            cb(null, { results: c.request.items.map(() => one) }),
          loginStream: answeringStream<LoginStreamRequest, LoginStreamReply>(new OpenStreams(), async (req) => ({
            id: req.id,
            batch: { results: req.batch!.items.map(() => one) },
          })),
        },
      },
      {
        definition: StreamService,
        name: 'bench.LoginStream',
        implementation: {
          logins: (s: grpc.ServerDuplexStream<LoginBatchItem, LoginBatchReply>) => {
            s.on('data', () => s.write({ results: [one] }));
            s.on('end', () => s.end());
          },
        },
      },
    ],
    '127.0.0.1',
    0,
    // The parent's secret: BENCH_AUTH is drawn anew in each process.
    { internalSecret: process.env.RPC_BENCH_SECRET! },
  );
  process.send!(running.port);
}

type Login = () => Promise<unknown>;

function options(port: number): Record<string, { login: Login; close(): void }> {
  const address = `127.0.0.1:${port}`;
  const metrics = new LoginMetrics();
  const deadline = { deadlineMs: 5000, retryAfter: 1 };
  const unaryClient = grpcClient(DirectoryClient, address, BENCH_AUTH);
  const backends = connectBackends({ directoryAddr: address, nodeAssignAddr: address, auth: BENCH_AUTH, grpcDeadlineMs: 5000, retryAfter: 1 }, metrics);
  const StreamClient = grpc.makeGenericClientConstructor(StreamService, 'LoginStream');
  const streamClient = grpcClient(StreamClient, address, BENCH_AUTH) as unknown as grpc.Client & { logins(): grpc.ClientDuplexStream<LoginBatchItem, LoginBatchReply> };
  const stream = streamClient.logins();
  const waiting: Array<(r: LoginBatchReply) => void> = [];
  stream.on('data', (r: LoginBatchReply) => waiting.shift()!(r));
  let id = 0;
  // A turn's logins in one unary LoginBatch call, as login sent them before LoginStream.
  let turn: Array<{ item: LoginBatchItem; resolve: (u: unknown) => void }> = [];
  const batchTurn = (): void => {
    const batch = turn;
    turn = [];
    void call(unaryClient, unaryClient.loginBatch, { items: batch.map((w) => w.item) }, deadline).then(({ results }) => batch.forEach((w, k) => w.resolve(results[k])));
  };
  return {
    'unary Login': { login: () => metrics.timeCall('unary', () => call(unaryClient, unaryClient.login, REQUEST, deadline)), close: () => unaryClient.close() },
    'LoginBatch, coalesced per event-loop turn, a unary call each': {
      login: () =>
        metrics.timeCall(
          'batch',
          () =>
            new Promise((resolve) => {
              if (turn.length === 0) setImmediate(batchTurn);
              turn.push({ item: { requestId: `rid-${id++}`, login: REQUEST }, resolve });
            }),
        ),
      close: () => undefined,
    },
    'the same batches as messages on one LoginStream (login)': { login: () => backends.login(REQUEST, `rid-${id++}`), close: () => backends.close() },
    'bidirectional stream, one message per login': {
      login: () =>
        metrics.timeCall(
          'stream',
          () =>
            new Promise((resolve) => {
              waiting.push(resolve);
              stream.write({ requestId: `rid-${id++}`, login: REQUEST });
            }),
        ),
      close: () => {
        stream.end();
        streamClient.close();
      },
    },
  };
}

async function measure(login: Login, logins: number, concurrency: number): Promise<{ perSecond: number; clientUs: number }> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  let sent = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent++ < logins) await login();
    }),
  );
  const used = process.cpuUsage(cpu);
  return { perSecond: (logins * 1000) / (performance.now() - started), clientUs: (used.user + used.system) / logins };
}

export async function benchRpc(logins: number): Promise<Array<Record<string, string | number>>> {
  const server = fork(fileURLToPath(import.meta.url), ['--server'], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    env: { ...process.env, RPC_BENCH_SECRET: BENCH_AUTH.internalSecret },
  });
  // Never left behind, whatever happens here.
  process.once('exit', () => server.kill());
  const port = await new Promise<number>((resolve) => server.once('message', (m) => resolve(m as number)));
  const opts = options(port);
  const rows: Array<Record<string, string | number>> = [];
  try {
    for (const o of Object.values(opts)) await measure(o.login, 2000, 32);
    // Alternating rounds, so that the machine's other load hits every option alike; the median of 3.
    const byOption: Record<string, Array<{ perSecond: number; clientUs: number; serverUs: number; concurrency: number }>> = {};
    for (let round = 0; round < 3; round++) {
      for (const concurrency of [32, 1]) {
        for (const [name, o] of Object.entries(opts)) {
          const n = concurrency === 1 ? Math.ceil(logins / 10) : logins;
          const serverCpu = cpuSeconds(server.pid!);
          const r = await measure(o.login, n, concurrency);
          (byOption[`${name}|${concurrency}`] ??= []).push({ ...r, serverUs: ((cpuSeconds(server.pid!) - serverCpu) * 1e6) / n, concurrency });
        }
      }
    }
    for (const [key, rs] of Object.entries(byOption)) {
      const [name, concurrency] = key.split('|');
      rows.push({
        option: name,
        'in flight': Number(concurrency),
        'logins/s': Math.round(median(rs.map((r) => r.perSecond))),
        'client CPU µs/login': Math.round(median(rs.map((r) => r.clientUs))),
        'server CPU µs/login': Math.round(median(rs.map((r) => r.serverUs))),
      });
    }
  } finally {
    for (const o of Object.values(opts)) o.close();
    server.kill();
  }
  return rows;
}

if (process.argv.includes('--server')) {
  await serve();
} else if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({ options: { logins: { type: 'string', default: '20000' }, server: { type: 'boolean' } } });
  console.table(await benchRpc(Number(values.logins)));
  process.exit(0);
}
