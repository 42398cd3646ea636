// The benchmarks' build (bench/build.ts buildServices, bench/ab.ts buildVariant): an A/B run is only
// worth its figures if B is built from what it names, another tree or another commit, and not from
// this checkout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildVariant } from '../bench/ab.js';
import { buildServices, ROOT } from '../bench/build.js';

function tempDir(t: { after(fn: () => void): void }, prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('buildServices with a root builds that tree: its sources, its proto/, and replacements within it', (t) => {
  const root = tempDir(t, 'bench-build-root-');
  const files: Record<string, string> = {
    'lib/a.ts': 'export const a: number = 1;\n',
    'lib/a.test.ts': 'throw new Error("tests are not built");\n',
    'services/s/index.ts': 'export const s: string = "from the other tree";\n',
    'bench/bare-koa.ts': 'export {};\n',
    'proto/x.proto': 'syntax = "proto3";\n',
  };
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    writeFileSync(path.join(root, rel), text);
  }
  const replacement = path.join(root, 'replacement.ts');
  writeFileSync(replacement, 'export const a = 2;\n');
  const out = tempDir(t, 'bench-build-out-');
  assert.equal(buildServices(out, { 'lib/a.ts': replacement }, ['lib', 'services', 'bench/bare-koa.ts'], root), 3);
  assert.equal(readFileSync(path.join(out, 'services/s/index.js'), 'utf8'), 'export const s = "from the other tree";\n');
  assert.equal(readFileSync(path.join(out, 'lib/a.js'), 'utf8'), 'export const a = 2;\n');
  assert.equal(readFileSync(path.join(out, 'proto/x.proto'), 'utf8'), files['proto/x.proto']);
  assert.equal(JSON.parse(readFileSync(path.join(out, 'package.json'), 'utf8')).type, 'module');
});

test("buildVariant with a ref builds that commit's tree, not the working tree", (t) => {
  const git = (args: string[], input?: string, env: NodeJS.ProcessEnv = {}) =>
    execFileSync('git', ['-C', ROOT, ...args], { encoding: 'utf8', input, env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] }).trim();
  try {
    git(['rev-parse', 'HEAD']);
  } catch {
    t.skip('this checkout is not a git repository (bench/ab.ts --b-ref needs one)');
    return;
  }
  // A commit that differs from HEAD in one file, made without touching the working tree or the
  // index (a throwaway index file; the objects stay unreferenced, for git gc).
  const index = path.join(tempDir(t, 'bench-build-index-'), 'index');
  const marker = `built from commit ${process.pid} ${Date.now()}`;
  const blob = git(['hash-object', '-w', '--stdin'], `export const marker = ${JSON.stringify(marker)};\n`);
  git(['read-tree', 'HEAD'], undefined, { GIT_INDEX_FILE: index });
  git(['update-index', '--add', '--cacheinfo', `100644,${blob},lib/token.ts`], undefined, { GIT_INDEX_FILE: index });
  // Older commits lack today's bench/ baselines: B takes the services alone.
  git(['update-index', '--force-remove', 'bench/floor-login.ts', 'bench/bare-koa.ts'], undefined, { GIT_INDEX_FILE: index });
  const tree = git(['write-tree'], undefined, { GIT_INDEX_FILE: index });
  const who = { GIT_AUTHOR_NAME: 'bench test', GIT_AUTHOR_EMAIL: 'bench@test.invalid', GIT_COMMITTER_NAME: 'bench test', GIT_COMMITTER_EMAIL: 'bench@test.invalid' };
  const commit = git(['commit-tree', tree, '-p', 'HEAD', '-m', 'bench-build.test: a throwaway commit'], undefined, who);

  const out = tempDir(t, 'bench-build-ref-');
  buildVariant(out, {}, commit);
  assert.equal(readFileSync(path.join(out, 'lib/token.js'), 'utf8'), `export const marker = ${JSON.stringify(marker)};\n`);
  // Every other file is the commit's (HEAD's) too.
  assert.equal(readFileSync(path.join(out, 'proto/directory.proto'), 'utf8'), git(['show', 'HEAD:proto/directory.proto']) + '\n');
  assert.ok(readFileSync(path.join(out, 'services/login/index.js'), 'utf8').length > 0);
  assert.throws(() => buildVariant(tempDir(t, 'bench-build-bad-'), {}, 'no-such-ref-anywhere'), /git/);
});
