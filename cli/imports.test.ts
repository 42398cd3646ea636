// The CLI's modules, and the login service's, import one another without a circle (type-only imports
// included): parsing, the gRPC edge and the commands stay layered, so each
// can be read, loaded and tested on its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = path.dirname(fileURLToPath(import.meta.url));

/** Each module's imports of its siblings (static and dynamic), by file name. */
function siblingImports(source: string): string[] {
  const found = [...source.matchAll(/(?:\bfrom|\bimport\s*\()\s*'\.\/([\w.-]+)\.js'/g)].map((m) => `${m[1]}.ts`);
  return [...new Set(found)];
}

/** One circle of the graph, as a path that ends where it starts, or null. */
function findCircle(graph: Map<string, string[]>): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const trail: string[] = [];
  const visit = (node: string): string[] | null => {
    if (state.get(node) === 'done') return null;
    if (state.get(node) === 'open') return [...trail.slice(trail.indexOf(node)), node];
    state.set(node, 'open');
    trail.push(node);
    for (const next of graph.get(node) ?? []) {
      const circle = visit(next);
      if (circle) return circle;
    }
    trail.pop();
    state.set(node, 'done');
    return null;
  };
  for (const node of graph.keys()) {
    const circle = visit(node);
    if (circle) return circle;
  }
  return null;
}

test('findCircle finds a circle through type-only and dynamic imports, and none in a layered graph', () => {
  const edges = (src: Record<string, string>) => new Map(Object.entries(src).map(([f, s]) => [f, siblingImports(s)]));
  const circle = edges({
    'args.ts': "import type { PurgeOptions } from './purge.js';",
    'purge.ts': "import type { Backends } from './commands.js';",
    'commands.ts': "import type { Command } from './args.js';\nconst x = await import('./backup.js');",
    'backup.ts': '',
  });
  assert.deepEqual(findCircle(circle), ['args.ts', 'purge.ts', 'commands.ts', 'args.ts']);
  assert.equal(findCircle(edges({ 'a.ts': "import { x } from './b.js';", 'b.ts': "const c = await import('./c.js');", 'c.ts': '' })), null);
});

test('the cli modules import one another without a circle', () => {
  const files = readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
  const graph = new Map(files.map((f) => [f, siblingImports(readFileSync(path.join(dir, f), 'utf8'))]));
  assert.ok((graph.get('commands.ts') ?? []).includes('args.ts'), 'the scan sees the imports');
  assert.equal(findCircle(graph)?.join(' → ') ?? null, null);
});

test('the login service modules import one another without a circle (schemes.ts and the scheme modules)', () => {
  const login = path.join(dir, '..', 'services', 'login');
  const files = readdirSync(login).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
  const graph = new Map(files.map((f) => [f, siblingImports(readFileSync(path.join(login, f), 'utf8'))]));
  assert.ok((graph.get('schemes.ts') ?? []).includes('scheme-bearer.ts'), 'the scan sees the imports');
  assert.equal(findCircle(graph)?.join(' → ') ?? null, null);
});
