// The shared test vectors (DESIGN §5, §6) live in `shared/vectors/` beside the
// repository. Found by walking up from here, so the tests read them from a
// git worktree or a mutation-testing sandbox (both sit deeper) as well.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export function readVectors<T = unknown>(name: 'tokenlib.json' | 'hawk.json'): T {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = path.join(dir, 'shared', 'vectors', name);
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')).vectors as T;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`shared/vectors/${name} not found above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}
