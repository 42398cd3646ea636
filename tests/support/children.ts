// Child processes a test started (services, Redis), stopped when the test process exits, however it
// ends: a test that fails before its stop(), or a mutation run's forced exit, would otherwise leave
// them running.
import type { ChildProcess } from 'node:child_process';

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) {
    // A paused child (SIGSTOP) acts on SIGTERM only once it runs again.
    c.kill('SIGCONT');
    c.kill('SIGTERM');
  }
});

/** Stops `child` when this process exits, unless it has ended by then. */
export function stopOnExit(child: ChildProcess): void {
  children.add(child);
  child.once('close', () => children.delete(child));
}

/** Whether a process with this pid exists (one this process may not signal counts too). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
