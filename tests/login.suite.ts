// The login service end to end over real HTTP, against real directory and
// nodeassign services over gRPC on one store. Reusable on any store:
// `storeUrl()` gives a fresh, empty STORE_URL each call (null → every test is
// skipped with `skipReason()`).
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loginConfig, type Env } from '../lib/config.js';
import { call, grpcClient } from '../lib/grpc.js';
import { newSecret, TEST_AUTH } from './support/services.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { bundle, generateKey, legacyRsaPublicKey, signAssertion, signCertificate, signJws, type KeyPair } from '../lib/idp.js';
import { derivedSecret, nodeSecrets, parseToken } from '../lib/token.js';
import { startDirectory } from '../services/directory/server.js';
import { startNodeAssign } from '../services/nodeassign/server.js';
import { startLogin, type RunningLogin } from '../services/login/server.js';
import { forgeExponentOneJws, httpRequest, signUnencodedJws, type HttpResponse } from '../services/login/testkit.js';

const AUDIENCE = 'https://token.test.example';
export const MASTER_SECRETS = [newSecret(), newSecret()];
const NODES = { sync: 'https://sync-1.test.example', notes: 'https://notes-1.test.example' };
const RS_ISSUER = 'rs.idp.example';
const ES_ISSUER = 'es.idp.example';
/** A second IdP, trusted for its own domain only. */
const OTHER_ISSUER = 'other.idp.example';
const OTHER_DOMAIN = 'other.example';
const DEADLINE_MS = 500;

interface Keys {
  rsIssuer: KeyPair;
  esIssuer: KeyPair;
  otherIssuer: KeyPair;
  rogue: KeyPair;
  esUser: KeyPair;
  rsUser: KeyPair;
}

let keysOnce: Promise<Keys> | undefined;
function keys(): Promise<Keys> {
  keysOnce ??= (async () => {
    const [rsIssuer, esIssuer, otherIssuer, rogue, esUser, rsUser] = await Promise.all([
      generateKey('RS256'),
      generateKey('ES256'),
      generateKey('ES256'),
      generateKey('ES256'),
      generateKey('ES256'),
      generateKey('RS256'),
    ]);
    return { rsIssuer, esIssuer, otherIssuer, rogue, esUser, rsUser };
  })();
  return keysOnce;
}

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface AuthOptions {
  issuer?: typeof RS_ISSUER | typeof ES_ISSUER | typeof OTHER_ISSUER | string;
  issuerKey?: KeyPair;
  user?: KeyPair;
  publicKey?: unknown;
  signer?: KeyPair;
  generation?: number;
  certExpMs?: number;
  expMs?: number;
  audience?: string;
  scheme?: string;
}

/**
 * The running system: directory + nodeassign on one store, and login servers on
 * top. Exported for other suites that need a real login (tests/openapi.test.ts).
 */
export class System {
  private logins: RunningLogin[] = [];
  directoryPort = 0;
  nodeAssignPort = 0;
  private closers: Record<'directory' | 'nodeassign', (() => Promise<void>) | null> = { directory: null, nodeassign: null };
  login!: RunningLogin;
  keys!: Keys;
  private emails = 0;

  constructor(
    readonly storeUrl: string,
    readonly directoryOptions: { clientStateChangesPerDay?: number } = {},
  ) {}

  async start(): Promise<void> {
    this.keys = await keys();
    await this.startDirectory();
    await this.startNodeAssign();
    const client = grpcClient(NodeAssignClient, `127.0.0.1:${this.nodeAssignPort}`, TEST_AUTH);
    try {
      for (const [service, url] of Object.entries(NODES)) {
        await call(client, client.addNode, { service, url, capacity: 1000 }, { deadlineMs: 5000, retryAfter: 1 });
      }
    } finally {
      client.close();
    }
    this.login = await this.startLogin();
  }

  async startDirectory(): Promise<void> {
    const d = await startDirectory({ ...this.directoryOptions, storeUrl: this.storeUrl, host: '127.0.0.1', port: this.directoryPort, auth: TEST_AUTH });
    this.directoryPort = d.port;
    this.closers.directory = d.close;
  }

  async startNodeAssign(): Promise<void> {
    const n = await startNodeAssign({ storeUrl: this.storeUrl, host: '127.0.0.1', port: this.nodeAssignPort, auth: TEST_AUTH });
    this.nodeAssignPort = n.port;
    this.closers.nodeassign = n.close;
  }

  async stop(which: 'directory' | 'nodeassign'): Promise<void> {
    await this.closers[which]?.();
    this.closers[which] = null;
  }

