// A first login racing the account's deletion (DESIGN §10: no token is ever
// minted for a uid that is not the account's live uid). Real login, directory
// and nodeassign over gRPC, on SQLite and on MongoDB; the login reaches
// nodeassign through a TCP relay that holds each request back, so the
// account-events webhook lands between the login's directory write and its
// node assignment, the window in which a retired record once got a node as uid 0.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { call, grpcClient } from '../lib/grpc.js';
import { DirectoryClient } from '../lib/gen/directory.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { httpRequest, type HttpResponse } from '../services/login/testkit.js';
import type { RunningLogin } from '../services/login/server.js';
import { System } from './login.suite.js';
import { envMongo, freshDatabase } from './support/mongo.js';
import { accessToken, keyIdHeader, signingKey, signJwt, writeJwks, type SigningKey } from './support/oauth.js';
import { serveTcp, TEST_AUTH } from './support/services.js';

const ISSUER = 'https://accounts.test.example';
const WEBHOOK_AUDIENCE = 'https://token.test.example/webhook';
const NODE = 'https://sync-1.test.example';
const DELETE_USER = 'https://schemas.accounts.firefox.com/event/delete-user';
/** How long the relay holds each chunk on its way to nodeassign: wide enough for the webhook to land. */
const NODEASSIGN_DELAY_MS = 150;
const ROUNDS = 12;
const rpcOpts = { deadlineMs: 5000, retryAfter: 1 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A TCP relay to `port` that delays what the client sends by `delayMs` (order kept); replies pass at once. */
function delayingRelay(port: number, delayMs: number): Promise<{ port: number; close(): Promise<void> }> {
  return serveTcp((client, track) => {
    const upstream = net.connect(port, '127.0.0.1');
    track(client);
    track(upstream);
    client.on('data', (chunk) => setTimeout(() => upstream.write(chunk), delayMs));
    upstream.on('data', (chunk) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
}

function raceSuite(name: string, storeUrl: () => string | null, skipReason: () => string): void {
  describe(`a first login racing delete-user (${name})`, () => {
    let dir = '';
    let sys: System | null = null;
    let login: RunningLogin;
    let relay: Awaited<ReturnType<typeof delayingRelay>>;
    let oauth: SigningKey;
    let hook: SigningKey;

    before(async () => {
      const url = storeUrl();
      if (url === null) return;
      dir = mkdtempSync(path.join(tmpdir(), 'races-'));
      [oauth, hook] = await Promise.all([signingKey('RS256', 'at-1'), signingKey('RS256', 'hook-1')]);
      sys = new System(url === 'sqlite' ? `sqlite:${path.join(dir, 'tokenserver.db')}` : url);
      await sys.start();
      relay = await delayingRelay(sys.nodeAssignPort, NODEASSIGN_DELAY_MS);
      login = await sys.startLogin({
        OAUTH_JWKS: writeJwks(dir, 'oauth.json', [oauth]),
        OAUTH_ISSUER: ISSUER,
        METRICS_HASH_SECRET: 'metrics-hash-secret-for-tests',
        WEBHOOK_JWKS: writeJwks(dir, 'webhook.json', [hook]),
        WEBHOOK_AUDIENCE,
        NODEASSIGN_ADDR: `127.0.0.1:${relay.port}`,
        GRPC_DEADLINE_MS: '2000',
      });
    });

    after(async () => {
      await sys?.close();
      await relay?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    async function firstLogin(sub: string): Promise<HttpResponse> {
      const token = await accessToken(oauth, sub, { iss: ISSUER });
      return httpRequest(`${login.url}/1.0/sync/1.5`, { headers: { Authorization: `Bearer ${token}`, 'X-KeyID': keyIdHeader(1000, 'aaaa') } });
    }

    async function deleteUser(sub: string): Promise<HttpResponse> {
      const now = Math.floor(Date.now() / 1000);
      const token = await signJwt(hook, { iss: ISSUER, aud: WEBHOOK_AUDIENCE, sub, iat: now, exp: now + 60, jti: randomBytes(12).toString('hex'), events: { [DELETE_USER]: {} } });
      return httpRequest(`${login.url}/1.0/webhooks/fxa/events`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: '{}' });
    }

    test('no login answers a uid that is not live; each account logs in afterwards with a uid of its own; no node slot leaks', async (t) => {
      if (!sys) return t.skip(skipReason());
      const subs = Array.from({ length: ROUNDS }, () => randomBytes(16).toString('hex'));
      const outcomes = await Promise.all(
        subs.map(async (sub, i) => {
          const pending = firstLogin(sub);
          // 0 to 33 ms apart: before, during and after the login's directory write.
          await sleep(i * 3);
          const [res, hookRes] = await Promise.all([pending, deleteUser(sub)]);
          assert.equal(hookRes.status, 200, hookRes.text);
          return res;
        }),
      );
      for (const res of outcomes) {
        if (res.status === 200) {
          assert.ok(res.json.uid > 0, `a token for uid ${res.json.uid}: ${res.text}`);
          assert.doesNotMatch(res.json.api_endpoint, /\/1\.5\/0$/);
        } else {
          // Lost the race to the deletion: try again later, never a 500.
          assert.equal(res.status, 503, res.text);
          assert.match(res.header('retry-after') ?? '', /^\d+$/);
        }
      }

      const after = await Promise.all(subs.map(firstLogin));
      const uids = after.map((res) => {
        assert.equal(res.status, 200, res.text);
        return res.json.uid as number;
      });
      assert.ok(uids.every((u) => u > 0));
      assert.equal(new Set(uids).size, uids.length, 'every account has a uid of its own');

      // Every slot is either a live user's on the node or was given back.
      const directory = grpcClient(DirectoryClient, `127.0.0.1:${sys.directoryPort}`, TEST_AUTH);
      const nodeassign = grpcClient(NodeAssignClient, `127.0.0.1:${sys.nodeAssignPort}`, TEST_AUTH);
      try {
        const { counts } = await call(directory, directory.countUsers, { service: 'sync' }, rpcOpts);
        const live = counts.find((c) => c.node === NODE)?.live ?? 0;
        const { nodes } = await call(nodeassign, nodeassign.listNodes, { service: 'sync' }, rpcOpts);
        assert.equal(nodes.find((n) => n.url === NODE)!.currentLoad, live, 'node load = live users on it');
        assert.equal(live, ROUNDS);
        for (const sub of subs) {
          const { user } = await call(directory, directory.getUser, { service: 'sync', email: `${sub}@api.accounts.firefox.com` }, rpcOpts);
          assert.ok(user!.uid > 0 && user!.node === NODE, `live record for ${sub}`);
          assert.ok(user!.replaced.every((r) => r.uid > 0), 'no uid 0 left for clean-up');
        }
      } finally {
        directory.close();
        nodeassign.close();
      }
    });
  });
}

const mongo = envMongo();
after(() => mongo.stop());
raceSuite('SQLite', () => 'sqlite', () => '');
raceSuite('MongoDB', () => (mongo.url ? freshDatabase(mongo, 'races') : null), () => mongo.skipReason);
