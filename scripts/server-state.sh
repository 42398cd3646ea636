# Shared by the scripts that run a test server in the background (compat-mongo.sh,
# compat-ferretdb.sh): a state file records its pid, port and data folder (and whether
# the script made that folder), so several instances can run side by side.
# Sourced; expects STATE to name the state file, NAME to name the server in messages, and die.

read_state() {
  pid="" port="" data="" owned=""
  [ -f "$STATE" ] || return 1
  # shellcheck disable=SC1090
  . "$STATE"
}

alive() {
  [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null
}

# Stops the recorded server (TERM, then KILL after 10 s), removes a data folder the script
# made, and the state file. Nothing recorded: says so and succeeds.
stop_recorded() {
  if ! read_state; then
    echo "$NAME: not running (no $STATE)" >&2
    return 0
  fi
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do
      alive "$pid" || break
      sleep 0.1
    done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
  fi
  [ "$owned" = 1 ] && [ -n "$data" ] && rm -rf "$data"
  rm -f "$STATE"
}

# `stop [--state FILE]`: the scripts' stop command.
cmd_stop() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --state) STATE="${2:?--state needs a value}"; shift 2 ;;
      *) die "stop: unknown option $1" ;;
    esac
  done
  stop_recorded
}