  /** A login server on this system; `env` overrides the suite's settings. */
  async startLogin(env: Env = {}): Promise<RunningLogin> {
    const config = loginConfig(
      {
        APPLICATIONS: 'sync/1.5,notes/1.0,empty/1.0',
        AUDIENCES: AUDIENCE,
        MASTER_SECRETS: MASTER_SECRETS.join(','),
        INTERNAL_SECRET: TEST_AUTH.internalSecret,
        DIRECTORY_ADDR: `127.0.0.1:${this.directoryPort}`,
        NODEASSIGN_ADDR: `127.0.0.1:${this.nodeAssignPort}`,
        LOGIN_PORT: '0',
        GRPC_DEADLINE_MS: String(DEADLINE_MS),
        RETRY_AFTER: '7',
        ...env,
      },
      {
        trustedIssuers: new Map([
          [RS_ISSUER, { keys: [this.keys.rsIssuer.publicJwk], domains: ['example.com'] }],
          // The default issuer also certifies the domains of the fxa_uid test (the FxA domain and two others).
          [ES_ISSUER, { keys: [this.keys.esIssuer.publicJwk], domains: ['example.com', 'api.accounts.firefox.com', 'x.example', 'y.example'] }],
          [OTHER_ISSUER, { keys: [this.keys.otherIssuer.publicJwk], domains: [OTHER_DOMAIN] }],
        ]),
      },
    );
    const login = await startLogin(config);
    this.logins.push(login);
    return login;
  }

  async close(): Promise<void> {
    for (const l of this.logins) await l.close();
    await this.stop('nodeassign');
    await this.stop('directory');
  }

  newEmail(): string {
    return `user${++this.emails}@example.com`;
  }

  /** An Authorization header value for `email`, valid unless the options spoil it. */
  async auth(email: string, o: AuthOptions = {}): Promise<string> {
    const issuer = o.issuer ?? ES_ISSUER;
    const issuerKey = o.issuerKey ?? { [RS_ISSUER]: this.keys.rsIssuer, [OTHER_ISSUER]: this.keys.otherIssuer }[issuer] ?? this.keys.esIssuer;
    const user = o.user ?? this.keys.esUser;
    const cert = await signCertificate(issuerKey, {
      issuer,
      email,
      publicKey: (o.publicKey ?? user.publicJwk) as KeyPair['publicJwk'],
      generation: o.generation,
      expMs: o.certExpMs,
    });
    const assertion = await signAssertion(o.signer ?? user, { audience: o.audience ?? AUDIENCE, expMs: o.expMs });
    return `${o.scheme ?? 'Assertion'} ${bundle(cert, assertion)}`;
  }

  /** A header whose certificate carries exactly `claims` (signed by the trusted ES issuer). */
  async authWithClaims(certClaims: Record<string, unknown>, assertionClaims: Record<string, unknown> = { aud: AUDIENCE, exp: Date.now() + 60_000 }): Promise<string> {
    const cert = await signJws(this.keys.esIssuer, certClaims);
    return `Assertion ${bundle(cert, await signJws(this.keys.esUser, assertionClaims))}`;
  }

  get(path: string, headers: Record<string, string> = {}, opts: { method?: string; login?: RunningLogin } = {}): Promise<HttpResponse> {
    return httpRequest(`${(opts.login ?? this.login).url}${path}`, { method: opts.method, headers });
  }

  async token(email: string, headers: Record<string, string> = {}, o: AuthOptions = {}, path = '/1.0/sync/1.5'): Promise<HttpResponse> {
    return this.get(path, { Authorization: await this.auth(email, o), ...headers });
  }
}

function assertError(res: HttpResponse, status: number, statusString: string, what = ''): void {
  assert.equal(res.status, status, `${what} → ${res.status} ${res.text}`);
  assert.equal(res.header('content-type'), 'application/json', what);
  assert.equal(res.json?.status, statusString, `${what}: ${res.text}`);
  assert.ok(Array.isArray(res.json.errors) && res.json.errors.length > 0, what);
  for (const e of res.json.errors) {
    assert.ok(['header', 'url', 'body', 'internal'].includes(e.location), what);
    assert.equal(typeof e.name, 'string', what);
    assert.equal(typeof e.description, 'string', what);
  }
}

function assert401(res: HttpResponse, statusString: string, what = ''): void {
  assertError(res, 401, statusString, what);
  assert.deepEqual(res.headers.get('www-authenticate'), ['Assertion', 'BrowserID'], what);
  assert.match(res.header('x-timestamp') ?? '', /^\d{10}$/, what);
}

function assert503(res: HttpResponse, what = ''): void {
  assertError(res, 503, 'error', what);
  assert.equal(res.header('retry-after'), '7', what);
}

