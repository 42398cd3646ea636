// The directory's metrics: purge and retire counters, counted from the answers
// of the RPCs that do that work (the handlers stay as they are), and the gauge
// of records by state from the store's counts.
import type { handleUnaryCall, UntypedServiceImplementation } from '@grpc/grpc-js';
import type { DirectoryMetrics, RecordCount } from '../../lib/metrics.js';
import type { NodeCount } from './store.js';

/** One counter increment: which counter, its labels, by how much. */
export type Increment =
  | { counter: 'retired' | 'purged' | 'trimmedClientStates'; labels: { application: string }; by: number }
  | { counter: 'purgeClaims'; labels: { application: string; outcome: string }; by: number };

/** The RPCs counted, by their handler names in the service implementation. */
export const COUNTED_METHODS = ['retireUser', 'claimReplaced', 'deleteReplaced', 'trimClientStates'] as const;
export type CountedMethod = (typeof COUNTED_METHODS)[number];

/** What a successful answer of `method` to `req` adds to the counters. */
export function incrementsOf(method: CountedMethod, req: { service?: string }, reply: Record<string, unknown>): Increment[] {
  const application = req.service ?? '';
  switch (method) {
    case 'retireUser': {
      // RetireUser may span applications (service ''): count each retired record under its own.
      const byApp = new Map<string, number>();
      for (const r of (reply.retired as Array<{ service: string }> | undefined) ?? []) byApp.set(r.service, (byApp.get(r.service) ?? 0) + 1);
      return [...byApp].map(([app, n]) => ({ counter: 'retired', labels: { application: app }, by: n }));
    }
    case 'claimReplaced':
      return [{ counter: 'purgeClaims', labels: { application, outcome: reply.claimed ? 'ok' : String(reply.reason) }, by: 1 }];
    case 'deleteReplaced':
      return reply.deleted ? [{ counter: 'purged', labels: { application }, by: 1 }] : [];
    case 'trimClientStates': {
      const removed = Number(reply.removed);
      return removed > 0 ? [{ counter: 'trimmedClientStates', labels: { application }, by: removed }] : [];
    }
  }
}

/** The gauge's values: live and replaced records per application, summed over nodes. */
export function recordCounts(perNode: NodeCount[]): RecordCount[] {
  const byApp = new Map<string, { live: number; replaced: number }>();
  for (const c of perNode) {
    const sum = byApp.get(c.service) ?? { live: 0, replaced: 0 };
    sum.live += c.live;
    sum.replaced += c.replaced;
    byApp.set(c.service, sum);
  }
  return [...byApp].flatMap(([application, sum]) => [
    { application, state: 'live' as const, count: sum.live },
    { application, state: 'replaced' as const, count: sum.replaced },
  ]);
}

function count(metrics: DirectoryMetrics, i: Increment): void {
  if (i.counter === 'purgeClaims') metrics.purgeClaims.inc(i.labels, i.by);
  else metrics[i.counter].inc(i.labels, i.by);
}

/** The same handlers, each counted RPC counting its successful answers. */
export function countedService(implementation: UntypedServiceImplementation, metrics: DirectoryMetrics): UntypedServiceImplementation {
  const counted: UntypedServiceImplementation = { ...implementation };
  for (const method of COUNTED_METHODS) {
    const handler = implementation[method] as handleUnaryCall<{ service?: string }, Record<string, unknown>>;
    counted[method] = ((call, callback) =>
      handler(call, (err, reply, ...rest) => {
        if (!err && reply) for (const i of incrementsOf(method, call.request, reply)) count(metrics, i);
        callback(err, reply, ...rest);
      })) as handleUnaryCall<{ service?: string }, Record<string, unknown>>;
  }
  return counted;
}
