// POST /1.0/webhooks/fxa/events — account events (DESIGN §9.4), on when
// WEBHOOK_JWKS (a file or a URL, kept as §13.1 says) is set. `Authorization: Bearer <security event token>`: the
// token's claims name the account (`sub`) and its events. Each event is
// idempotent, so a redelivery changes nothing more.
import { createHash } from 'node:crypto';
import type { Middleware } from 'koa';
import type { WebhookConfig } from '../../../lib/config.js';
import { BadRequest, InvalidCredentials, InvalidTimestamp, MOZILLA_ERRORS, PayloadTooLarge } from '../../../lib/errors.js';
import { authorizationOf, splitAuthorization } from '../authorization.js';
import { jwtVerifier } from '../jwks.js';
import { allowMethods, type LoginDeps } from '../shared.js';

export const WEBHOOK_PATH = '/1.0/webhooks/fxa/events';
export const EVENT_BASE = 'https://schemas.accounts.firefox.com/event/';
export const DELETE_USER = `${EVENT_BASE}delete-user`;
export const PASSWORD_CHANGE = `${EVENT_BASE}password-change`;
/** Larger bodies are refused unread (the event is in the token; a body is only checked to be JSON). */
const MAX_BODY_BYTES = 65_536;
const SUB = /^[A-Za-z0-9_-]{1,64}$/;
/** Security event tokens are RS256 (DESIGN §9.4), and so the keys of their set. */
export const WEBHOOK_ALGORITHMS = ['RS256'] as const;

export type AccountEvent =
  | { kind: 'delete-user' }
  /** The generation to raise to: changeTime − 1. */
  | { kind: 'password-change'; generation: number }
  | { kind: 'ignored'; uri: string };

/** The account and its events from a verified token's claims; BadRequest when they are malformed. */
export function accountEvents(claims: Record<string, unknown>): { sub: string; events: AccountEvent[] } {
  const { sub, events } = claims;
  if (typeof sub !== 'string' || !SUB.test(sub)) throw new BadRequest('"sub" must be an account id', { location: 'body', field: 'sub' });
  if (typeof events !== 'object' || events === null || Array.isArray(events)) {
    throw new BadRequest('"events" must be an object keyed by event URI', { location: 'body', field: 'events' });
  }
  return {
    sub,
    events: Object.entries(events).map(([uri, body]): AccountEvent => {
      if (uri === DELETE_USER) return { kind: 'delete-user' };
      if (uri !== PASSWORD_CHANGE) return { kind: 'ignored', uri };
      const changeTime = (body as { changeTime?: unknown } | null)?.changeTime;
      if (typeof changeTime !== 'number' || !Number.isSafeInteger(changeTime) || changeTime < 1) {
        throw new BadRequest('password-change needs "changeTime", a positive integer (ms)', { location: 'body', field: 'changeTime' });
      }
      return { kind: 'password-change', generation: changeTime - 1 };
    }),
  };
}

/** Longest `jti` kept: identifiers are short; a larger one is no token FxA sends. */
const MAX_JTI_LENGTH = 256;

/** The media type of security event tokens (RFC 8417), with or without `application/`. */
function isSecEventType(typ: unknown): boolean {
  return typeof typ === 'string' && /^(application\/)?secevent\+jwt$/i.test(typ);
}

/**
 * DESIGN §10: a security event token is applied once, and only while fresh. Its
 * replay key (a hash of issuer and jti) and until when (ms) it could be
 * accepted, which is how long the directory remembers it. `iat` must lie within
 * `maxAge` before now and `exp` at most `maxAge` after it (each with the skew),
 * and one of them must be there. `exp` in the past was refused by the verifier.
 */
