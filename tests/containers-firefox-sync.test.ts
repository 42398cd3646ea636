// The Firefox Sync stack, end to end (DESIGN §13.3): docker-compose.yml with
// docker-compose.firefox-sync.yml on a real container engine, as a self-hoster runs it, with a
// .env holding only the public URLs (and host ports) and the storage node's image. On top, only
// the test overrides (tests/containers/compose.test.yml, compose.firefox-sync.test.yml): the
// local stand-in images, and Mozilla accounts' stand-in on the compose network (discovery and a
// JWKS over HTTPS, with a test CA login trusts).
//
// The storage node runs as STORAGE_NODE_IMAGE in each variant:
//  - the stand-in (always): a node that checks tokens as syncstorage-rs does, our gateway with
//    TOKEN_SECRETS=master and the node's secret as its only master secret, in front of the
//    demo application (scripts/standin-syncstorage.Dockerfile);
//  - Mozilla's real syncserver (when SYNCSERVER_BIN names the binary, ../shared/tools/syncstorage-rs),
//    in an image laid out like Mozilla's (scripts/syncserver.Dockerfile): Firefox's requests
//    stored and read back by Mozilla's own code.
// Firefox's flow: a Bearer login with a token shaped as Mozilla accounts makes it (X-KeyID, no
// X-Client-State), then Hawk requests on the node the answer names. `npm run test:containers`
// runs this file after the other two; without an engine every check is skipped with the reason.
// KEEP_STACK=1 leaves each stack up.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { hawkHeader } from '../lib/hawk.js';
import { buildImages, ComposeProject, composeChecks, findEngine, freePort, ROOT } from './support/compose.js';
import { accessToken, keyIdHeader, mozillaKid, signingKey, type SigningKey } from './support/oauth.js';
import { makePki } from './support/tls.js';

/** Where login finds Mozilla accounts' stand-in on the compose network (its certificate names it). */
const ISSUER = 'https://mozilla-accounts:8443';
const LONG_RUNNING = ['mongo', 'directory', 'nodeassign', 'login', 'storage-db', 'storage-node', 'mozilla-accounts'];

const engine = findEngine();
const skipReason = 'skip' in engine ? engine.skip : '';
const env = 'skip' in engine ? process.env : engine.env;
const syncserverBin = process.env.SYNCSERVER_BIN;
let imagesBuilt: Promise<void> | undefined;
/** Each variant's images (scripts/images.sh), built once for the file. */
const images = () => (imagesBuilt ??= buildImages(env));

before(() => {
  if (skipReason) console.log(`containers-firefox-sync: skipped: ${skipReason}`);
  else if (!syncserverBin) console.log("containers-firefox-sync: Mozilla's real syncserver variant skipped: SYNCSERVER_BIN is not set");
  else if (!existsSync(syncserverBin)) console.log(`containers-firefox-sync: Mozilla's real syncserver variant skipped: SYNCSERVER_BIN=${syncserverBin} does not exist`);
});

interface Variant {
  /** Check names start with it. */
  label: string;
  /** The variable of scripts/images.sh's output naming STORAGE_NODE_IMAGE. */
  imageVariable: string;
  /** Mozilla's real node stores what it is given; the stand-in echoes the request. */
  real: boolean;
}

