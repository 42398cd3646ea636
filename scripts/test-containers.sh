#!/usr/bin/env bash
# `npm run test:containers`: docker compose up end to end, the single stack
# (tests/containers.test.ts), the replicated one (tests/containers-scale.test.ts), then the
# Firefox Sync stack (tests/containers-firefox-sync.test.ts; with SYNCSERVER_BIN also on
# Mozilla's real syncserver), on the
# engine that answers (scripts/engine.sh env; start one with `bash scripts/engine.sh start`).
# Ends with "containers: N/M checks pass"; exit 0 only when every check passed, or when no
# engine answers at all (then every check is skipped and the reason is printed).
set -uo pipefail
cd "$(dirname "$0")/.."
export LOG_LEVEL="${LOG_LEVEL:-silent}"
if [ -z "${DOCKER_HOST:-}" ] && lines="$(bash scripts/engine.sh env 2>/dev/null)"; then
  set -a
  eval "$lines"
  set +a
fi
tap="$(mktemp "${TMPDIR:-/tmp}/containers-tap.XXXXXX")"
trap 'rm -f "$tap"' EXIT
node --import tsx --test --test-concurrency=1 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$tap" \
  tests/containers.test.ts tests/containers-scale.test.ts tests/containers-firefox-sync.test.ts
rc=$?
# Top-level results of the TAP stream: one per check.
total=$(grep -cE '^(not )?ok [0-9]+ - ' "$tap")
skipped=$(grep -E '^ok [0-9]+ - ' "$tap" | grep -c '# SKIP')
pass=$(grep -E '^ok [0-9]+ - ' "$tap" | grep -vc '# SKIP')
if [ "$rc" = 0 ] && [ "$total" -gt 0 ] && [ "$skipped" = "$total" ]; then
  echo "containers: 0/$total checks pass (all skipped: $(grep -m1 -oE '# SKIP .*' "$tap" | sed 's/^# SKIP //'))"
  exit 0
fi
echo "containers: $pass/$total checks pass"
[ "$rc" = 0 ] && [ "$total" -gt 0 ] && [ "$pass" = "$total" ]
