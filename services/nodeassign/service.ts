// NodeAssign gRPC handlers. Allocate reads a few candidates from the index,
// claims the best one with a guarded update (trying the next if another
// request took the last slot), and opens new slots on every node that has room
// (in backoff or not) when no candidate is left. A caller that is gone (its
// deadline passed, or it cancelled) gets no slot: nothing would assign or
// release it.
import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import { BadRequest, Conflict, NoNodeAvailable, RecordNotFound, ServiceUnavailable } from '../../lib/errors.js';
import { unary } from '../../lib/grpc.js';
import type { Logger } from '../../lib/log.js';
import type { NodeAssignMetrics } from '../../lib/metrics.js';
import type {
  AddNodeRequest,
  AllocateRequest,
  ImportNodeReply,
  ImportNodeRequest,
  ListNodesReply,
  ListNodesRequest,
  NodeReply,
  LoadResult,
  ReconcileLoadsReply,
  ReconcileLoadsRequest,
  ReleaseRequest,
  RemoveNodeRequest,
  UpdateNodeRequest,
} from '../../lib/gen/nodeassign.js';
import {
  capacityProblem,
  importedNodeProblem,
  initialAvailable,
  loadDrift,
  nodeImportOutcome,
  nodeInputProblem,
  rankNodes,
  releasedAvailable,
  serviceProblem,
  type LoadCheck,
} from './rules.js';
import type { NodeRecord, NodeStore } from './store.js';

/** Candidates read per round: enough to get past the few that concurrent requests just filled. */
const CANDIDATES = 8;
/** Rounds before giving up; each round ends only after other requests took slots or slots were released. */
export const MAX_ROUNDS = 50;

function fail(problem: Error | null): void {
  if (problem) throw problem;
}

function noNode(service: string): NoNodeAvailable {
  return new NoNodeAvailable(`no node has room for new users of ${service}`);
}

function callerGone(): ServiceUnavailable {
  return new ServiceUnavailable('the caller gave up before a node was claimed');
}

const stays = () => false;

/** `gone` tells whether the caller is still waiting; a caller that is not gets no slot. */
export async function allocate(store: NodeStore, service: string, releaseRate: number, gone: () => boolean = stays): Promise<NodeRecord> {
  fail(serviceProblem(service));
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const candidates = rankNodes(await store.candidates(service, CANDIDATES));
    for (const node of candidates) {
      if (gone()) throw callerGone();
      const claimed = await store.claim(service, node.url);
      if (!claimed) continue;
      // The caller left while the claim was under way: the slot goes back, as nobody will assign it.
      if (gone()) {
        await store.release(service, node.url);
        throw callerGone();
      }
      return claimed;
    }
    if (candidates.length > 0) continue;
    // No slots anywhere: open a share of each releasable node's capacity, then look again.
    let releasable = false;
    for (const node of await store.releasable(service)) {
      const available = releasedAvailable(node, releaseRate);
      if (available <= 0) continue;
      releasable = true;
      // A lost compare-and-set means another request released (or claimed) first: fine either way.
      await store.setAvailable(node, available);
    }
    if (!releasable) throw noNode(service);
  }
  throw noNode(service);
}

/** Most checks one ReconcileLoads call may carry. */
export const MAX_LOAD_CHECKS = 10_000;

/** One node's check: the drift into the gauge, then (unless a dry run) the load set by compare-and-set. */
export async function reconcileLoad(store: NodeStore, check: LoadCheck, dryRun: boolean, metrics?: NodeAssignMetrics): Promise<LoadResult['outcome']> {
  fail(nodeInputProblem(check));
  if (!Number.isSafeInteger(check.load) || check.load < 0 || !Number.isSafeInteger(check.expected) || check.expected < 0) {
    throw new BadRequest('load and expected must be non-negative integers');
  }
  const drift = loadDrift(check);
  metrics?.loadDrift.set({ application: check.service, node: check.url }, drift);
  if (drift === 0) return 'ok';
  if (dryRun) return 'found';
  if (await store.setLoad(check.service, check.url, check.load, check.expected)) {
    metrics?.loadCorrections.inc({ application: check.service });
    return 'corrected';
  }
  return (await store.get(check.service, check.url)) ? 'changed' : 'gone';
}

