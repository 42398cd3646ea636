// Prometheus metrics (prom-client). Each service instance has its own
// registry, so several instances in one process (tests, the embedded stack)
// never share counters; process-wide metrics (CPU, memory, event loop, GC) are
// collected once per process and appended to every instance's page.
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { ProtocolError } from './errors.js';

/** Seconds; from a fast local answer to a gRPC deadline or a slow upstream. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

let processRegistry: Registry | undefined;

function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export interface MetricsPage {
  contentType: string;
  body: string;
}

/** What a /metrics listener serves (lib/metrics-server.ts). */
export interface MetricsSource {
  page(): Promise<MetricsPage>;
}

/** One registry's metrics as prom-client's JSON: plain data, so it crosses a cluster's IPC channel. */
export type MetricsSnapshot = MetricObjectWithValues<MetricValue<string>>[];

/**
 * One page for several processes (a cluster's workers), from the snapshots
 * each sent: prom-client's aggregation, so counters and histograms are summed,
 * and the process metrics as each declares (memory and CPU summed, event-loop
 * lag averaged, start time left out).
 */
export async function aggregatedPage(snapshots: MetricsSnapshot[]): Promise<MetricsPage> {
  const registry = AggregatorRegistry.aggregate(snapshots);
  return { contentType: registry.contentType, body: await registry.metrics() };
}

/** Counts and latencies of HTTP requests, by route (a template, never a raw path) and outcome. */
export interface HttpMetrics {
  requests: Counter<'route' | 'method' | 'status' | 'status_string'>;
  duration: Histogram<'route' | 'method' | 'status'>;
}

export interface RequestOutcome {
  route: string;
  method: string;
  status: number;
  statusString: string;
  seconds: number;
}

export class ServiceMetrics {
  readonly registry = new Registry();
  readonly http: HttpMetrics;

  constructor(readonly service: string) {
    this.registry.setDefaultLabels({ service });
    this.http = {
      requests: new Counter({
        name: 'http_requests_total',
        help: 'HTTP requests answered, by route, method, status and status string',
        labelNames: ['route', 'method', 'status', 'status_string'],
        registers: [this.registry],
      }),
      duration: new Histogram({
        name: 'http_request_duration_seconds',
        help: 'Time from request to response, by route, method and status',
        labelNames: ['route', 'method', 'status'],
        buckets: LATENCY_BUCKETS,
        registers: [this.registry],
      }),
    };
  }

  observeRequest(o: RequestOutcome): void {
    const status = String(o.status);
    this.http.requests.inc({ route: o.route, method: knownMethod(o.method), status, status_string: o.statusString });
    this.http.duration.observe({ route: o.route, method: knownMethod(o.method), status }, o.seconds);
  }

  /** The Prometheus text page: this instance's metrics, then the process's. */
  async page(): Promise<MetricsPage> {
    const own = await this.registry.metrics();
    const proc = await processMetrics().metrics();
    return { contentType: this.registry.contentType, body: `${own}\n${proc}` };
  }

