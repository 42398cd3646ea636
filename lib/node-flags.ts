// Node flags the services run with, wherever they run: docker-compose.yml's
// commands, `npm start`'s processes (scripts/stack-part.ts) and the benchmarks.

/**
 * The node flags production starts these services with (their commands in
 * docker-compose.yml). V8 grows the young generation to 2 × 16 MB under load;
 * capped at 2 × 4 MB, login's peak RSS under the login benchmark's load is
 * 166–168 → 141–145 MB (the directory's on MongoDB ~117–150 → 105 MB) for
 * ~5–7 % more login CPU per request (more scavenges); 2 × 2 MB costs ~10–14 %
 * for 135–138 MB. The old generation capped at 128 MB: V8 then collects it
 * before letting it grow. In A/B runs (bench/ab.ts --login-flags-b) login's
 * peak RSS went 144–147 → 99–100 MB for +4 % and +17 % login CPU in two runs
 * against no cap (with 96 MB; 128 MB measured the same RSS and 3 % less CPU
 * than 96). Without it login's peak had reached 150.1 MB, and the directory's
 * on MongoDB 150.8 (93 MB with it). Live heap data is far less (login's
 * certificate cache full is a few MB), so the cap costs collections, not
 * failures. The cache's imported keys live outside the heap and this cap: the
 * cache's own memory bound (CERTIFICATE_CACHE_BYTES, assertion.ts) holds them.
 * Set on the command line: V8 sizes its heap before any JavaScript runs, so
 * v8.setFlagsFromString() in the entry point has no effect on it.
 */
export const SERVICE_NODE_ARGS = {
  login: ['--max-semi-space-size=4', '--max-old-space-size=128'],
  directory: ['--max-semi-space-size=4', '--max-old-space-size=128'],
} as const;
