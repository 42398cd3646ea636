// GET /1.0/:app/:version — a token for an application node (DESIGN §3).
// The middleware below run in the order of the checks in DESIGN §3; the
// first failure wins and the error handler answers it.
import type { Middleware, ParameterizedContext } from 'koa';
import {
  BadRequest,
  MOZILLA_ERRORS,
  NotAcceptable,
  ServiceUnavailable,
  UserNotAllowed,
} from '../../../lib/errors.js';
import { isAllowedUser } from '../../../lib/config.js';
import { accountIdKey, isLiveUid, makeToken, metricsHashKey, newSalt, tokenSecrets } from '../../../lib/token.js';
import type { User } from '../../../lib/gen/directory.js';
import { sendJson } from '../error-handler.js';
import { accountId, acceptsJson, apiEndpoint, hashedAccountId, hashedDeviceId, isKnownApplication, isValidClientState, tokenDuration, tokenPayload, unsupportedApplication } from '../rules.js';
import { authorizationOf } from '../authorization.js';
import type { Identity } from '../scheme.js';
import { allowMethods, GET_HEAD, shedLoad, type LoginDeps } from '../shared.js';

export const TOKEN_PATH = '/1.0/:app/:version';
const ASSIGN_ATTEMPTS = 3;

interface TokenState {
  requestId: string;
  app: string;
  version: string;
  clientState: string;
  identity: Identity;
  user: User;
}

type TokenMiddleware = Middleware<TokenState, ParameterizedContext<TokenState> & { params: Record<string, string> }>;