  /** What page() shows, as snapshots for aggregatedPage(). */
  snapshots(): Promise<MetricsSnapshot[]> {
    return Promise.all([this.registry.getMetricsAsJSON(), processMetrics().getMetricsAsJSON()]);
  }
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** A method label from a fixed set: a client may send any token as a method. */
export function knownMethod(method: string): string {
  return METHODS.has(method) ? method : 'other';
}

/** The status string of an answer: the error's own, "ok" below 400, else "error". */
export function statusStringOf(status: number, err?: unknown): string {
  if (err instanceof ProtocolError) return err.statusString;
  return status < 400 ? 'ok' : 'error';
}

/** How a call ended, as a label: "ok", or the class of the error it threw. */
export function outcomeOf(err: unknown): string {
  if (err === undefined) return 'ok';
  return err instanceof ProtocolError ? err.name : 'InternalError';
}

export class LoginMetrics extends ServiceMetrics {
  readonly backendCalls = new Histogram<'method' | 'outcome'>({
    name: 'login_backend_call_duration_seconds',
    help: 'gRPC calls from login to directory and nodeassign, by method and outcome',
    labelNames: ['method', 'outcome'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly allocations = new Counter<'application'>({
    name: 'login_node_allocations_total',
    help: 'Nodes allocated to users, by application',
    labelNames: ['application'],
    registers: [this.registry],
  });
  readonly tokenRequestsInFlight = new Gauge({
    name: 'login_token_requests_in_flight',
    help: 'Token requests being served',
    registers: [this.registry],
  });
  readonly overload = new Counter<'action'>({
    name: 'login_overload_total',
    help: 'Token requests answered under load: "backoff" (served with X-Backoff) or "reject" (503)',
    labelNames: ['action'],
    registers: [this.registry],
  });
  /** DESIGN §13.1: fetches of a key set from the provider, by set (oauth, webhook) and outcome. */
  readonly jwksFetches = new Counter<'set' | 'outcome'>({
    name: 'login_jwks_fetches_total',
    help: 'Fetches of a key set from the provider (OAUTH_JWKS / WEBHOOK_JWKS as a URL, or discovery), by set and outcome ("ok", or why it failed)',
    labelNames: ['set', 'outcome'],
    registers: [this.registry],
  });
  /** When each fetched set in use was fetched (ms), read at scrape time. */
  private readonly jwksFetchedAt = new Map<string, () => number | undefined>();
  readonly jwksAge = new Gauge<'set'>({
    name: 'login_jwks_age_seconds',
    help: 'Age of the key set in use, since it was fetched from the provider, by set; absent while there is none (a cluster shows its oldest)',
    labelNames: ['set'],
    registers: [this.registry],
    aggregator: 'max',
    collect: () => {
      this.jwksAge.reset();
      for (const [set, fetchedAt] of this.jwksFetchedAt) {
        const at = fetchedAt();
        if (at !== undefined) this.jwksAge.set({ set }, Math.max(0, (Date.now() - at) / 1000));
      }
    },
  });

  constructor() {
    super('login');
  }

  /** Reports the age of `set` (from `fetchedAtMs`, undefined while none) as login_jwks_age_seconds. */
  watchJwksAge(set: string, fetchedAtMs: () => number | undefined): void {
    this.jwksFetchedAt.set(set, fetchedAtMs);
  }

  /** Runs one backend call and records its latency and outcome. */
  async timeCall<T>(method: string, run: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      const result = await run();
      this.backendCalls.observe({ method, outcome: 'ok' }, (performance.now() - started) / 1000);
      return result;
    } catch (err) {
      this.backendCalls.observe({ method, outcome: outcomeOf(err) }, (performance.now() - started) / 1000);
      throw err;
    }
  }
}

export class GatewayMetrics extends ServiceMetrics {
  readonly upstream = new Histogram<'outcome'>({
    name: 'gateway_upstream_duration_seconds',
    help: 'Forwarded requests, from sending to the end of the answer, by outcome (status class, BadGateway, GatewayTimeout)',
    labelNames: ['outcome'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly rejections = new Counter<'reason'>({
    name: 'gateway_rejections_total',
    help: 'Requests refused before forwarding, by reason (the error class)',
    labelNames: ['reason'],
    registers: [this.registry],
  });

  constructor() {
    super('node-gateway');
  }
}

/** "2xx" … "5xx" for a status the application answered. */
export function statusClass(status: number): string {
  return `${Math.floor(status / 100)}xx`;
}

/** Records of one application and state, as the directory's gauge reports them. */
export interface RecordCount {
  application: string;
  state: 'live' | 'replaced';
  count: number;
}

/**
 * Counts from a store, taken at most once per `maxAgeMs` (MongoDB counts scan the
 * collection: not something to run on every scrape), one count at a time
 * however many scrapes come. A failed count keeps the last values, whose age
 * the page shows.
 */
export class CachedCounts {
  private last: { at: number; counts: RecordCount[] } | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly count: () => Promise<RecordCount[]>,
    private readonly maxAgeMs: number,
    private readonly onError: (err: unknown) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** The counts and when (ms since epoch) they were taken; undefined until one count has succeeded. */
  async get(): Promise<{ at: number; counts: RecordCount[] } | undefined> {
    if (this.last && this.now() - this.last.at < this.maxAgeMs) return this.last;
    this.running ??= this.count().then(
      (counts) => {
        this.last = { at: this.now(), counts };
        this.running = undefined;
      },
      (err: unknown) => {
        this.running = undefined;
        this.onError(err);
      },
    );
    await this.running;
    return this.last;
  }
}

export class DirectoryMetrics extends ServiceMetrics {
  readonly retired = this.perApplication(
    'directory_retired_users_total',
    'Live records retired (account deleted: `users retire` or the account events webhook), by application',
  );
  readonly purgeClaims = new Counter<'application' | 'outcome'>({
    name: 'directory_purge_claims_total',
    help: 'Claims of replaced records by purge, by application and outcome: ok, or gone, too-recent, claimed (held by another purge)',
    labelNames: ['application', 'outcome'],
    registers: [this.registry],
  });
  readonly purged = this.perApplication('directory_purged_records_total', 'Replaced records deleted by purge (after their node deleted the data), by application');
  readonly trimmedClientStates = this.perApplication('directory_trimmed_client_states_total', 'Previously seen client states trimmed by purge, by application');

  constructor(counts: CachedCounts) {
    super('directory');
    // Both gauges ask the cache at scrape time; scrapes collect them together, so they share one count.
    new Gauge<'application' | 'state'>({
      name: 'directory_user_records',
      help: 'User records by application and state: live (with a uid) and replaced (old uids left for purge)',
      labelNames: ['application', 'state'],
      registers: [this.registry],
      async collect() {
        const taken = await counts.get();
        this.reset();
        for (const c of taken?.counts ?? []) this.set({ application: c.application, state: c.state }, c.count);
      },
    });
    new Gauge({
      name: 'directory_user_records_counted_timestamp_seconds',
      help: 'When directory_user_records was counted (cached for a few seconds, and kept when a count fails)',
      registers: [this.registry],
      async collect() {
        const taken = await counts.get();
        this.reset();
        if (taken) this.set(taken.at / 1000);
      },
    });
  }

  private perApplication(name: string, help: string): Counter<'application'> {
    return new Counter({ name, help, labelNames: ['application'], registers: [this.registry] });
  }
}

export class NodeAssignMetrics extends ServiceMetrics {
  readonly loadDrift = new Gauge<'application' | 'node'>({
    name: 'nodeassign_load_drift',
    help: "Each node's load minus what the directory's records call for (live users plus replaced uids not released), as the last reconcile found it",
    labelNames: ['application', 'node'],
    registers: [this.registry],
  });
  readonly loadCorrections = new Counter<'application'>({
    name: 'nodeassign_load_corrections_total',
    help: 'Node loads set to what the directory records call for by reconcile, by application',
    labelNames: ['application'],
    registers: [this.registry],
  });
  readonly abandonedClaims = new Counter<'application'>({
    name: 'nodeassign_abandoned_claims_total',
    help: 'Slots given back (or never claimed) because the Allocate caller was gone, by application',
    labelNames: ['application'],
    registers: [this.registry],
  });

  constructor() {
    super('nodeassign');
  }
}
