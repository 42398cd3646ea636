// Production runs the services as compiled JavaScript under plain node
// (Dockerfile: tsc → dist/), not through tsx, whose loader adds a thread, a
// transform cache and start-up work. The benchmarks measure what production
// runs: the service sources are transpiled (no type check; `npm run
// typecheck` does that) into dist/bench/, beside their node_modules.
import { cpSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Where the transpiled tree goes (dist/ is ignored by git). */
export const BUILD_DIR = path.join(ROOT, 'dist', 'bench');
/** The services' sources: what bench/ab.ts --b-ref takes from another commit. */
export const SERVICE_SOURCES = ['lib', 'services'];
/** With the baselines the benchmarks start beside them. */
export const SOURCES = [...SERVICE_SOURCES, 'bench/bare-koa.ts', 'bench/floor-login.ts'];

function sourceFiles(rel: string, root: string): string[] {
  const abs = path.join(root, rel);
  if (statSync(abs).isFile()) return [rel];
  return readdirSync(abs).flatMap((name) => {
    const child = path.join(rel, name);
    if (statSync(path.join(root, child)).isDirectory()) return sourceFiles(child, root);
    return name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts') ? [child] : [];
  });
}

/**
 * Transpiles the services into `dir` (default BUILD_DIR); returns how many
 * files. `replace` maps a source path to another file to build in its place
 * (bench/ab.ts measures a proposed change that way); `sources`, files and
 * folders from the repository root, replaces the default list; `root`, a
 * tree of the same shape to build instead (another commit's, for bench/ab.ts
 * --b-ref), whose packages are still this checkout's node_modules.
 */
export function buildServices(dir = BUILD_DIR, replace: Record<string, string> = {}, sources: readonly string[] = SOURCES, root = ROOT): number {
  const files = sources.flatMap((rel) => sourceFiles(rel, root));
  for (const rel of files) {
    const source = replace[rel] ?? path.join(root, rel);
    const { outputText } = ts.transpileModule(readFileSync(source, 'utf8'), {
      fileName: rel,
      compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, esModuleInterop: true, isolatedModules: true },
    });
    const out = path.join(dir, rel.replace(/\.ts$/, '.js'));
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, outputText);
  }
  // Node needs to know these .js files are ES modules; lib/version.ts reads name and version here.
  const { name, version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version, type: 'module' }) + '\n');
  // lib/reflection.ts reads proto/ beside lib/, as in the image.
  cpSync(path.join(root, 'proto'), path.join(dir, 'proto'), { recursive: true });
  return files.length;
}

/** The built counterpart of a source entry point, e.g. services/login/index.ts → dist/bench/services/login/index.js. */
export function builtEntry(entry: string, dir = BUILD_DIR): string {
  return path.join(dir, entry.replace(/\.ts$/, '.js'));
}