export function loginSuite(name: string, storeUrl: () => Promise<string | null>, skipReason?: () => string): void {
  const reason = () => skipReason?.() ?? 'no store available';

  /** A test body that runs against a fresh system, or is skipped with the reason. */
  function withSystem(
    title: string,
    register: (it: (t: string, fn: (sys: System, t: TestContext) => Promise<void>) => void) => void,
    directoryOptions: ConstructorParameters<typeof System>[1] = {},
  ): void {
    describe(title, () => {
      let sys: System | null = null;
      before(async () => {
        const url = await storeUrl();
        if (url === null) return;
        sys = new System(url, directoryOptions);
        await sys.start();
      });
      after(async () => {
        await sys?.close();
      });
      register((t, fn) =>
        test(t, async (ctx) => {
          if (!sys) {
            ctx.skip(reason());
            return;
          }
          await fn(sys, ctx);
        }),
      );
    });
  }

  withSystem(`login over HTTP (${name})`, (it) => {
    it('200: token, key, uid, api_endpoint, duration and hashalg; the token verifies with the node secret', async (sys) => {
      const email = sys.newEmail();
      const before = Math.floor(Date.now() / 1000);
      const res = await sys.token(email);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.header('content-type'), 'application/json');
      const ts = Number(res.header('x-timestamp'));
      assert.ok(ts >= before && ts <= Math.floor(Date.now() / 1000), 'X-Timestamp is server time in seconds');
      const body = res.json;
      assert.deepEqual(Object.keys(body).sort(), ['api_endpoint', 'duration', 'hashalg', 'hashed_fxa_uid', 'id', 'key', 'uid']);
      assert.match(body.hashed_fxa_uid, /^[0-9a-f]{32}$/);
      assert.equal(body.hashalg, 'sha256');
      assert.equal(body.duration, 3600);
      assert.equal(body.api_endpoint, `${NODES.sync}/1.5/${body.uid}`);
      const secrets = nodeSecrets(MASTER_SECRETS, NODES.sync);
      const { payload, secret } = parseToken(body.id, secrets);
      assert.equal(secret, secrets[0], 'signed with the newest secret');
      assert.equal(payload.uid, body.uid);
      assert.equal(payload.node, NODES.sync);
      assert.match(payload.salt, /^[0-9a-f]{6}$/);
      assert.ok(payload.expires >= before + 3600 && payload.expires <= Math.floor(Date.now() / 1000) + 3600);
      assert.match(String(payload.fxa_uid), /^[0-9a-f]{32}$/, 'an opaque account id, not the e-mail');
      assert.equal(body.key, derivedSecret(body.id, payload.salt, secret));
      assert.equal(body.key.length, 44);
      assert.equal(payload.hashed_fxa_uid, body.hashed_fxa_uid);
      assert.match(String(payload.hashed_device_id), /^[0-9a-f]{32}$/);
      assert.ok(!('tokenserver_origin' in payload), 'no tokenserver_origin: the storage node would refuse a value of ours');
    });

    it('TOKEN_SECRETS=master: signed with the newest master secret itself; the metrics hashes as Mozilla computes them', async (sys) => {
      const metricsSecret = randomBytes(32).toString('hex');
      const master = await sys.startLogin({ TOKEN_SECRETS: 'master', METRICS_HASH_SECRET: metricsSecret });
      const res = await sys.get('/1.0/sync/1.5', { Authorization: await sys.auth(sys.newEmail()) }, { login: master });
      assert.equal(res.status, 200, res.text);
      const { payload, secret } = parseToken(res.json.id, MASTER_SECRETS);
      assert.equal(secret, MASTER_SECRETS[0], 'the newest master secret');
      assert.throws(() => parseToken(res.json.id, nodeSecrets(MASTER_SECRETS, NODES.sync)), /signature/, 'not a node secret');
      assert.equal(res.json.key, derivedSecret(res.json.id, payload.salt, MASTER_SECRETS[0]));
      const hmac32 = (message: string) => createHmac('sha256', metricsSecret).update(message).digest('hex').slice(0, 32);
      assert.equal(res.json.hashed_fxa_uid, hmac32(String(payload.fxa_uid)));
      assert.equal(payload.hashed_fxa_uid, res.json.hashed_fxa_uid);
      assert.equal(payload.hashed_device_id, hmac32(`${res.json.hashed_fxa_uid}none`));
    });

    it('fxa_uid: the local part only at the FxA e-mail domain; elsewhere an opaque id that differs across domains', async (sys) => {
      const fxaUid = async (email: string) => {
        const res = await sys.token(email);
        assert.equal(res.status, 200, res.text);
        return parseToken(res.json.id, nodeSecrets(MASTER_SECRETS, NODES.sync)).payload.fxa_uid;
      };
      const hex = randomBytes(16).toString('hex');
      assert.equal(await fxaUid(`${hex}@api.accounts.firefox.com`), hex);
      const local = `someone${hex.slice(0, 8)}`;
      const x = await fxaUid(`${local}@x.example`);
      const y = await fxaUid(`${local}@y.example`);
      assert.match(String(x), /^[0-9a-f]{32}$/);
      assert.ok(!String(x).includes(local) && !String(y).includes(local), 'no local part in the token');
      assert.notEqual(x, y, 'a@x.example and a@y.example are different accounts');
      assert.equal(await fxaUid(`${local}@x.example`), x, 'stable for one user');
    });

    it('the same user gets the same uid and node again; HEAD answers too; another app gets its own node', async (sys) => {
      const email = sys.newEmail();
      const first = await sys.token(email);
      const again = await sys.token(email);
      assert.equal(again.json.uid, first.json.uid);
      assert.notEqual(again.json.id, first.json.id, 'a fresh salt per token');
      const head = await sys.get('/1.0/sync/1.5', { Authorization: await sys.auth(email) }, { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(head.text, '');
      const notes = await sys.token(email, {}, {}, '/1.0/notes/1.0');
      assert.equal(notes.status, 200, notes.text);
      assert.equal(notes.json.api_endpoint, `${NODES.notes}/1.0/${notes.json.uid}`);
    });

    it('?duration=N shortens the token only when 0 < N < the configured duration', async (sys) => {
      const email = sys.newEmail();
      const short = await sys.token(email, {}, {}, '/1.0/sync/1.5?duration=60');
      assert.equal(short.json.duration, 60);
      const { payload } = parseToken(short.json.id, nodeSecrets(MASTER_SECRETS, NODES.sync));
      assert.ok(payload.expires <= Math.floor(Date.now() / 1000) + 60);
      for (const q of ['0', '-5', 'abc', '3600', '999999', '1.5', '']) {
        const res = await sys.token(email, {}, {}, `/1.0/sync/1.5?duration=${q}`);
        assert.equal(res.status, 200, q);
        assert.equal(res.json.duration, 3600, q);
      }
    });

    it('RS256 and ES256 issuers, RS256/ES256 user keys, the legacy BrowserID key form and the BrowserID scheme', async (sys) => {
      const { rsUser } = sys.keys;
      const cases: Array<[string, AuthOptions]> = [
        ['RS256 issuer, ES256 user', { issuer: RS_ISSUER }],
        ['ES256 issuer, RS256 user', { issuer: ES_ISSUER, user: rsUser }],
        ['legacy RS public key', { issuer: RS_ISSUER, user: rsUser, publicKey: legacyRsaPublicKey(rsUser.publicJwk) }],
        ['BrowserID scheme', { scheme: 'BrowserID' }],
      ];
      for (const [what, o] of cases) {
        const res = await sys.token(sys.newEmail(), {}, o);
        assert.equal(res.status, 200, `${what}: ${res.text}`);
      }
    });

    it('404 for unknown applications, versions and paths; 405 with Allow for other methods on a known path', async (sys) => {
      const auth = { Authorization: await sys.auth(sys.newEmail()) };
      for (const p of ['/1.0/unknown/1.5', '/1.0/sync/9.9', '/2.0/sync/1.5', '/nothing', '/1.0/sync']) {
        assertError(await sys.get(p, auth), 404, 'error', p);
      }
      assertError(await sys.get('/1.0/unknown/1.5', auth, { method: 'POST' }), 404, 'error', 'POST to an unknown app');
      for (const method of ['POST', 'PUT', 'DELETE']) {
        const res = await sys.get('/1.0/sync/1.5', auth, { method });
        assertError(res, 405, 'error', method);
        assert.equal(res.header('allow'), 'GET, HEAD');
      }
      const hb = await sys.get('/__heartbeat__', {}, { method: 'POST' });
      assertError(hb, 405, 'error', 'POST heartbeat');
    });

    it('406 when Accept excludes JSON; checks run in the DESIGN order', async (sys) => {
      const email = sys.newEmail();
      assertError(await sys.token(email, { Accept: 'text/html' }), 406, 'error', 'text/html');
      assert.equal((await sys.token(email, { Accept: 'text/html, */*;q=0.1' })).status, 200);
      assert.equal((await sys.token(email, { Accept: 'application/json' })).status, 200);
      // 406 before 400 before 401.
      assertError(await sys.get('/1.0/sync/1.5', { Accept: 'text/html', 'X-Client-State': 'not valid!' }), 406, 'error');
      assertError(await sys.get('/1.0/sync/1.5', { 'X-Client-State': 'not valid!' }), 400, 'error');
      // 405 before 406.
      assertError(await sys.get('/1.0/sync/1.5', { Accept: 'text/html' }, { method: 'POST' }), 405, 'error');
    });

    it('400 for a malformed X-Client-State', async (sys) => {
      for (const v of ['f'.repeat(33), 'a b', 'a/b', 'a,b']) {
        const res = await sys.token(sys.newEmail(), { 'X-Client-State': v });
        assertError(res, 400, 'error', v);
        assert.equal(res.json.errors[0].name, 'X-Client-State');
      }
    });

    it('401 "error" for a missing or unparseable Authorization or an unknown scheme, with challenges and X-Timestamp', async (sys) => {
      assert401(await sys.get('/1.0/sync/1.5'), 'error', 'no header');
      for (const h of ['Bearer abc', 'Hawk id="x"', 'Assertion', 'Assertion a~b c', 'Assertion    ']) {
        assert401(await sys.get('/1.0/sync/1.5', { Authorization: h }), 'error', h);
      }
    });

    it('401 invalid-credentials: untrusted issuer, wrong issuer key, wrong audience, assertion signed by another key', async (sys) => {
      const { rogue, rsUser } = sys.keys;
      const cases: Array<[string, AuthOptions]> = [
        ['untrusted issuer', { issuer: 'evil.example', issuerKey: rogue }],
        ['certificate signed by a key the issuer does not have', { issuer: ES_ISSUER, issuerKey: rogue }],
        ['wrong audience', { audience: 'https://elsewhere.example' }],
        ['assertion signed by another key', { signer: rogue }],
        ['assertion signed with another key type', { signer: rsUser }],
      ];
      for (const [what, o] of cases) assert401(await sys.token(sys.newEmail(), {}, o), 'invalid-credentials', what);
    });

    it('401 invalid-credentials for malformed input: base64, JSON, segments, claim types; never a 500', async (sys) => {
      const good = (await sys.auth(sys.newEmail())).slice('Assertion '.length);
      const [cert, assertion] = good.split('~');
      const [h, p, s] = cert.split('.');
      const now = Date.now();
      const claims = { iss: ES_ISSUER, iat: now, exp: now + 60_000, principal: { email: sys.newEmail() }, 'public-key': sys.keys.esUser.publicJwk };
      const headers: Array<[string, string]> = [
        ['broken base64', `Assertion ${h}.%%%.${s}~${assertion}`],
        ['bad JSON', `Assertion ${h}.${b64('{"iss": ')}.${s}~${assertion}`],
        ['JSON array payload', `Assertion ${h}.${b64([1, 2])}.${s}~${assertion}`],
        ['two segments', `Assertion ${h}.${p}~${assertion}`],
        ['four segments', `Assertion ${cert}.${s}~${assertion}`],
        ['no assertion', `Assertion ${cert}`],
        ['three bundle parts', `Assertion ${cert}~${cert}~${assertion}`],
        ['alg none', `Assertion ${b64({ alg: 'none' })}.${p}.~${assertion}`],
        ['alg HS256', `Assertion ${b64({ alg: 'HS256' })}.${p}.${s}~${assertion}`],
        ['garbage', `Assertion ${'x'.repeat(8000)}`],
        ['exp as a string', await sys.authWithClaims({ ...claims, exp: String(now + 60_000) })],
        ['huge exp', await sys.authWithClaims({ ...claims, exp: 1e300 })],
        ['email as a number', await sys.authWithClaims({ ...claims, principal: { email: 42 } })],
        ['public-key missing', await sys.authWithClaims({ ...claims, 'public-key': undefined })],
        ['legacy DSA key', await sys.authWithClaims({ ...claims, 'public-key': { algorithm: 'DS', y: '1', p: '2', q: '3', g: '4' } })],
        ['aud as a number', await sys.authWithClaims(claims, { aud: 42, exp: now + 60_000 })],
      ];
      for (const [what, value] of headers) assert401(await sys.get('/1.0/sync/1.5', { Authorization: value }), 'invalid-credentials', what);
    });

    it('a header beyond node’s limit is refused (431) without harming the server', async (sys) => {
      const res = await sys.get('/1.0/sync/1.5', { Authorization: `Assertion ${'a'.repeat(40_000)}~b` });
      assert.equal(res.status, 431);
      assert.equal((res.json as { status?: string } | undefined)?.status, 'error', 'JSON error body (lib/client-error.ts)');
      assert.match(String(res.header('x-timestamp')), /^\d+$/);
      assert.equal((await sys.token(sys.newEmail())).status, 200);
    });

    it('401 invalid-timestamp for an expired certificate or assertion', async (sys) => {
      const past = Date.now() - 10 * 60_000;
      assert401(await sys.token(sys.newEmail(), {}, { certExpMs: past }), 'invalid-timestamp', 'certificate');
      assert401(await sys.token(sys.newEmail(), {}, { expMs: past }), 'invalid-timestamp', 'assertion');
    });

    it('401 invalid-generation for a malformed generation claim and for an older generation', async (sys) => {
      const now = Date.now();
      const claims = { iss: ES_ISSUER, iat: now, exp: now + 60_000, principal: { email: sys.newEmail() }, 'public-key': sys.keys.esUser.publicJwk };
      for (const g of [-1, 1.5, '7', 1e20, null]) {
        assert401(await sys.get('/1.0/sync/1.5', { Authorization: await sys.authWithClaims({ ...claims, 'fxa-generation': g }) }), 'invalid-generation', String(g));
      }
      const email = sys.newEmail();
      const uid = (await sys.token(email, {}, { generation: 5 })).json.uid;
      assert401(await sys.token(email, {}, { generation: 4 }), 'invalid-generation', 'older');
      assert.equal((await sys.token(email, {}, { generation: 6 })).json.uid, uid);
      assert401(await sys.token(email, {}, { generation: 5 }), 'invalid-generation', 'older than the newly recorded one');
      // Mozilla's servers read a missing generation as 0.
      assert401(await sys.token(email), 'invalid-generation', 'no generation claim once one is recorded');
      assert.equal((await sys.token(email, {}, { generation: 6 })).json.uid, uid, 'the refusal left the record alone');
    });

    it('client-state sequence without generations: change → new uid; going back or to empty → invalid-client-state', async (sys) => {
      const email = sys.newEmail();
      const a = await sys.token(email);
      const b = await sys.token(email, { 'X-Client-State': 'aaaa' });
      assert.equal(b.status, 200, b.text);
      assert.notEqual(b.json.uid, a.json.uid, 'a new client state gets a new uid');
      assert.equal(parseToken(b.json.id, nodeSecrets(MASTER_SECRETS, NODES.sync)).payload.fxa_kid, '0000000000000-qqo');
      assert401(await sys.token(email), 'invalid-client-state', 'empty after non-empty');
      const c = await sys.token(email, { 'X-Client-State': 'bbbb' });
      assert.equal(c.status, 200);
      assert.notEqual(c.json.uid, b.json.uid);
      assert401(await sys.token(email, { 'X-Client-State': 'aaaa' }), 'invalid-client-state', 'a state seen before');
      assert.equal((await sys.token(email, { 'X-Client-State': 'bbbb' })).json.uid, c.json.uid);
    });

    it('client-state sequence with generations: a new state needs a generation increase', async (sys) => {
      const email = sys.newEmail();
      const a = await sys.token(email, { 'X-Client-State': 'aaaa' }, { generation: 10 });
      assert.equal(a.status, 200, a.text);
      assert401(await sys.token(email, { 'X-Client-State': 'bbbb' }, { generation: 10 }), 'invalid-client-state', 'same generation');
      const b = await sys.token(email, { 'X-Client-State': 'bbbb' }, { generation: 11 });
      assert.equal(b.status, 200, b.text);
      assert.notEqual(b.json.uid, a.json.uid);
      assert401(await sys.token(email, { 'X-Client-State': 'bbbb' }, { generation: 10 }), 'invalid-generation');
      assert.equal((await sys.token(email, { 'X-Client-State': 'bbbb' }, { generation: 12 })).json.uid, b.json.uid);
    });

    it('403 new-users-disabled when new users are off; known users still log in', async (sys) => {
      const known = sys.newEmail();
      assert.equal((await sys.token(known)).status, 200);
      const closed = await sys.startLogin({ ALLOW_NEW_USERS: 'false' });
      const fresh = await sys.get('/1.0/sync/1.5', { Authorization: await sys.auth(sys.newEmail()) }, { login: closed });
      assertError(fresh, 403, 'new-users-disabled');
      assert.equal((await sys.get('/1.0/sync/1.5', { Authorization: await sys.auth(known) }, { login: closed })).status, 200);
    });

    it('503 with Retry-After when no node has room for the application', async (sys) => {
      assert503(await sys.token(sys.newEmail(), {}, {}, '/1.0/empty/1.0'), 'no node');
    });

    it('503 with Retry-After on every token request in maintenance mode; heartbeats still answer', async (sys) => {
      const m = await sys.startLogin({ MAINTENANCE_MODE: 'true' });
      assert503(await sys.get('/1.0/sync/1.5', { Authorization: await sys.auth(sys.newEmail()) }, { login: m }), 'maintenance');
      assert503(await sys.get('/1.0/sync/1.5', {}, { login: m }), 'maintenance without credentials');
      assert.equal((await sys.get('/__lbheartbeat__', {}, { login: m })).status, 200);
    });

    it('/__heartbeat__, /__lbheartbeat__ and /__version__', async (sys) => {
      const hb = await sys.get('/__heartbeat__');
      assert.equal(hb.status, 200, hb.text);
      assert.deepEqual(hb.json.checks, { directory: 'ok', nodeassign: 'ok' });
      assert.equal((await sys.get('/__lbheartbeat__')).status, 200);
      const v = await sys.get('/__version__');
      assert.equal(v.status, 200);
      assert.equal(v.json.name, 'tokenserver');
      assert.match(v.json.version, /^\d+\.\d+\.\d+/);
    });
  });

  /** `count` client-state changes of one user of `app`, each with a higher generation. */
  async function changeStates(sys: System, email: string, count: number, path: string): Promise<HttpResponse[]> {
    const answers: HttpResponse[] = [];
    for (let i = 1; i <= count; i++) answers.push(await sys.token(email, { 'X-Client-State': `state${i}` }, { generation: i }, path));
    return answers;
  }

  withSystem(`client-state changes are rate-limited (${name})`, (it) => {
    it('the change beyond CLIENT_STATE_CHANGES_PER_DAY within a day → 429, status error, Retry-After; the current state still works', async (sys) => {
      const email = sys.newEmail();
      // The first login sets a state on a new user: not a change.
      for (const [i, res] of (await changeStates(sys, email, 4, '/1.0/sync/1.5')).entries()) assert.equal(res.status, 200, `change ${i}: ${res.text}`);
      const refused = await sys.token(email, { 'X-Client-State': 'state5' }, { generation: 5 });
      assertError(refused, 429, 'error', 'the fourth change');
      const retryAfter = Number(refused.header('retry-after'));
      assert.ok(Number.isInteger(retryAfter) && retryAfter > 86_000 && retryAfter <= 86_400, `Retry-After ${refused.header('retry-after')}`);
      assert.equal((await sys.token(email, { 'X-Client-State': 'state4' }, { generation: 5 })).status, 200);
    });
  }, { clientStateChangesPerDay: 3 });

  withSystem(`client-state churn does not fill a node (${name})`, (it) => {
    it('201 client-state changes of one user on a node of capacity 200: every one answered, the node counts one user', async (sys) => {
      const client = grpcClient(NodeAssignClient, `127.0.0.1:${sys.nodeAssignPort}`, TEST_AUTH);
      const opts = { deadlineMs: 5000, retryAfter: 1 };
      const node = 'https://churn.test.example';
      const load = async () => (await call(client, client.listNodes, { service: 'empty' }, opts)).nodes.find((n) => n.url === node)?.currentLoad;
      try {
        await call(client, client.addNode, { service: 'empty', url: node, capacity: 200 }, opts);
        const email = sys.newEmail();
        const answers = await changeStates(sys, email, 202, '/1.0/empty/1.0');
        for (const [i, res] of answers.entries()) assert.equal(res.status, 200, `login ${i}: ${res.text}`);
        assert.equal(new Set(answers.map((r) => r.json.uid)).size, 202, 'each change a new uid');
        assert.equal(await load(), 1, 'replaced uids on the same node gave their slots back');
        // Another user still finds room.
        assert.equal((await sys.token(sys.newEmail(), {}, {}, '/1.0/empty/1.0')).status, 200);
        assert.equal(await load(), 2);
      } finally {
        client.close();
      }
    });
  }, { clientStateChangesPerDay: 1000 });
  withSystem(`login refuses forged and over-long credentials (${name})`, (it) => {
    it('a second IdP certifying the first one’s domain: 401 invalid-credentials; its own domain passes', async (sys) => {
      const email = sys.newEmail();
      const first = await sys.token(email);
      assert.equal(first.status, 200, first.text);
      assert401(await sys.token(email, {}, { issuer: OTHER_ISSUER }), 'invalid-credentials', 'other IdP, example.com user');
      assert401(await sys.token(email.toUpperCase(), {}, { issuer: OTHER_ISSUER }), 'invalid-credentials', 'other IdP, upper-case domain');
      const own = await sys.token(`someone@${OTHER_DOMAIN}`, {}, { issuer: OTHER_ISSUER });
      assert.equal(own.status, 200, own.text);
      assert.notEqual(own.json.uid, first.json.uid);
    });

    it('TRUSTED_ISSUERS without "domains": the issuer certifies its own host name only', async (sys) => {
      const dir = mkdtempSync(path.join(tmpdir(), 'login-issuers-'));
      try {
        const file = path.join(dir, 'trusted-issuers.json');
        writeFileSync(file, JSON.stringify({ [OTHER_DOMAIN]: { keys: [sys.keys.otherIssuer.publicJwk] } }));
        const login = await sys.startLogin({ TRUSTED_ISSUERS: file });
        const token = async (email: string) => sys.get('/1.0/sync/1.5', { Authorization: await sys.auth(email, { issuer: OTHER_DOMAIN, issuerKey: sys.keys.otherIssuer }) }, { login });
        assert.equal((await token(`own@${OTHER_DOMAIN}`)).status, 200);
        assert401(await token(sys.newEmail()), 'invalid-credentials', 'another domain');
        assert401(await token(`sub@eu.${OTHER_DOMAIN}`), 'invalid-credentials', 'a subdomain');
        // The file replaces the suite's issuers: the first IdP is no longer trusted by this login.
        assert401(await sys.get('/1.0/sync/1.5', { Authorization: await sys.auth(sys.newEmail()) }, { login }), 'invalid-credentials', 'issuer not in the file');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('an RSA user key with e = 1, in JWK and legacy form, and a forged assertion: 401 invalid-credentials', async (sys) => {
      const n = sys.keys.rsUser.publicJwk.n as string;
      const assertion = forgeExponentOneJws({ aud: AUDIENCE, exp: Date.now() + 60_000 }, n);
      for (const publicKey of [{ kty: 'RSA', n, e: 'AQ' }, legacyRsaPublicKey({ kty: 'RSA', n, e: 'AQ' })]) {
        const cert = await signCertificate(sys.keys.esIssuer, { issuer: ES_ISSUER, email: sys.newEmail(), publicKey: publicKey as KeyPair['publicJwk'] });
        assert401(await sys.get('/1.0/sync/1.5', { Authorization: `Assertion ${bundle(cert, assertion)}` }), 'invalid-credentials', JSON.stringify(publicKey).slice(0, 30));
      }
    });

    it('an assertion or certificate expiring in 2100: 401 invalid-timestamp', async (sys) => {
      const in2100 = Date.UTC(2100, 0, 1);
      assert401(await sys.token(sys.newEmail(), {}, { expMs: in2100 }), 'invalid-timestamp', 'assertion');
      assert401(await sys.token(sys.newEmail(), {}, { certExpMs: in2100 }), 'invalid-timestamp', 'certificate');
      const limits = { expMs: Date.now() + 590_000, certExpMs: Date.now() + 86_390_000 };
      assert.equal((await sys.token(sys.newEmail(), {}, limits)).status, 200, 'just within both limits');
      const strict = await sys.startLogin({ MAX_ASSERTION_LIFETIME: '30', MAX_CERTIFICATE_LIFETIME: '600' });
      const refused = async (o: AuthOptions) => sys.get('/1.0/sync/1.5', { Authorization: await sys.auth(sys.newEmail(), o) }, { login: strict });
      assert401(await refused({ expMs: Date.now() + 120_000, certExpMs: Date.now() + 300_000 }), 'invalid-timestamp', 'MAX_ASSERTION_LIFETIME=30');
      assert401(await refused({ expMs: Date.now() + 20_000, certExpMs: Date.now() + 3_600_000 }), 'invalid-timestamp', 'MAX_CERTIFICATE_LIFETIME=600');
    });

    it('an assertion signed with b64: false: 401 invalid-credentials', async (sys) => {
      const cert = (await sys.auth(sys.newEmail())).slice('Assertion '.length).split('~')[0];
      const unencoded = await signUnencodedJws(sys.keys.esUser, { aud: AUDIENCE, exp: Date.now() + 60_000 });
      assert401(await sys.get('/1.0/sync/1.5', { Authorization: `Assertion ${bundle(cert, unencoded)}` }), 'invalid-credentials');
    });

    it('15 KB of blanks between scheme and credentials: 401 "error", and the server still serves', async (sys) => {
      // Its cost is measured by `npm run bench -- --only parse` (no timing in tests); that the length is checked
      // before any parsing is tested in services/login/assertion.test.ts.
      const header = `Assertion${' '.repeat(15_000)}x y`;
      for (let i = 0; i < 10; i++) assert401(await sys.get('/1.0/sync/1.5', { Authorization: header }), 'error', 'blanks');
      assert.equal((await sys.token(sys.newEmail())).status, 200);
    });

    it('e-mails are normalised: domain case and NFC/NFD spellings are one user', async (sys) => {
      const n = sys.newEmail().split('@')[0];
      const lower = await sys.token(`Alice-${n}@example.com`);
      assert.equal(lower.status, 200, lower.text);
      assert.equal((await sys.token(`Alice-${n}@EXAMPLE.com`)).json.uid, lower.json.uid, 'domain case');
      assert.notEqual((await sys.token(`alice-${n}@example.com`)).json.uid, lower.json.uid, 'the local part keeps its case');
      const nfc = await sys.token(`Jos\u00e9-${n}@example.com`);
      assert.equal(nfc.status, 200, nfc.text);
      assert.equal((await sys.token(`Jose\u0301-${n}@example.com`)).json.uid, nfc.json.uid, 'NFD local part');
      assert.equal((await sys.token(`Jose\u0301-${n}@Example.COM`)).json.uid, nfc.json.uid, 'NFD and domain case');
    });
  });

  withSystem(`login with a backend down (${name})`, (it) => {
    async function until200(sys: System, what: string): Promise<void> {
      for (let i = 0; i < 100; i++) {
        const res = await sys.token(sys.newEmail());
        if (res.status === 200) return;
        await sleep(100);
      }
      assert.fail(`${what}: login did not recover`);
    }

    it('directory down: 503 with Retry-After quickly and a failing heartbeat; recovers once restarted on the same port', async (sys) => {
      await until200(sys, 'before');
      await sys.stop('directory');
      const started = Date.now();
      assert503(await sys.token(sys.newEmail()), 'directory down');
      // Bounded by the gRPC deadline, not a hang.
      assert.ok(Date.now() - started < DEADLINE_MS * 6, `took ${Date.now() - started} ms`);
      const hb = await sys.get('/__heartbeat__');
      assert.equal(hb.status, 503);
      assert.equal(hb.header('retry-after'), '7');
      assert.deepEqual(hb.json.checks, { directory: 'unavailable', nodeassign: 'ok' });
      assert.equal((await sys.get('/__lbheartbeat__')).status, 200);
      await sys.startDirectory();
      await until200(sys, 'after restart');
      assert.equal((await sys.get('/__heartbeat__')).status, 200);
    });

    it('nodeassign down: a user with a node still logs in, a new user gets 503; recovers after restart', async (sys) => {
      const known = sys.newEmail();
      assert.equal((await sys.token(known)).status, 200);
      await sys.stop('nodeassign');
      assert.equal((await sys.token(known)).status, 200, 'no allocation needed');
      assert503(await sys.token(sys.newEmail()), 'nodeassign down');
      assert.deepEqual((await sys.get('/__heartbeat__')).json.checks, { directory: 'ok', nodeassign: 'unavailable' });
      await sys.startNodeAssign();
      await until200(sys, 'after restart');
    });
  });
}
