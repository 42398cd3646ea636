#!/usr/bin/env bash
# A container engine for the image build, docker compose and testcontainers.
#
#   scripts/engine.sh start    use the engine that answers (a user's Docker), or install
#                              Debian's docker.io if needed and start our own dockerd;
#                              prints DOCKER_HOST=… (and for ours TESTCONTAINERS_HOST_OVERRIDE=…),
#                              for `set -a; eval "$(…)"; set +a`, once it answers
#   scripts/engine.sh env      the same lines for the engine that answers; exit 1 and the
#                              reason on stderr when none does
#   scripts/engine.sh stop     stops the dockerd that `start` started (by its pid); a
#                              user's own engine is never touched
#
# Our dockerd keeps everything (data root, exec root, socket, pid file, log) under
# ENGINE_DIR (default /var/lib/tokenserver-engine as root, else $TMPDIR), so images and
# build caches survive between runs and nothing collides with a user's engine.
# It runs without bridge and iptables (the machine's firewall is left alone): builds use
# `--network host`, and compose's user-defined networks still get DNS for service names.
set -euo pipefail

if [ "$(id -u)" = 0 ]; then DEFAULT_DIR=/var/lib/tokenserver-engine; else DEFAULT_DIR="${TMPDIR:-/tmp}/tokenserver-engine-$(id -u)"; fi
ENGINE_DIR="${ENGINE_DIR:-$DEFAULT_DIR}"
SOCK="$ENGINE_DIR/docker.sock"
PIDFILE="$ENGINE_DIR/dockerd.pid"
LOG="$ENGINE_DIR/dockerd.log"
# The storage driver that worked here first (overlay2, else vfs), kept: a data root belongs to one driver.
DRIVER_FILE="$ENGINE_DIR/storage-driver"
START_WAIT_S="${ENGINE_START_WAIT_S:-60}"

say() { echo "engine: $*" >&2; }
die() { say "$*"; exit 1; }

# The engine a client would use without us: DOCKER_HOST if set, else the default socket.
answers() { timeout 10 docker ${1:+-H "$1"} version --format '{{.Server.Version}}' >/dev/null 2>&1; }

ours_running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

# Our engine runs on this host: its published ports answer on localhost. testcontainers
# would otherwise look for the default bridge's gateway when it finds itself in a container,
# and our engine has no default bridge.
ours_env() {
  echo "DOCKER_HOST=unix://$SOCK"
  echo "TESTCONTAINERS_HOST_OVERRIDE=localhost"
}

cmd_env() {
  command -v docker >/dev/null 2>&1 || die "no docker client installed (apt-get install docker.io, or run scripts/engine.sh start)"
  if ours_running && answers "unix://$SOCK"; then ours_env; return 0; fi
  if answers ""; then echo "DOCKER_HOST=${DOCKER_HOST:-}"; return 0; fi
  die "no container engine answers (DOCKER_HOST=${DOCKER_HOST:-unset}, and none started by scripts/engine.sh under $ENGINE_DIR)"
}

install_engine() {
  command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || die "dockerd is not installed and installing it needs root (apt-get install docker.io)"
  say "installing Debian's docker.io"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >/dev/null
}

# Starts dockerd with one storage driver; returns 0 once it answers, 1 if it died.
launch() {
  local driver="$1" waited=0
  rm -f "$SOCK" "$PIDFILE"
  # setsid: the engine outlives this shell and the job that started it.
  setsid dockerd --storage-driver="$driver" --iptables=false --ip-masq=false --bridge=none \
    --data-root "$ENGINE_DIR/data" --exec-root "$ENGINE_DIR/exec" --pidfile "$PIDFILE" \
    -H "unix://$SOCK" >>"$LOG" 2>&1 </dev/null &
  local pid=$!
  while [ "$waited" -lt "$START_WAIT_S" ]; do
    if answers "unix://$SOCK"; then return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 1
    waited=$((waited + 1))
  done
  kill "$pid" 2>/dev/null || true
  die "dockerd did not answer within ${START_WAIT_S} s (log: $LOG)"
}

cmd_start() {
  if ours_running && answers "unix://$SOCK"; then ours_env; return 0; fi
  if command -v docker >/dev/null 2>&1 && answers ""; then
    say "using the engine that already answers (${DOCKER_HOST:-default socket})"
    echo "DOCKER_HOST=${DOCKER_HOST:-}"
    return 0
  fi
  install_engine
  mkdir -p "$ENGINE_DIR/data" "$ENGINE_DIR/exec"
  # A dockerd of ours that no longer answers: stop it before starting another on the same data root.
  if ours_running; then cmd_stop; fi
  local drivers=(overlay2 vfs)
  if [ -f "$DRIVER_FILE" ]; then drivers=("$(cat "$DRIVER_FILE")"); fi
  for driver in "${drivers[@]}"; do
    if launch "$driver"; then
      echo "$driver" >"$DRIVER_FILE"
      say "dockerd $(dockerd --version | grep -o '[0-9][0-9.]*' | head -1) answers on unix://$SOCK (storage driver $driver; log $LOG)"
      ours_env
      return 0
    fi
    say "dockerd did not start with storage driver $driver (log: $LOG)"
  done
  die "dockerd did not start; see $LOG"
}

cmd_stop() {
  ours_running || { say "no dockerd of ours is running"; rm -f "$PIDFILE"; return 0; }
  local pid waited=0
  pid="$(cat "$PIDFILE")"
  kill -TERM "$pid"
  # dockerd stops its containers (10 s each at most) and its containerd before it exits.
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 60 ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then die "dockerd (pid $pid) did not stop within 60 s"; fi
  say "dockerd (pid $pid) stopped"
}

case "${1:-}" in
  start) cmd_start ;;
  env) cmd_env ;;
  stop) cmd_stop ;;
  *) echo "usage: $0 start|env|stop" >&2; exit 2 ;;
esac
