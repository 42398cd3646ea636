// A process's CPU time from /proc, apart from bench/proc.ts so that the load
// generator (bench/load.ts, a process per window) can read it without loading
// the build and its TypeScript compiler.
import { readFileSync } from 'node:fs';

/** utime + stime of a process, seconds (clock ticks of 1/100 s on Linux); with `reaped`, also cutime + cstime: its children that have exited. */
export function cpuSeconds(pid: number, reaped = false): number {
  try {
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    const own = Number(fields[11]) + Number(fields[12]);
    return (reaped ? own + Number(fields[13]) + Number(fields[14]) : own) / 100;
  } catch {
    return 0;
  }
}
