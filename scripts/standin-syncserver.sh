#!/bin/sh
# /app/bin/syncserver of the storage node stand-in (scripts/standin-syncstorage.Dockerfile), for
# the container tests only: a node that checks tokens as Mozilla's syncstorage-rs does (the
# token signed with SYNC_MASTER_SECRET, the Hawk MAC over the host and port it is reached at),
# made of our node-gateway with TOKEN_SECRETS=master and SYNC_MASTER_SECRET as its only master
# secret, in front of the demo application. It takes Mozilla's settings: SYNC_HOST, SYNC_PORT,
# SYNC_MASTER_SECRET, SYNC_SYNCSTORAGE__DATABASE_URL (connected to once, as Mozilla's creates
# its tables at start: a wrong password or host stops it), SYNC_TOKENSERVER__ENABLED=false;
# and one of its own, STANDIN_NODE_URL: the public URL the gateway checks MACs against, where
# syncstorage-rs takes the Host header.
set -eu
: "${SYNC_MASTER_SECRET:?SYNC_MASTER_SECRET is required}"
: "${SYNC_SYNCSTORAGE__DATABASE_URL:?SYNC_SYNCSTORAGE__DATABASE_URL is required}"
: "${STANDIN_NODE_URL:?STANDIN_NODE_URL is required (the stand-in checks Hawk MACs against it)}"
if [ "${SYNC_TOKENSERVER__ENABLED:-false}" != false ]; then
  echo "syncserver stand-in: storage only (SYNC_TOKENSERVER__ENABLED=false)" >&2
  exit 2
fi
cd /app
node -e '
  const mysql = require("mysql2/promise");
  const url = process.env.SYNC_SYNCSTORAGE__DATABASE_URL;
  const deadline = Date.now() + 120000;
  (async function attempt() {
    try {
      const c = await mysql.createConnection(url);
      await c.query("SELECT 1");
      await c.end();
      console.error("syncserver stand-in: database reachable");
    } catch (e) {
      if (Date.now() > deadline || e.code === "ER_ACCESS_DENIED_ERROR" || e.code === "ER_DBACCESS_DENIED_ERROR") {
        console.error("syncserver stand-in: database: " + (e.code || e.message));
        process.exit(1);
      }
      setTimeout(attempt, 1000);
    }
  })();
'
DEMO_APP_PORT=8090 BIND_HOST=127.0.0.1 LOG_LEVEL=warn node dist/services/demo-app/index.js &
exec env MASTER_SECRETS="$SYNC_MASTER_SECRET" TOKEN_SECRETS=master NODE_URL="$STANDIN_NODE_URL" \
  UPSTREAM_URL=http://127.0.0.1:8090 GATEWAY_PORT="${SYNC_PORT:-8000}" BIND_HOST="${SYNC_HOST:-127.0.0.1}" \
  node dist/services/node-gateway/index.js
