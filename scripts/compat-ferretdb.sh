#!/usr/bin/env bash
# A second, independent MongoDB-compatible server for the MongoDB store suites:
# FerretDB on its SQLite backend, built from the Go module proxy. Beside
# mongo-java-server (scripts/compat-mongo.sh) it keeps a behaviour one emulator
# gets wrong from hiding a bug.
#
#   scripts/compat-ferretdb.sh install     build the binary into .tools/ferretdb (idempotent; ~3 min cold)
#   scripts/compat-ferretdb.sh installed   exit 0 when the binary of FERRETDB_VERSION is there
#   scripts/compat-ferretdb.sh start [--state FILE]
#                                          start on a free loopback port with data in a new temp
#                                          folder, wait until it answers, print
#                                          FERRETDB_URL=mongodb://127.0.0.1:PORT/
#   scripts/compat-ferretdb.sh stop [--state FILE]
#
# Why the build is by hand: the module ships an empty build/version/version.txt, and a
# binary built from it with `go install` panics at start; so the module is copied out of
# the module cache, the version written into that file, and `go build ./cmd/ferretdb` run.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="${FERRETDB_VERSION:-v1.24.2}"
MODULE="github.com/FerretDB/FerretDB"
TOOLS="$ROOT/.tools/ferretdb"
BIN="$TOOLS/ferretdb-$VERSION"
STATE="${COMPAT_FERRETDB_STATE:-$TOOLS/run/server.state}"

NAME=compat-ferretdb
# shellcheck source=scripts/server-state.sh
. "$ROOT/scripts/server-state.sh"

die() {
  echo "compat-ferretdb: $*" >&2
  exit 1
}

is_installed() {
  [ -x "$BIN" ] && [ "$("$BIN" --version 2>/dev/null | sed -n 's/^version: *//p' | head -n1)" = "$VERSION" ]
}

cmd_install() {
  if is_installed; then
    echo "compat-ferretdb: already installed in ${TOOLS#"$ROOT"/}"
    return 0
  fi
  command -v go >/dev/null || die "go is required to build FerretDB from the Go module proxy"
  local started=$SECONDS dir work
  dir="$(GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [ -n "$dir" ] && [ -d "$dir" ] || die "go mod download $MODULE@$VERSION gave no module folder"
  work="$(mktemp -d "${TMPDIR:-/tmp}/ferretdb-build.XXXXXX")"
  trap 'rm -rf "$work"' RETURN
  cp -r "$dir/." "$work/"
  chmod -R u+w "$work"
  echo "$VERSION" >"$work/build/version/version.txt"
  mkdir -p "$TOOLS"
  (cd "$work" && go build -o "$BIN.tmp" ./cmd/ferretdb) >&2
  mv "$BIN.tmp" "$BIN"
  is_installed || die "the built binary does not report version $VERSION"
  echo "compat-ferretdb: installed in ${TOOLS#"$ROOT"/} ($((SECONDS - started)) s)"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

cmd_start() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --state) STATE="${2:?--state needs a value}"; shift 2 ;;
      *) die "start: unknown option $1" ;;
    esac
  done
  is_installed || die "not installed; run: bash scripts/compat-ferretdb.sh install"
  if read_state && alive "$pid"; then die "already running (pid $pid, port $port; state $STATE)"; fi
  local data_dir log new_pid bound="" i attempt
  data_dir="$(mktemp -d "${TMPDIR:-/tmp}/compat-ferretdb.XXXXXX")"
  mkdir -p "$data_dir/sqlite" "$(dirname "$STATE")"
  log="$data_dir/server.log"
  # A port picked free can be taken before the server binds it: try a few.
  for attempt in 1 2 3; do
    bound="$(free_port)"
    # --debug-addr=- : no fixed-port debug listener, so several instances can run side by side.
    "$BIN" --handler=sqlite --sqlite-url="file:$data_dir/sqlite/" --listen-addr="127.0.0.1:$bound" \
      --state-dir="$data_dir" --debug-addr=- --telemetry=disable --log-level=warn \
      </dev/null >"$log" 2>&1 &
    new_pid=$!
    for ((i = 0; i < 300; i++)); do
      alive "$new_pid" || break
      if (exec 3<>"/dev/tcp/127.0.0.1/$bound") 2>/dev/null; then
        printf 'pid=%s\nport=%s\ndata=%q\nowned=1\n' "$new_pid" "$bound" "$data_dir" >"$STATE"
        echo "FERRETDB_URL=mongodb://127.0.0.1:$bound/"
        return 0
      fi
      sleep 0.1
    done
    kill "$new_pid" 2>/dev/null || true
  done
  cat "$log" >&2
  rm -rf "$data_dir"
  die "the server did not answer"
}

case "${1:-}" in
  install) cmd_install ;;
  installed) is_installed ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  *) die "usage: $0 install|installed|start [--state FILE]|stop [--state FILE]" ;;
esac
