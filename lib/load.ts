// The overload signal (DESIGN §3: "under heavy load any response may carry
// X-Backoff"): a pure decision from two measurements, the requests in flight
// and the event-loop delay, so clients slow down before anything is refused.
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import type { OverloadConfig } from './config.js';

export interface LoadSignal {
  /** Requests in flight, this one included. */
  inFlight: number;
  /** Mean event-loop delay over the last sampling window, milliseconds. */
  loopDelayMs: number;
}

export type LoadDecision =
  | { action: 'serve' }
  | { action: 'backoff'; backoffSeconds: number }
  | { action: 'reject'; backoffSeconds: number; retryAfter: number };

export type OverloadPolicy = Pick<OverloadConfig, 'backoffSeconds' | 'backoffInFlight' | 'maxInFlight' | 'backoffLoopDelayMs' | 'retryAfter'>;

/** Beyond the hard cap: refuse. Above either threshold: serve, asking for a backoff. Else serve. */
export function decideLoad(signal: LoadSignal, policy: OverloadPolicy): LoadDecision {
  if (signal.inFlight > policy.maxInFlight) {
    return { action: 'reject', backoffSeconds: policy.backoffSeconds, retryAfter: policy.retryAfter };
  }
  const crowded = signal.inFlight > policy.backoffInFlight;
  const lagging = policy.backoffLoopDelayMs > 0 && signal.loopDelayMs > policy.backoffLoopDelayMs;
  if (crowded || lagging) return { action: 'backoff', backoffSeconds: policy.backoffSeconds };
  return { action: 'serve' };
}

/** Timer resolution of the delay monitor; its samples include it, so it is taken off. */
const RESOLUTION_MS = 20;
const WINDOW_MS = 1000;

interface SharedMonitor {
  histogram: IntervalHistogram;
  timer: NodeJS.Timeout;
  users: number;
  lastMs: number;
}

// The event loop is the process's, so one monitor serves every instance in it.
let shared: SharedMonitor | undefined;

export interface LoopDelay {
  /** Mean delay over the last full window (ms); 0 until the first window ends. */
  ms(): number;
  stop(): void;
}

/** A window's reading: the mean delay (ns, as the histogram keeps it) in ms, less the timer's resolution; 0 for a window without samples. */
export function windowDelayMs(samples: number, meanNs: number): number {
  if (samples === 0) return 0;
  return Math.max(0, meanNs / 1e6 - RESOLUTION_MS);
}

/**
 * The mean (not a high percentile) over a one-second window: one long
 * synchronous task moves it little, a loop that is busy all the time moves it a lot.
 */
export function watchLoopDelay(): LoopDelay {
  if (!shared) {
    const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    histogram.enable();
    const monitor: SharedMonitor = { histogram, users: 0, lastMs: 0, timer: undefined as unknown as NodeJS.Timeout };
    monitor.timer = setInterval(() => {
      monitor.lastMs = windowDelayMs(histogram.count, histogram.mean);
      histogram.reset();
    }, WINDOW_MS);
    monitor.timer.unref();
    shared = monitor;
  }
  const monitor = shared;
  monitor.users++;
  let stopped = false;
  return {
    ms: () => monitor.lastMs,
    stop() {
      if (stopped) return;
      stopped = true;
      if (--monitor.users === 0) {
        clearInterval(monitor.timer);
        monitor.histogram.disable();
        // A new monitor is made only once this one has no users, so it is still the shared one here.
        shared = undefined;
      }
    },
  };
}
