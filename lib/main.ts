// The one way a service's entry point runs: load configuration, start, stop
// cleanly on SIGINT/SIGTERM. Bad configuration prints the message naming the
// variable and exits 1; any other start failure is logged and exits 1.
import { ConfigError } from './errors.js';
import { logger } from './log.js';

export interface Stoppable {
  close(): Promise<void>;
}

/**
 * `announce` returns the fields of the "<name> listening" line for services
 * that do not log it themselves (undefined: no line); it is logged once the
 * signal handlers are in place, because whoever waits for that line may stop
 * the service at once.
 */
export function runService<R extends Stoppable>(name: string, start: () => Promise<R>, announce?: (running: R) => Record<string, unknown> | undefined): void {
  const log = logger(name);
  let running: R | undefined;
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, `${name} stopping`);
    (running?.close() ?? Promise.resolve()).then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, `${name} did not stop cleanly`);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // Configuration is read inside start(), so a synchronous ConfigError lands in the same handler.
  Promise.resolve().then(start).then(
    (r) => {
      running = r;
      if (stopping) return void r.close().then(() => process.exit(0));
      const fields = announce?.(r);
      if (fields) log.info(fields, `${name} listening`);
    },
    (err) => exitOnStartFailure(name, err),
  );
}

/** Bad configuration: the message naming the variable; anything else: logged. Then exit 1. */
export function exitOnStartFailure(name: string, err: unknown): never {
  if (err instanceof ConfigError) {
    process.stderr.write(`configuration error: ${err.message}\n`);
  } else {
    logger(name).error({ err }, `${name} failed to start`);
    process.stderr.write(`${name} failed to start: ${(err as Error).message}\n`);
  }
  process.exit(1);
}
