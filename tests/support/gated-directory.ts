// A directory that holds logins at a gate, for the tests that need a request
// to login to stay in flight (the overload signal, draining on stop).
import type * as grpc from '@grpc/grpc-js';
import { DEFAULTS } from '../../lib/config.js';
import { DirectoryService, type LoginBatchRequest, type LoginStreamReply, type LoginStreamRequest } from '../../lib/gen/directory.js';
import { answeringStream, OpenStreams, REQUEST_ID, startServer } from '../../lib/grpc.js';
import { logger } from '../../lib/log.js';
import { directoryService, loginStreamAnswer } from '../../services/directory/service.js';
import { openUserStore } from '../../services/directory/open-store.js';
import { TEST_AUTH } from './services.js';

export interface GatedDirectory {
  port: number;
  /** The x-request-id metadata of every Login call received. */
  requestIds: string[];
  /** Resolves once `n` Login calls are waiting at the gate. */
  waitForHeld(n: number): Promise<void>;
  /** Lets the waiting calls (and every later one) through. */
  open(): void;
  close(): Promise<void>;
}

/**
 * The real directory service on its own store, with its logins held until open(). Login coalesces
 * concurrent logins into batches (lib/grpc.ts MAX_BATCH_ITEMS) sent over LoginStream, so every login
 * method is gated and counted by login, not by call or message.
 */
export async function gatedDirectory(storeUrl: string): Promise<GatedDirectory> {
  const store = await openUserStore(storeUrl);
  const policy = { clientStateChangesPerDay: DEFAULTS.CLIENT_STATE_CHANGES_PER_DAY };
  const implementation = directoryService(store, logger('directory'), policy);
  const held: Array<() => void> = [];
  let heldLogins = 0;
  const requestIds: string[] = [];
  let waiting: { n: number; resolve: () => void } | undefined;
  let isOpen = false;
  const gate = (ids: string[], proceed: () => void): void => {
    requestIds.push(...ids);
    if (isOpen) return proceed();
    held.push(proceed);
    heldLogins += ids.length;
    if (waiting && heldLogins >= waiting.n) waiting.resolve();
  };
  const login = implementation.login as grpc.handleUnaryCall<unknown, unknown>;
  implementation.login = ((call, callback) => {
    gate([String(call.metadata.get(REQUEST_ID)[0])], () => login(call, callback));
  }) as grpc.handleUnaryCall<unknown, unknown>;
  const loginBatch = implementation.loginBatch as grpc.handleUnaryCall<LoginBatchRequest, unknown>;
  implementation.loginBatch = ((call: grpc.ServerUnaryCall<LoginBatchRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
    gate(call.request.items.map((item) => item.requestId), () => loginBatch(call, callback));
  }) as typeof implementation.loginBatch;
  const answer = loginStreamAnswer(store, policy, logger('directory'));
  const streams = new OpenStreams();
  implementation.loginStream = answeringStream<LoginStreamRequest, LoginStreamReply>(
    streams,
    (req) => new Promise((resolve) => gate(req.batch?.items.map((item) => item.requestId) ?? [], () => resolve(answer(req)))),
  );
  const running = await startServer(
    [{ definition: DirectoryService, implementation, name: 'tokenserver.directory.v1.Directory', streams }],
    '127.0.0.1',
    0,
    TEST_AUTH,
  );
  const open = (): void => {
    isOpen = true;
    for (const release of held.splice(0)) release();
  };
  return {
    port: running.port,
    requestIds,
    waitForHeld: (n) =>
      new Promise<void>((resolve) => {
        if (heldLogins >= n) resolve();
        else waiting = { n, resolve };
      }),
    open,
    async close() {
      open();
      await running.close();
      await store.close();
    },
  };
}
