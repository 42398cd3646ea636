// The nodes store interface. Allocation rules live above it (rules.ts); every
// write here is a single-record atomic operation guarded by the expected state.

export interface NodeRecord {
  service: string;
  url: string;
  capacity: number;
  currentLoad: number;
  /** Slots that may be handed out before capacity is released again. */
  available: number;
  downed: boolean;
  backoff: boolean;
}

export interface NodePatch {
  capacity?: number;
  downed?: boolean;
  backoff?: boolean;
}

export interface NodeStore {
  /** false when (service, url) exists already. */
  add(node: NodeRecord): Promise<boolean>;
  get(service: string, url: string): Promise<NodeRecord | null>;
  /** Every node of one application, or of all when service is undefined; ordered by service, url. */
  list(service?: string): Promise<NodeRecord[]>;
  /** null when there is no such node. */
  update(service: string, url: string, patch: NodePatch): Promise<NodeRecord | null>;
  /** The removed node, or null when there was none. */
  remove(service: string, url: string): Promise<NodeRecord | null>;
  /**
   * Up to `limit` eligible nodes (available > 0, currentLoad < capacity, not
   * downed, no backoff), lowest currentLoad/capacity first. Served by an index,
   * so its cost does not grow with the number of nodes.
   */
  candidates(service: string, limit: number): Promise<NodeRecord[]>;
  /** Atomically counts one user on the node if it is still eligible; the updated node or null. */
  claim(service: string, url: string): Promise<NodeRecord | null>;
  /**
   * Atomically gives back one slot (load − 1, available + 1) if the node has
   * any load; the node afterwards (unchanged at load 0), or null when there is none.
   */
  release(service: string, url: string): Promise<NodeRecord | null>;
  /**
   * Sets `available` if the node still has the given load and available
   * (compare-and-set); false when it changed meanwhile.
   */
  setAvailable(node: NodeRecord, available: number): Promise<boolean>;
  /**
   * Writes every field of `node` (load and slots too) if the stored node still
   * equals `expected` field for field (compare-and-set); false when it changed
   * meanwhile or is gone. For imports, which carry a node's whole state.
   */
  replace(node: NodeRecord, expected: NodeRecord): Promise<boolean>;

  /**
   * Sets the load to `to` if it is still `from` (compare-and-set), moving
   * `available` with it as claim and release do (rules.ts correctedAvailable);
   * the updated node, or null when the node is gone or its load is not `from`.
   */
  setLoad(service: string, url: string, from: number, to: number): Promise<NodeRecord | null>;
  /** Nodes of `service` whose slots may be opened again (rules.ts isReleasable), in backoff or not; ordered by url. */
  releasable(service: string): Promise<NodeRecord[]>;
  /** Reachability check for health endpoints. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
