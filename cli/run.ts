// The CLI glue: parse (args.ts), run (commands.ts and backends.ts, loaded only for a command,
// so --help and usage errors start fast), print, pick the exit code.
import type { Env } from '../lib/config.js';
import { parseCli, UsageError } from './args.js';
import type { ProgressOutput } from './commands.js';

export interface Io extends ProgressOutput {
  stdout(text: string): void;
}

/** The whole CLI: argv (without node and script) → output on io → exit code (0 ok, 1 failure, 2 bad arguments). */
export async function runCli(argv: string[], env: Env, io: Io): Promise<number> {
  let parsed;
  try {
    parsed = parseCli(argv, env);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.stderr(`error: ${e.message}\n${e.usage ? `\n${e.usage}` : ''}`);
    return 2;
  }
  if (parsed.kind === 'help') {
    io.stdout(parsed.text);
    return 0;
  }
  const [{ Backends }, { describe, execute }] = await Promise.all([import('./backends.js'), import('./commands.js')]);
  const backends = new Backends(parsed.globals);
  try {
    const out = await execute(parsed.command, backends, parsed.globals, io);
    io.stdout(parsed.globals.json ? JSON.stringify(out.json, null, 2) + '\n' : out.text);
    return out.code ?? 0;
  } catch (e) {
    io.stderr(`error: ${describe(e)}\n`);
    return 1;
  } finally {
    backends.close();
  }
}
