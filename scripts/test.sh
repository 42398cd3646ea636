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
compat_state="" ferret_state=""
stop_servers() {
  [ -n "$compat_state" ] && { bash scripts/compat-mongo.sh stop --state "$compat_state" >/dev/null 2>&1 || true; }
  [ -n "$ferret_state" ] && { bash scripts/compat-ferretdb.sh stop --state "$ferret_state" >/dev/null 2>&1 || true; }
  return 0
}
trap stop_servers EXIT
trap 'exit 130' INT TERM
if [ -z "${MONGODB_URL:-}" ] && [ "$mongo_files" = 1 ] && bash scripts/compat-mongo.sh installed; then
  compat_state="$(mktemp -u "${TMPDIR:-/tmp}/compat-mongo-state.XXXXXX")"
  if compat_line="$(bash scripts/compat-mongo.sh start --state "$compat_state")"; then
    export MONGODB_URL="${compat_line#MONGODB_URL=}"
  else
    echo "test.sh: the MongoDB-compatible server did not start; the MongoDB suites will skip" >&2
  fi
fi
# The second MongoDB-compatible server, FerretDB, when built (bash scripts/compat-ferretdb.sh install,
# which needs Go; .ci/run builds it): the store contract suites run on it too, or skip and say why.
if [ -z "${FERRETDB_URL:-}" ] && [ "$mongo_files" = 1 ] && bash scripts/compat-ferretdb.sh installed; then
  ferret_state="$(mktemp -u "${TMPDIR:-/tmp}/compat-ferretdb-state.XXXXXX")"
  if ferret_line="$(bash scripts/compat-ferretdb.sh start --state "$ferret_state")"; then
    export FERRETDB_URL="${ferret_line#FERRETDB_URL=}"
  else
    echo "test.sh: FerretDB did not start; its store suites will skip" >&2
  fi
fi
# ---- end MongoDB suites ----

# ---- container engine ----
# The engine that answers (a user's Docker, or the one `bash scripts/engine.sh start` runs)
# serves testcontainers (MongoDB suites) and the compose tests; without one they skip
# and say why.
if [ -z "${DOCKER_HOST:-}" ]; then
  if engine_lines="$(bash scripts/engine.sh env 2>"${TMPDIR:-/tmp}/engine-env.$$")"; then
    set -a
    eval "$engine_lines"
    set +a
    echo "test.sh: container engine at ${DOCKER_HOST:-the default socket}" >&2
  else
    echo "test.sh: the container tests will skip: $(cat "${TMPDIR:-/tmp}/engine-env.$$")" >&2
  fi
  rm -f "${TMPDIR:-/tmp}/engine-env.$$"
fi

# docker compose end to end runs first and alone (it builds images and starts a whole stack);
# its own runner prints "containers: N/M checks pass".
# scripts/test-containers.sh runs every compose stack (single, replicated, Firefox Sync).
rest=()
containers_rc=0
containers_ran=0
for f in "${files[@]}"; do
  case "$f" in
    tests/containers.test.ts | */tests/containers.test.ts | tests/containers-scale.test.ts | */tests/containers-scale.test.ts | tests/containers-firefox-sync.test.ts | */tests/containers-firefox-sync.test.ts)
      if [ "$containers_ran" = 0 ]; then containers_ran=1; bash scripts/test-containers.sh || containers_rc=$?; fi ;;
    *) rest+=("$f") ;;
  esac
done
# ---- end container engine ----

rc=0
if [ "${#rest[@]}" -gt 0 ]; then node --import tsx --test --test-concurrency="${TEST_CONCURRENCY:-2}" "${rest[@]}" || rc=$?; fi
[ "$rc" = 0 ] || exit "$rc"

# ---- outside clients (Python) ----
# A full run (no file arguments) ends with the Python suite against the embedded
# stack (scripts/python-tests.sh); the node run above already stopped the script
# if it failed, so the exit status fails when either does. SKIP_PYTHON_TESTS=1 opts out.
if [ "$#" -eq 0 ] && [ -z "${SKIP_PYTHON_TESTS:-}" ]; then
  bash scripts/python-tests.sh
elif [ "$#" -eq 0 ]; then
  echo "test.sh: SKIP_PYTHON_TESTS is set; the Python outside-clients suite did not run" >&2
fi
# ---- end outside clients ----

# The container checks ran first; their result counts too.
exit "$containers_rc"
