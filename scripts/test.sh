#!/usr/bin/env bash
# Runs every test file (node's runner; Node 20 does not expand globs itself).
set -euo pipefail
cd "$(dirname "$0")/.."
export LOG_LEVEL="${LOG_LEVEL:-silent}"
mapfile -t files < <(find lib services tests sdk cli -name '*.test.ts' -not -path '*/node_modules/*' -not -path '*/.stryker-tmp/*' 2>/dev/null | sort)
if [ "$#" -gt 0 ]; then files=("$@"); fi

# ---- MongoDB suites ----
# When no MONGODB_URL is given and the MongoDB-compatible server is installed
# (bash scripts/compat-mongo.sh install), run one for the MongoDB suites and
# stop it at exit; otherwise those suites skip and print why.
mongo_files=0
for f in "${files[@]}"; do case "$f" in *mongo*) mongo_files=1 ;; esac; done
# A fresh machine gets the server on first run (Java + Maven, ~30 s); SKIP_MONGO_INSTALL=1 opts out.
if [ -z "${MONGODB_URL:-}" ] && [ "$mongo_files" = 1 ] && [ -z "${SKIP_MONGO_INSTALL:-}" ] && ! bash scripts/compat-mongo.sh installed; then
  bash scripts/compat-mongo.sh install >&2 || echo "test.sh: could not install the MongoDB-compatible server; the MongoDB suites will skip" >&2
fi
if [ -z "${MONGODB_URL:-}" ] && [ "$mongo_files" = 1 ] && bash scripts/compat-mongo.sh installed; then
  compat_state="$(mktemp -u "${TMPDIR:-/tmp}/compat-mongo-state.XXXXXX")"
  trap 'bash scripts/compat-mongo.sh stop --state "$compat_state" >/dev/null 2>&1 || true' EXIT
  trap 'exit 130' INT TERM
  if compat_line="$(bash scripts/compat-mongo.sh start --state "$compat_state")"; then
    export MONGODB_URL="${compat_line#MONGODB_URL=}"
  else
    echo "test.sh: the MongoDB-compatible server did not start; the MongoDB suites will skip" >&2
  fi
fi
# ---- end MongoDB suites ----

node --import tsx --test --test-concurrency="${TEST_CONCURRENCY:-2}" "${files[@]}"
