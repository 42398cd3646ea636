// Node flags the services run with, wherever they run: docker-compose.yml's
// commands, `npm start`'s processes (scripts/stack-part.ts) and the benchmarks.

/**
 * The node flags production starts these services with (their commands in
 * docker-compose.yml). V8 grows the young generation to 2 × 16 MB under load;
 * capped at 2 × 4 MB, login's peak RSS under the login benchmark's load is
 * 166–168 → 141–145 MB (the directory's on MongoDB ~117–150 → 105 MB) for
 * ~5–7 % more login CPU per request (more scavenges); 2 × 2 MB costs ~10–14 %
 * for 135–138 MB. The old generation capped at 96 MB: V8 then collects it
 * before letting it grow, and at ~4700 logins/s peak RSS went 150 → 98 MB
 * (login) and 151 → 93 MB (directory on MongoDB) for no measurable CPU. Both
 * hold far less live data on the heap (login's certificate cache full, 10 000
 * entries, is ~8 MB of heap; its OpenSSL keys, ~69 MB, live outside it). Set on the command line: V8 sizes its heap before any JavaScript
 * runs, so v8.setFlagsFromString() in the entry point has no effect on it.
 */
export const SERVICE_NODE_ARGS = {
  login: ['--max-semi-space-size=4', '--max-old-space-size=96'],
  directory: ['--max-semi-space-size=4', '--max-old-space-size=96'],
} as const;