function firefoxSyncStack(variant: Variant): void {
  const projectDir = mkdtempSync(path.join(tmpdir(), 'compose-firefox-'));
  const project =
    'skip' in engine
      ? undefined
      : new ComposeProject(engine, `tsfirefox${variant.real ? 'real' : 'standin'}${process.pid}`, projectDir, [
          path.join(ROOT, 'docker-compose.yml'),
          path.join(ROOT, 'docker-compose.firefox-sync.yml'),
          path.join(ROOT, 'tests/containers/compose.test.yml'),
          path.join(ROOT, 'tests/containers/compose.firefox-sync.test.yml'),
        ]);
  let stackStarted = false;
  let stackDown = false;
  let loginUrl = '';
  let nodeUrl = '';
  let key: SigningKey;
  /** Everything secret this run saw, to look for in the logs. */
  const secrets: Array<[string, string]> = [];
  const { check: composeCheck, anyFailed } = composeChecks(skipReason, () => stackStarted);
  const check = (name: string, fn: Parameters<typeof composeCheck>[1], first = false) => composeCheck(`${variant.label}: ${name}`, fn, first);
  const compose = (args: string[], timeoutMs?: number) => project!.mustCompose(args, timeoutMs);

  /** Firefox's token request: a Bearer access token from Mozilla accounts, X-KeyID, no X-Client-State. */
  const login = async (sub: string, generation = 1) => {
    const token = await accessToken(key, sub, { iss: ISSUER, 'fxa-generation': generation });
    secrets.push([`access token (${sub})`, token]);
    return fetch(`${loginUrl}/1.0/sync/1.5`, { headers: { Authorization: `Bearer ${token}`, 'X-KeyID': keyIdHeader(generation, '0123456789abcdef0123456789abcdef') } });
  };

  after(async () => {
    if (skipReason || !project) return;
    if (!stackDown && anyFailed()) await project.printErrorLines();
    if (!stackDown && process.env.KEEP_STACK !== '1') await project.compose(['down', '-v', '--remove-orphans'], 180_000);
    rmSync(projectDir, { recursive: true, force: true });
  });

  check(
    'up with .env holding only the public URLs and the storage image: login, the storage node and its MySQL healthy; no gateway, no demo app',
    async () => {
      await images();
      const image = env[variant.imageVariable];
      assert.ok(image, `scripts/images.sh printed ${variant.imageVariable}`);
      const taken = new Set<number>();
      const loginPort = await freePort(taken);
      taken.add(loginPort);
      const nodePort = await freePort(taken);
      loginUrl = `http://localhost:${loginPort}`;
      nodeUrl = `http://localhost:${nodePort}`;

      // Mozilla accounts' stand-in: its key, discovery, JWKS and certificate.
      const fxaDir = path.join(projectDir, 'fxa');
      mkdirSync(fxaDir, { mode: 0o755 });
      const pki = makePki(fxaDir, 'fxa', 'DNS:mozilla-accounts');
      copyFileSync(pki.cert, path.join(fxaDir, 'cert.pem'));
      copyFileSync(pki.key, path.join(fxaDir, 'key.pem'));
      copyFileSync(pki.ca, path.join(fxaDir, 'ca.pem'));
      copyFileSync(path.join(ROOT, 'tests/containers/mozilla-accounts.mjs'), path.join(fxaDir, 'mozilla-accounts.mjs'));
      key = await signingKey('RS256', mozillaKid());
      writeFileSync(path.join(fxaDir, 'jwks.json'), JSON.stringify({ keys: [key.publicJwk] }));
      writeFileSync(
        path.join(fxaDir, 'openid-configuration.json'),
        JSON.stringify({ issuer: ISSUER, jwks_uri: `${ISSUER}/v1/jwks`, authorization_endpoint: `${ISSUER}/authorization`, token_endpoint: `${ISSUER}/v1/token` }),
      );
      // The containers run as uid 1000: the test's files must be readable there (the test key is throwaway).
      for (const f of ['cert.pem', 'key.pem', 'ca.pem', 'mozilla-accounts.mjs', 'jwks.json', 'openid-configuration.json']) chmodSync(path.join(fxaDir, f), 0o644);

      // The user's whole .env: the public URLs (and host ports) and the image.
      writeFileSync(
        path.join(projectDir, '.env'),
        [`NODE_URL=${nodeUrl}`, `STORAGE_NODE_IMAGE=${image}`, `LOGIN_PORT=${loginPort}`, `STORAGE_NODE_PORT=${nodePort}`, '', `TEST_FXA_DIR=${fxaDir}`, ''].join('\n'),
      );

      await compose(['up', '-d', '--no-build'], 300_000);
      stackStarted = true;
      await project!.waitHealthy(LONG_RUNNING, 300_000);
      for (const s of ['node-gateway', 'demo-app']) assert.equal(await project!.containerId(s), '', `${s} is not started`);
      for (const s of ['secrets', 'setup']) {
        const st = await project!.state(s);
        assert.deepEqual([st.Status, st.ExitCode], ['exited', 0], `${s} completed`);
      }
    },
    true,
  );

  check("secrets: the node's SYNC_MASTER_SECRET is what `cli nodes secret sync <NODE_URL>` prints, in a volume only the node mounts", async () => {
    const printed = (await compose(['run', '--rm', '-T', 'cli', 'node', 'dist/cli/main.js', 'nodes', 'secret', 'sync', nodeUrl])).trim().split('\n')[0];
    assert.match(printed, /^[0-9a-f]{128}$/);
    const held = await compose(['exec', '-T', 'storage-node', 'cat', '/storage-node-secrets/sync_master_secret']);
    assert.equal(held, printed);
    const password = await compose(['exec', '-T', 'storage-node', 'cat', '/storage-node-secrets/storage_db_password']);
    assert.match(password, /^[0-9a-f]{32}$/);
    secrets.push(['node secret', printed], ['database password', password]);
    // Which containers mount which volume: the node's secrets the node only, the master secrets never the node.
    const ids = (await project!.docker(['ps', '-q', '--filter', `label=com.docker.compose.project=${project!.name}`])).stdout.trim().split('\n');
    const inspected = await project!.docker(['inspect', '-f', '{{index .Config.Labels "com.docker.compose.service"}} {{range .Mounts}}{{.Name}} {{end}}', ...ids]);
    const mountsByService = new Map(
      inspected.stdout
        .trim()
        .split('\n')
        .map((line) => {
          const [service, ...volumes] = line.trim().split(/\s+/);
          return [service, volumes.map((n) => n.slice(`${project!.name}_`.length))] as const;
        }),
    );
    const mountsOf = (service: string) => mountsByService.get(service) ?? [];
    for (const service of LONG_RUNNING) {
      const mounts = mountsOf(service);
      assert.equal(mounts.includes('storage-node-secrets'), service === 'storage-node', `${service} mounts ${mounts.join(', ')}`);
      if (service === 'storage-node') assert.deepEqual(mounts.filter((m) => /secret/.test(m)), ['storage-node-secrets'], 'the node mounts no other secret');
    }
    assert.ok(mountsOf('login').includes('metrics-hash-secret'), 'login gets METRICS_HASH_SECRET');
  });

  check('setup registered NODE_URL as the only node of sync', async () => {
    const out = await compose(['run', '--rm', '-T', 'cli', 'node', 'dist/cli/main.js', 'nodes', 'list', '--json']);
    const nodes = (JSON.parse(out) as { nodes: Array<{ service: string; url: string }> }).nodes;
    assert.deepEqual(
      nodes.map((n) => [n.service, n.url]),
      [['sync', nodeUrl]],
    );
  });

  check('Bearer login with a token from Mozilla accounts (keys by discovery, over HTTPS): 200, the storage node in api_endpoint', async () => {
    const res = await login('0123456789abcdef0123456789abcdef');
    const body = (await res.json()) as { id: string; key: string; uid: number; api_endpoint: string; hashed_fxa_uid: string };
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.api_endpoint, `${nodeUrl}/1.5/${body.uid}`);
    assert.match(body.hashed_fxa_uid, /^[0-9a-f]{32}$/);
    secrets.push(['token', body.id], ['key', body.key]);
    // A token signed by a key Mozilla accounts never published is refused.
    const stranger = await signingKey('RS256', key.kid);
    const forged = await accessToken(stranger, '0123456789abcdef0123456789abcdef', { iss: ISSUER, 'fxa-generation': 1 });
    const refused = await fetch(`${loginUrl}/1.0/sync/1.5`, { headers: { Authorization: `Bearer ${forged}`, 'X-KeyID': keyIdHeader(1, '0123456789abcdef0123456789abcdef') } });
    assert.equal(refused.status, 401, await refused.text());
  });

  check('Hawk PUT and GET on the storage node with that token; a wrong key is refused', async () => {
    const res = await login(randomBytes(16).toString('hex'));
    const token = (await res.json()) as { id: string; key: string; uid: number; api_endpoint: string };
    assert.equal(res.status, 200, JSON.stringify(token));
    secrets.push(['token (hawk)', token.id], ['key (hawk)', token.key]);
    const hawk = (method: string, url: URL, hawkKey = token.key) => ({ Authorization: hawkHeader({ id: token.id, key: hawkKey, method, url }) });
    const bso = { id: 'compose-check', payload: JSON.stringify({ from: 'the Firefox Sync stack test', n: randomBytes(4).toString('hex') }) };
    const item = new URL(`${token.api_endpoint}/storage/bookmarks/${bso.id}`);
    const put = await fetch(item, { method: 'PUT', headers: { ...hawk('PUT', item), 'Content-Type': 'application/json' }, body: JSON.stringify(bso) });
    const putText = await put.text();
    assert.equal(put.status, 200, putText);
    const got = await fetch(item, { headers: hawk('GET', item) });
    const gotBody = (await got.json()) as Record<string, unknown>;
    assert.equal(got.status, 200, JSON.stringify(gotBody));
    if (variant.real) {
      // Mozilla's node stored it and gives it back.
      assert.deepEqual([gotBody.id, gotBody.payload], [bso.id, bso.payload]);
    } else {
      // The stand-in's application echoes what the node let through, and who it said the caller is.
      assert.deepEqual([String(gotBody.uid), gotBody.method], [String(token.uid), 'GET']);
      const putBody = JSON.parse(putText) as { uid: string; method: string; bodyBytes: number };
      assert.deepEqual([String(putBody.uid), putBody.method, putBody.bodyBytes], [String(token.uid), 'PUT', Buffer.byteLength(JSON.stringify(bso))]);
    }
    const wrongKey = Buffer.from(randomBytes(32)).toString('base64url');
    const refused = await fetch(item, { headers: hawk('GET', item, wrongKey) });
    assert.equal(refused.status, 401, await refused.text());
  });

  // The last check takes the stack down (after the error lines of any failure), so that the next variant runs alone.
  check('docker compose logs contain no secret, token or key', async () => {
    const logs = await compose(['logs', '--no-color']);
    if (anyFailed()) await project!.printErrorLines();
    if (process.env.KEEP_STACK !== '1') {
      stackDown = true;
      await compose(['down', '-v', '--remove-orphans'], 180_000);
    }
    assert.ok(logs.includes('init-secrets'), 'the logs were read');
    assert.ok(secrets.length >= 6, `secrets collected: ${secrets.map(([n]) => n).join(', ')}`);
    for (const [name, value] of secrets) {
      const fragment = value.slice(Math.floor(value.length / 2) - 8, Math.floor(value.length / 2) + 8);
      assert.ok(!logs.includes(value) && !logs.includes(fragment), `${name} appears in the logs`);
    }
  });
}

firefoxSyncStack({ label: 'firefox-sync (storage node stand-in)', imageVariable: 'STORAGE_NODE_STANDIN_IMAGE', real: false });
if (syncserverBin && existsSync(syncserverBin)) firefoxSyncStack({ label: "firefox-sync (Mozilla's syncserver)", imageVariable: 'SYNCSERVER_IMAGE', real: true });
