// bench/floor.ts compares login with a floor: a Koa server doing only what no Bearer login can
// skip. A floor that skipped the signature check, or minted no real token, would flatter login's
// gap; these tests hold it to its work, over real HTTP, and check the profile arithmetic.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { startService, stopAll, type Service } from '../bench/proc.js';
import { selfMicrosByArea, type CpuProfile } from '../bench/profile.js';
import { parseToken } from '../lib/token.js';
import { hashedAccountId } from '../services/login/rules.js';
import { httpRequest } from '../services/login/testkit.js';
import { compactJws, keyIdHeader } from './support/oauth.js';
import { tempStoreUrl } from './support/services.js';

const KID = 'floor-test-key';
const METRICS_KEY = 'floor-test-metrics-key';
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const other = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...publicKey.export({ format: 'jwk' }), kid: KID, alg: 'RS256' };

function accessToken(sub: string, o: { key?: KeyObject; alg?: string; exp?: number } = {}): string {
  const claims = { sub, exp: o.exp ?? Math.floor(Date.now() / 1000) + 300, 'fxa-generation': 1_700_000_000_000 };
  return compactJws({ alg: o.alg ?? 'RS256', typ: 'at+JWT', kid: KID }, claims, (input) => sign('sha256', input, o.key ?? privateKey));
}

function login(port: number, token: string) {
  return httpRequest(`http://127.0.0.1:${port}/1.0/sync/1.5`, { headers: { authorization: `Bearer ${token}`, 'x-keyid': keyIdHeader(1_700_000_000_000, '0123456789abcdef0123456789abcdef') } });
}

const startFloor = (env: Record<string, string> = {}): Promise<Service> =>
  startService('floor', 'bench/floor-login.ts', { FLOOR_JWK: JSON.stringify(jwk), METRICS_HASH_SECRET: METRICS_KEY, ...env }, /listening/, { fromSource: true });

test('the floor mints a real token for a good access token, and refuses a bad signature, another alg and an expired token', async () => {
  const floor = await startFloor();
  try {
    const ok = await login(floor.port, accessToken('bearer7'));
    assert.equal(ok.status, 200, ok.text);
    const body = JSON.parse(ok.text) as { id: string; key: string; uid: number; hashed_fxa_uid: string; api_endpoint: string };
    // Without a directory the uid is the account's index + 1.
    assert.equal(body.uid, 8);
    assert.equal(body.api_endpoint, 'http://bench-node.example/1.5/8');
    assert.equal(body.hashed_fxa_uid, hashedAccountId(METRICS_KEY, 'bearer7'));
    const { payload } = parseToken(body.id, ['floor-secret']);
    assert.equal(payload.uid, 8);
    assert.equal(payload.fxa_uid, 'bearer7');
    assert.equal(payload.client_state, '0123456789abcdef0123456789abcdef');
    assert.equal(typeof body.key, 'string');
    assert.equal(ok.header('X-Content-Type-Options'), 'nosniff');
    for (const bad of [accessToken('bearer7', { key: other.privateKey }), accessToken('bearer7', { alg: 'RS384' }), accessToken('bearer7', { exp: Math.floor(Date.now() / 1000) - 1 })]) {
      assert.equal((await login(floor.port, bad)).status, 401);
    }
  } finally {
    await floor.stop();
  }
});

test('the floor with the hop takes the uid from a real directory over LoginStream', async () => {
  const { storeUrl, cleanup } = tempStoreUrl('floor-hop');
  const services: Service[] = [];
  try {
    const directory = await startService('directory', 'services/directory/index.ts', { STORE_URL: storeUrl, DIRECTORY_PORT: '0' }, /directory listening/, { fromSource: true });
    services.push(directory);
    const floor = await startFloor({ FLOOR_DIRECTORY_ADDR: `127.0.0.1:${directory.port}` });
    services.push(floor);
    const uidOf = async (sub: string) => {
      const r = await login(floor.port, accessToken(sub));
      assert.equal(r.status, 200, r.text);
      return (JSON.parse(r.text) as { uid: number }).uid;
    };
    const first = await uidOf('bearer7');
    // The directory's uids, not the account's index: the same user keeps its uid, another gets another.
    assert.notEqual(first, 8);
    assert.equal(await uidOf('bearer7'), first);
    assert.notEqual(await uidOf('bearer8'), first);
  } finally {
    await stopAll(services);
    cleanup();
  }
});

test('selfMicrosByArea: each sample is worth the mean interval, idle left out, GC apart', () => {
  const node = (id: number, functionName: string, url: string) => ({ id, callFrame: { functionName, url, lineNumber: 0 } });
  const profile: CpuProfile = {
    nodes: [node(1, '(root)', ''), node(2, '(idle)', ''), node(3, '(garbage collector)', ''), node(4, 'verify', 'node:internal/crypto/sig'), node(5, 'dispatch', 'file:///x/node_modules/koa-compose/index.js')],
    startTime: 1000,
    endTime: 1600,
    samples: [2, 3, 4, 4, 5, 2],
  };
  assert.deepEqual(
    selfMicrosByArea(profile),
    new Map([
      ['(garbage collector)', 100],
      ['node:internal/crypto/sig', 200],
      ['koa-compose', 100],
    ]),
  );
  // From a time on: the samples at 1300 µs and after (deltas of 100 µs from the start at 1000).
  assert.deepEqual(
    selfMicrosByArea({ ...profile, timeDeltas: [100, 100, 100, 100, 100, 100] }, 1300),
    new Map([
      ['node:internal/crypto/sig', 200],
      ['koa-compose', 100],
    ]),
  );
  assert.deepEqual(selfMicrosByArea({ nodes: [], startTime: 0, endTime: 0, samples: [] }), new Map());
});