export function tokenEndpoint(deps: LoginDeps): TokenMiddleware[] {
  const { config, auth, backends, log } = deps;
  // From the newest master secret, like the tokens it goes into.
  const accountKey = accountIdKey(config.masterSecrets[0]);
  const metricsKey = config.metricsHashSecret ?? metricsHashKey(config.masterSecrets[0]);

  // The checks that need no I/O are plain functions returning next(): no async frame and promise of
  // their own per request (koa-compose turns a throw into a rejection all the same).
  const knownApplication: TokenMiddleware = function knownApplication(ctx, next) {
    const { app, version } = ctx.params;
    if (!isKnownApplication(config.applications, app, version)) throw unsupportedApplication(config.applications, app, version);
    ctx.state.app = app;
    ctx.state.version = version;
    return next();
  };

  const notInMaintenance: TokenMiddleware = function notInMaintenance(ctx, next) {
    if (config.maintenanceMode) throw new ServiceUnavailable('the service is in maintenance', config.retryAfter);
    return next();
  };

  const acceptJson: TokenMiddleware = function acceptJson(ctx, next) {
    if (!acceptsJson(ctx.get('Accept') || undefined)) throw new NotAcceptable('this endpoint answers application/json only');
    return next();
  };

  const checkClientState: TokenMiddleware = function checkClientState(ctx, next) {
    const value = ctx.get('X-Client-State');
    if (!isValidClientState(value)) {
      throw new BadRequest('X-Client-State must match ^[a-zA-Z0-9._-]{1,32}$', { location: 'header', field: 'X-Client-State', answer: MOZILLA_ERRORS.invalidClientStateHeader.entry });
    }
    ctx.state.clientState = value;
    return next();
  };

  /** The scheme named in Authorization verifies the credentials (schemes.ts). */
  const authenticate: TokenMiddleware = async function authenticate(ctx, next) {
    const identity = await auth.authenticate({ authorization: authorizationOf(ctx.req), header: (name) => ctx.get(name) || undefined });
    ctx.state.identity = identity;
    // Bearer names the client state in X-KeyID (checked against X-Client-State there).
    if (identity.clientState !== undefined) ctx.state.clientState = identity.clientState;
    await next();
  };

  // After the credentials are verified (the e-mail is known and certified), before any record is made.
  const allowedUser: TokenMiddleware = function allowedUser(ctx, next) {
    const allowed = config.allowedUsers;
    if (allowed && !isAllowedUser(allowed.list, ctx.state.identity.email)) throw new UserNotAllowed('this user may not use this service');
    return next();
  };

  const loginUser: TokenMiddleware = async function loginUser(ctx, next) {
    const { app, identity, clientState, requestId } = ctx.state;
    ctx.state.user = await backends.login(
      {
        service: app,
        email: identity.email,
        generation: identity.generation,
        keysChangedAt: identity.keysChangedAt,
        missingGenerationIsNone: identity.missingGenerationIsNone,
        clientState,
        allowNewUsers: config.allowNewUsers,
      },
      requestId,
    );
    await next();
  };

  const assignNode: TokenMiddleware = async function assignNode(ctx, next) {
    const { app, requestId } = ctx.state;
    // If another request assigned a node first, the directory answers with that one. If a
    // concurrent client-state change gave the user a new uid meanwhile, that uid needs a node too.
    for (let attempt = 0; ctx.state.user.node === ''; attempt++) {
      if (attempt === ASSIGN_ATTEMPTS) throw new ServiceUnavailable('could not assign a node, try again', config.retryAfter);
      const { email, uid } = ctx.state.user;
      const node = await backends.allocate(app, requestId);
      const { user, assigned, released } = await backends.assignNode({ service: app, email, uid, node }, requestId);
      ctx.state.user = user;
      // The slot allocated here when another request assigned first, and those
      // of replaced uids on the same node, go back to the node.
      await releaseSlots(app, node, (assigned ? 0 : 1) + released, requestId);
      // The account was deleted while this login ran: its record has no live uid to mint for.
      // The client's next login starts it afresh, as if the deletion had come first.
      if (!isLiveUid(user.uid)) throw new ServiceUnavailable('the account was deleted during this login, try again', config.retryAfter);
    }
    await next();
  };

  /** Best effort: a slot that fails to go back stays counted, as before, and the user still gets a token. */
  async function releaseSlots(app: string, node: string, count: number, requestId: string): Promise<void> {
    for (let i = 0; i < count; i++) {
      try {
        await backends.release(app, node, requestId);
      } catch (err) {
        log.warn({ requestId, node, err: (err as Error).message }, 'could not release a node slot');
        return;
      }
    }
  }

  const mintToken: TokenMiddleware = async function mintToken(ctx) {
    const { version, user, identity } = ctx.state;
    // Never a token for uid 0 or another non-live uid: every such token would name the same data.
    if (!isLiveUid(user.uid)) throw new ServiceUnavailable('no live account record to mint for, try again', config.retryAfter);
    const duration = tokenDuration(ctx.query.duration, config.tokenDuration);
    const secret = tokenSecrets(config.tokenSecrets, config.masterSecrets, user.node)[0];
    const fxaUid = accountId(identity.email, config.oauthEmailDomain, accountKey);
    const hashedFxaUid = hashedAccountId(metricsKey, fxaUid);
    const payload = tokenPayload({
      uid: user.uid,
      node: user.node,
      fxaUid,
      hashedFxaUid,
      hashedDeviceId: hashedDeviceId(metricsKey, hashedFxaUid),
      generation: user.generation,
      keysChangedAt: user.keysChangedAt,
      clientState: user.clientState,
      nowSeconds: Date.now() / 1000,
      duration,
      salt: newSalt(),
    });
    const { id, key } = makeToken(payload, secret);
    sendJson(ctx, 200, {
      id,
      key,
      uid: user.uid,
      api_endpoint: apiEndpoint(user.node, version, user.uid),
      duration,
      hashalg: 'sha256',
      hashed_fxa_uid: hashedFxaUid,
      ...(config.nodeType !== undefined ? { node_type: config.nodeType } : {}),
    });
  };

  return [
    knownApplication,
    allowMethods(GET_HEAD) as TokenMiddleware,
    shedLoad(deps) as TokenMiddleware,
    notInMaintenance,
    acceptJson,
    checkClientState,
    authenticate,
    allowedUser,
    loginUser,
    assignNode,
    mintToken,
  ];
}
