// Prometheus metrics (prom-client). Each service instance has its own
// registry, so several instances in one process (tests, the embedded stack)
// never share counters; process-wide metrics (CPU, memory, event loop, GC) are
// collected once per process and appended to every instance's page.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
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

  constructor() {
    super('login');
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