export async function reconcileLoads(store: NodeStore, req: ReconcileLoadsRequest, metrics?: NodeAssignMetrics): Promise<ReconcileLoadsReply> {
  if (req.checks.length > MAX_LOAD_CHECKS) throw new BadRequest(`at most ${MAX_LOAD_CHECKS} checks per call`);
  const results: LoadResult[] = [];
  for (const check of req.checks) results.push({ check, outcome: await reconcileLoad(store, check, req.dryRun, metrics) });
  return { results };
}

export async function addNode(store: NodeStore, req: AddNodeRequest, releaseRate: number): Promise<NodeRecord> {
  fail(nodeInputProblem(req));
  const node: NodeRecord = {
    service: req.service,
    url: req.url,
    capacity: req.capacity,
    currentLoad: 0,
    available: initialAvailable(req.capacity, releaseRate),
    downed: false,
    backoff: false,
  };
  if (!(await store.add(node))) throw new Conflict(`node ${req.url} exists already for ${req.service}`);
  return node;
}

export async function updateNode(store: NodeStore, req: UpdateNodeRequest): Promise<NodeRecord> {
  fail(nodeInputProblem({ service: req.service, url: req.url }));
  if (req.capacity !== undefined) fail(capacityProblem(req.capacity));
  const updated = await store.update(req.service, req.url, { capacity: req.capacity, downed: req.downed, backoff: req.backoff });
  if (!updated) throw new RecordNotFound(`no node ${req.url} for ${req.service}`);
  return updated;
}

/** ImportNode: the node as given, added or overwritten (rules.ts nodeImportOutcome), compare-and-set. */
export async function importNode(store: NodeStore, req: ImportNodeRequest): Promise<ImportNodeReply> {
  if (!req.node) throw new BadRequest('node is required');
  const incoming: NodeRecord = { ...req.node };
  fail(importedNodeProblem(incoming));
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const stored = await store.get(incoming.service, incoming.url);
    const result = nodeImportOutcome(stored, incoming);
    const done = req.dryRun || result === 'unchanged';
    if (done || (stored ? await store.replace(incoming, stored) : await store.add(incoming))) {
      return { result, node: done ? (stored ?? incoming) : incoming };
    }
  }
  throw new ServiceUnavailable(`node ${incoming.url} is too busy to import now`);
}

export function nodeAssignService(store: NodeStore, log: Logger, releaseRate: number, metrics?: NodeAssignMetrics): UntypedServiceImplementation {
  return {
    // NodeRecord has exactly the fields of the proto Node.
    allocate: unary<AllocateRequest, NodeReply>(log, 'Allocate', async (req, ctx) => {
      const gone = () => {
        if (!ctx.gone()) return false;
        metrics?.abandonedClaims.inc({ application: req.service });
        return true;
      };
      return { node: await allocate(store, req.service, releaseRate, gone) };
    }),
    reconcileLoads: unary<ReconcileLoadsRequest, ReconcileLoadsReply>(log, 'ReconcileLoads', (req) => reconcileLoads(store, req, metrics)),
    release: unary<ReleaseRequest, NodeReply>(log, 'Release', async (req) => {
      fail(nodeInputProblem(req));
      const node = await store.release(req.service, req.url);
      if (!node) throw new RecordNotFound(`no node ${req.url} for ${req.service}`);
      return { node };
    }),
    addNode: unary<AddNodeRequest, NodeReply>(log, 'AddNode', async (req) => ({ node: await addNode(store, req, releaseRate) })),
    updateNode: unary<UpdateNodeRequest, NodeReply>(log, 'UpdateNode', async (req) => ({ node: await updateNode(store, req) })),
    listNodes: unary<ListNodesRequest, ListNodesReply>(log, 'ListNodes', async (req) => ({
      nodes: await store.list(req.service === '' ? undefined : req.service),
    })),
    removeNode: unary<RemoveNodeRequest, NodeReply>(log, 'RemoveNode', async (req) => {
      fail(nodeInputProblem(req));
      const removed = await store.remove(req.service, req.url);
      if (!removed) throw new RecordNotFound(`no node ${req.url} for ${req.service}`);
      return { node: removed };
    }),
    importNode: unary<ImportNodeRequest, ImportNodeReply>(log, 'ImportNode', (req) => importNode(store, req)),
  };
}
