#!/usr/bin/env bash
# A MongoDB-compatible server for tests and CI, where neither MongoDB nor a
# container engine exists: mongo-java-server (H2 file backend) from Maven
# Central, started by the small launcher in tools/compat-mongo/.
#
#   scripts/compat-mongo.sh install     fetch the jars and compile the launcher into .tools/ (idempotent)
#   scripts/compat-mongo.sh installed   exit 0 when installed and up to date
#   scripts/compat-mongo.sh start [--port N] [--data DIR] [--state FILE]
#                                       start in the background (port 0 = a free one, data in a new
#                                       temp folder unless --data), wait until it answers, print
#                                       MONGODB_URL=mongodb://127.0.0.1:PORT/
#   scripts/compat-mongo.sh stop [--state FILE]
#                                       stop it; removes the data folder when start created it
#
# --state (or COMPAT_MONGO_STATE) names the file recording pid, port and data
# folder, so several instances can run side by side.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SRC="$ROOT/tools/compat-mongo"
TOOLS="$ROOT/.tools/compat-mongo"
LIB="$TOOLS/lib"
CLASSES="$TOOLS/classes"
STAMP="$TOOLS/installed"
STATE="${COMPAT_MONGO_STATE:-$TOOLS/run/server.state}"
# Small heap and quick start: it shares two cores with the test suite.
JAVA_OPTS=(-Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto)

NAME=compat-mongo
# shellcheck source=scripts/server-state.sh
. "$ROOT/scripts/server-state.sh"

die() {
  echo "compat-mongo: $*" >&2
  exit 1
}

source_hash() {
  cat "$SRC/pom.xml" "$SRC/CompatMongo.java" | sha256sum | cut -d' ' -f1
}

is_installed() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(source_hash)" ] && [ -f "$CLASSES/CompatMongo.class" ]
}

cmd_install() {
  if is_installed; then
    echo "compat-mongo: already installed in ${TOOLS#"$ROOT"/}"
    return 0
  fi
  command -v java >/dev/null || die "java (17 or later) is required"
  command -v javac >/dev/null || die "javac (JDK 17 or later) is required"
  command -v mvn >/dev/null || die "mvn is required to fetch the jars from Maven Central"
  local started=$SECONDS
  rm -rf "$LIB" "$CLASSES" "$STAMP"
  mkdir -p "$LIB" "$CLASSES"
  mvn -B -q -Dstyle.color=never -f "$SRC/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$LIB" -DincludeScope=runtime >&2
  javac -nowarn -d "$CLASSES" -cp "$LIB/*" "$SRC/CompatMongo.java" >&2
  source_hash >"$STAMP"
  echo "compat-mongo: installed in ${TOOLS#"$ROOT"/} ($((SECONDS - started)) s)"
}

cmd_start() {
  local want_port=0 data_dir="" owned=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --port) want_port="${2:?--port needs a value}"; shift 2 ;;
      --data) data_dir="${2:?--data needs a value}"; shift 2 ;;
      --state) STATE="${2:?--state needs a value}"; shift 2 ;;
      *) die "start: unknown option $1" ;;
    esac
  done
  is_installed || die "not installed; run: bash scripts/compat-mongo.sh install"
  if read_state && alive "$pid"; then
    die "already running (pid $pid, port $port; state $STATE)"
  fi
  if [ -z "$data_dir" ]; then
    data_dir="$(mktemp -d "${TMPDIR:-/tmp}/compat-mongo.XXXXXX")"
    owned=1
  fi
  mkdir -p "$data_dir" "$(dirname "$STATE")"
  local log="$data_dir/server.log"
  # Created here: the background job's own redirection may come after the first read below.
  : >"$log"
  java "${JAVA_OPTS[@]}" -cp "$LIB/*:$CLASSES" CompatMongo 127.0.0.1 "$want_port" "$data_dir/compat-mongo.mv" \
    </dev/null >"$log" 2>&1 &
  local new_pid=$!
  local bound="" i
  for ((i = 0; i < 300; i++)); do
    bound="$(sed -n 's/^listening \([0-9][0-9]*\)$/\1/p' "$log" | head -n1 || true)"
    [ -n "$bound" ] && break
    if ! alive "$new_pid"; then
      cat "$log" >&2
      [ "$owned" = 1 ] && rm -rf "$data_dir"
      die "the server exited at start"
    fi
    sleep 0.1
  done
  if [ -z "$bound" ] || ! (exec 3<>"/dev/tcp/127.0.0.1/$bound") 2>/dev/null; then
    kill "$new_pid" 2>/dev/null || true
    [ "$owned" = 1 ] && rm -rf "$data_dir"
    die "the server did not answer within 30 s"
  fi
  printf 'pid=%s\nport=%s\ndata=%q\nowned=%s\n' "$new_pid" "$bound" "$data_dir" "$owned" >"$STATE"
  echo "MONGODB_URL=mongodb://127.0.0.1:$bound/"
}

case "${1:-}" in
  install) cmd_install ;;
  installed) is_installed ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  *) die "usage: $0 install|installed|start [--port N] [--data DIR] [--state FILE]|stop [--state FILE]" ;;
esac