export function eventTokenWindow(
  claims: Record<string, unknown>,
  header: Record<string, unknown>,
  nowMs: number,
  skewSeconds: number,
  maxAgeSeconds: number,
): { key: string; untilMs: number } {
  if (header.typ !== undefined && !isSecEventType(header.typ)) throw new InvalidCredentials('token "typ" must be secevent+jwt');
  const { jti, iss, iat, exp } = claims;
  if (typeof jti !== 'string' || jti === '' || jti.length > MAX_JTI_LENGTH) throw new InvalidCredentials(`token needs a "jti" of 1 to ${MAX_JTI_LENGTH} characters`);
  const skewMs = skewSeconds * 1000;
  const maxAgeMs = maxAgeSeconds * 1000;
  let untilMs = Infinity;
  if (typeof iat === 'number') {
    if (iat * 1000 - skewMs > nowMs) throw new InvalidTimestamp('token is issued in the future');
    if (iat * 1000 + maxAgeMs + skewMs < nowMs) throw new InvalidTimestamp(`token is older than ${maxAgeSeconds} s`);
    untilMs = iat * 1000 + maxAgeMs + skewMs;
  }
  if (typeof exp === 'number') {
    if (exp * 1000 - skewMs > nowMs + maxAgeMs) throw new InvalidTimestamp(`token expires more than ${maxAgeSeconds} s ahead`);
    untilMs = Math.min(untilMs, exp * 1000 + skewMs);
  }
  if (untilMs === Infinity) throw new InvalidCredentials('token needs "iat" or "exp"');
  const key = createHash('sha256').update(`${typeof iss === 'string' ? iss : ''}\n${jti}`).digest('hex');
  return { key, untilMs: Math.max(Math.ceil(untilMs), nowMs + 1) };
}

/** A JSON body or none: anything else is malformed (400). */
async function checkBody(req: NodeJS.ReadableStream): Promise<void> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new PayloadTooLarge(`at most ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return;
  try {
    JSON.parse(text);
  } catch {
    throw new BadRequest('the body must be JSON (or empty)', { location: 'body', field: 'body' });
  }
}

export function webhookEndpoint(deps: LoginDeps, webhook: WebhookConfig): Middleware[] {
  const { config, backends, log } = deps;
  // The set login keeps (jwks-source.ts startKeySource): a file's, or one fetched from WEBHOOK_JWKS.
  const set = deps.keySources.webhook;
  if (!set) throw new Error('the webhook needs its key set (startKeySource)');
  const verifyJwt = jwtVerifier(
    set,
    'WEBHOOK_JWKS',
    WEBHOOK_ALGORITHMS,
    { audience: webhook.audience, issuer: webhook.issuer, skewSeconds: config.assertionSkew },
    'event token',
  );

  const handleEvents: Middleware = async function handleEvents(ctx) {
    const { name, credentials } = splitAuthorization(authorizationOf(ctx.req));
    if (name.toLowerCase() !== 'bearer') throw new InvalidCredentials('expected Authorization: Bearer <security event token>', { answer: MOZILLA_ERRORS.webhookUnsupportedScheme.entry });
    // Checked even though the event is in the token, so a truncated delivery is a 400, not a silent 200.
    await checkBody(ctx.req);
    const nowMs = Date.now();
    const { header, claims } = await verifyJwt(credentials, nowMs);
    const { key, untilMs } = eventTokenWindow(claims, header, nowMs, config.assertionSkew, webhook.maxAge);
    const { sub, events } = accountEvents(claims);
    const email = `${sub}@${config.oauthEmailDomain}`;
    const requestId = ctx.state.requestId as string;
    // A replay is answered 200, so a sender that retries stops; it changes nothing.
    if (!(await backends.claimEventToken(key, untilMs, requestId))) {
      log.warn({ requestId, event: 'replay' }, 'account event token delivered again: ignored');
      ctx.status = 200;
      ctx.body = '';
      return;
    }
    try {
      await applyEvents(email, events, requestId);
    } catch (err) {
      // Not applied (or not wholly; each event is idempotent): the sender's retry must count as new.
      await backends.releaseEventToken(key, requestId).catch((e: Error) => log.warn({ requestId, err: e.message }, 'could not release an account event token claim'));
      throw err;
    }
    ctx.status = 200;
    ctx.body = '';
  };

  async function applyEvents(email: string, events: AccountEvent[], requestId: string): Promise<void> {
    for (const event of events) {
      if (event.kind === 'delete-user') {
        const retired = await backends.retireUser(email, '', requestId);
        log.info({ requestId, event: 'delete-user', retired: retired.length }, 'account event');
      } else if (event.kind === 'password-change') {
        const raised = await backends.raiseGeneration(email, event.generation, requestId);
        log.info({ requestId, event: 'password-change', raised }, 'account event');
      } else {
        log.info({ requestId, event: event.uri.slice(0, 200) }, 'account event ignored');
      }
    }
  }
  return [allowMethods(['POST']), handleEvents];
}
