// The floor under a Bearer login (bench/floor.ts): a Koa app on node:http with
// @koa/router that does only what no login can skip. It checks the access token's
// RS256 signature and the claims a token needs (node:crypto, the key imported
// once), reads X-KeyID, derives hashed_fxa_uid and hashed_device_id and mints
// the tokenlib token with lib/token.ts, and answers the token's JSON with the
// headers login sends. No access line, no metrics, no error handler beyond
// Koa's. With FLOOR_DIRECTORY_ADDR it takes the user's record from that
// directory through login's own LoginStream client (services/login/backends.ts):
// the hop the gRPC split costs. Without it, no hop: the uid is the account's
// index (bench/fixtures.ts names Bearer accounts bearer<i>). Its ready line is
// like the services', so bench/proc.ts starts it alike.
import Router from '@koa/router';
import Koa from 'koa';
import { createPublicKey, verify, type JsonWebKey } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LoginMetrics } from '../lib/metrics.js';
import { makeToken, newSalt } from '../lib/token.js';
import { connectBackends } from '../services/login/backends.js';
import { hashedAccountId, hashedDeviceId } from '../services/login/rules.js';

const jwk = JSON.parse(process.env.FLOOR_JWK ?? '') as JsonWebKey & { kid: string };
const key = createPublicKey({ key: jwk, format: 'jwk' });
const metricsKey = process.env.METRICS_HASH_SECRET ?? '';
const secret = 'floor-secret';
const node = 'http://bench-node.example';
const directoryAddr = process.env.FLOOR_DIRECTORY_ADDR;
const backends =
  directoryAddr === undefined
    ? undefined
    : connectBackends(
        { directoryAddr, nodeAssignAddr: directoryAddr, auth: { internalSecret: process.env.INTERNAL_SECRET ?? '' }, grpcDeadlineMs: 5000, retryAfter: 5 },
        new LoginMetrics(),
      );

/** A 401, as Koa answers an exposed error with a status. */
function refuse(): never {
  throw Object.assign(new Error('unauthorized'), { status: 401, expose: true });
}

const app = new Koa();
const router = new Router();
router.get('/1.0/:app/:version', async (ctx) => {
  const auth = ctx.get('Authorization');
  if (!auth.startsWith('Bearer ')) refuse();
  const jws = auth.slice(7);
  const dot1 = jws.indexOf('.');
  const dot2 = jws.indexOf('.', dot1 + 1);
  const header = JSON.parse(Buffer.from(jws.slice(0, dot1), 'base64url').toString()) as Record<string, unknown>;
  const claims = JSON.parse(Buffer.from(jws.slice(dot1 + 1, dot2), 'base64url').toString()) as Record<string, unknown>;
  if (header.alg !== 'RS256' || header.kid !== jwk.kid) refuse();
  if (!verify('sha256', Buffer.from(jws.slice(0, dot2)), key, Buffer.from(jws.slice(dot2 + 1), 'base64url'))) refuse();
  if (typeof claims.exp !== 'number' || claims.exp <= Date.now() / 1000 || typeof claims.sub !== 'string') refuse();
  const keyId = ctx.get('X-KeyID');
  const dash = keyId.indexOf('-');
  const clientState = Buffer.from(keyId.slice(dash + 1), 'base64url').toString('hex');
  const kca = Number(keyId.slice(0, dash));
  const generation = claims['fxa-generation'] as number;
  const uid = backends
    ? (await backends.login({ service: ctx.params.app, email: `${claims.sub}@api.accounts.firefox.com`, generation, keysChangedAt: kca, clientState, allowNewUsers: true, missingGenerationIsNone: true }, '')).uid
    : Number(claims.sub.slice(6)) + 1;
  const hashedFxaUid = hashedAccountId(metricsKey, claims.sub);
  const duration = 3600;
  const payload = {
    uid,
    node,
    expires: Math.floor(Date.now() / 1000) + duration,
    salt: newSalt(),
    fxa_uid: claims.sub,
    fxa_kid: `${keyId.slice(0, dash).padStart(13, '0')}-${keyId.slice(dash + 1)}`,
    hashed_fxa_uid: hashedFxaUid,
    hashed_device_id: hashedDeviceId(metricsKey, hashedFxaUid),
    client_state: clientState,
  };
  const { id, key: derived } = makeToken(payload, secret);
  ctx.set('X-Timestamp', String(Math.floor(Date.now() / 1000)));
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Content-Type', 'application/json');
  ctx.body = JSON.stringify({ id, key: derived, uid, api_endpoint: `${node}/1.5/${uid}`, duration, hashalg: 'sha256', hashed_fxa_uid: hashedFxaUid });
});
app.use(router.routes());
const server = createServer(app.callback());
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ msg: 'listening', port: (server.address() as AddressInfo).port }) + '\n');
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
