# One image for every service; the command picks which one (see docker-compose.yml):
#   node dist/services/{directory,nodeassign,login,node-gateway,demo-app}/index.js
#   node dist/cli/main.js <command>          (operator CLI, health probes, setup)
# Built for whatever platform builds it (amd64, arm64 …): nothing here downloads
# an architecture-specific file (better-sqlite3 compiles from source in the
# build stage; the rest comes from the npm registry).
# Plain Dockerfile syntax, no "# syntax=" line and no BuildKit-only features
# (cache mounts): the classic builder builds it too, offline from any image registry.
# RUN steps need the network (apt-get, npm ci): on an engine without a bridge, build
# with --network host (scripts/images.sh does; compose: build.network).

ARG NODE_IMAGE=node:20-bookworm-slim

# ---- build: TypeScript → JavaScript (tsc, tsconfig.build.json → dist/), then production deps only ----
FROM ${NODE_IMAGE} AS build
# Toolchain for better-sqlite3's native addon; it stays in this stage.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
# Compile better-sqlite3 here rather than fetch a prebuilt binary from GitHub (one per
# architecture), against the headers this node image ships (no header download).
ENV npm_config_build_from_source=true \
    npm_config_nodedir=/usr/local
WORKDIR /app
COPY package.json package-lock.json ./
# BUILD_CA_CERTS: PEM certificates to trust for npm in this stage only, for builds behind a
# TLS-intercepting proxy (scripts/images.sh passes the machine's own additions). A failed
# install must fail the build: npm can exit 0 after "Exit handler never called", hence the
# load of the native addon at the end.
ARG BUILD_CA_CERTS=""
RUN if [ -n "$BUILD_CA_CERTS" ]; then printf '%s\n' "$BUILD_CA_CERTS" >/tmp/build-ca.pem; export NODE_EXTRA_CA_CERTS=/tmp/build-ca.pem; fi \
 && npm ci --no-audit --no-fund \
 && node -e "require('better-sqlite3')(':memory:').close()" \
 && rm -f /tmp/build-ca.pem
# .dockerignore lets in only what the build needs (no tests, data or node_modules).
COPY . .
# lib/version.ts reads ../package.json relative to itself: dist/package.json in the build output;
# lib/reflection.ts reads ../proto/ the same way.
RUN npx tsc -p tsconfig.build.json \
 && cp package.json dist/package.json \
 && cp -r proto dist/proto \
 && npm prune --omit=dev --no-audit --no-fund

# ---- runtime: node, production node_modules and dist/, as the unprivileged "node" user (uid 1000) ----
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    DATA_DIR=/data \
    BIND_HOST=0.0.0.0
WORKDIR /app
# Owned by root and read-only to the service user: the code cannot be changed at run time.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Mount points for named volumes: a new volume takes this ownership, so "node" can write there.
# (The secret volumes are filled by the `secrets` one-shot, docker-compose*.yml.)
RUN mkdir -p /data /idp /oauth-jwks /secrets /master-secrets /internal-secret /metrics-hash-secret /node-secrets \
      /storage-node-secrets /storage-db-secret \
 && chown 1000:1000 /data /idp /oauth-jwks /secrets /master-secrets /internal-secret /metrics-hash-secret /node-secrets \
      /storage-node-secrets /storage-db-secret
# Numeric, so runtimes that check "non-root" without reading /etc/passwd (Kubernetes runAsNonRoot) accept it.
USER 1000:1000
EXPOSE 8000 8080 8090 50051 50052
CMD ["node", "dist/cli/main.js", "--help"]
