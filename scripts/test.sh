#!/usr/bin/env bash
# Runs every test file (node's runner; Node 20 does not expand globs itself).
set -euo pipefail
cd "$(dirname "$0")/.."
export LOG_LEVEL="${LOG_LEVEL:-silent}"
mapfile -t files < <(find lib services tests sdk cli -name '*.test.ts' -not -path '*/node_modules/*' 2>/dev/null | sort)
if [ "$#" -gt 0 ]; then files=("$@"); fi
exec node --import tsx --test --test-concurrency="${TEST_CONCURRENCY:-2}" "${files[@]}"
