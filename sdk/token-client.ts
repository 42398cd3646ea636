// TokenClient: logs in with an assertion, caches the token, follows the
// server's clock and its requests for quiet. The rules are in policy.ts; this
// file does the I/O.
import { BackoffError, InvalidTimestampError, loginErrorFrom, LoginError, ServiceUnavailableError } from './errors.js';
import {
  correctedOffset,
  DEFAULT_RETRY_AFTER,
  gateAfter,
  nextStep,
  OPEN_GATE,
  parseRetryAfter,
  parseSeconds,
  parseTokenBody,
  type CachedToken,
  type Gate,
  type Token,
} from './policy.js';

/**
 * Returns a fresh `cert~assertion` bundle for `audience` (the login URL's
 * origin unless configured). `now` is the server-corrected clock (ms), to
 * date the assertion by; it is called again after an invalid-timestamp.
 */
export type AssertionProvider = (audience: string, context: { now: number }) => Promise<string>;

/**
 * Bearer (DESIGN §9.1): returns a fresh OAuth access token (scope
 * https://identity.mozilla.com/apps/oldsync) and the key id for X-KeyID,
 * `<keys_changed_at>-<base64url client state>`. Called for every login, and
 * again after an invalid-timestamp.
 */
export type AccessTokenProvider = (context: { now: number }) => Promise<{ accessToken: string; keyId: string }>;

interface CommonOptions {
  /** Base URL of the login service, e.g. http://127.0.0.1:8000 */
  loginUrl: string;
  app: string;
  version: string;
  /** Sent as X-Client-State (with Bearer it must name the key id's state, or be left out). */
  clientState?: string;
  /** The `aud` the assertion is made for; default: the login URL's origin. */
  audience?: string;
  /** Ask for a shorter token (`?duration=`), seconds. */
  duration?: number;
  fetch?: typeof fetch;
  /** The local clock in ms; default Date.now. */
  clock?: () => number;
}

/** Log in with assertions (`assertion`) or with access tokens (`accessToken`): exactly one. */
export type TokenClientOptions = CommonOptions & ({ assertion: AssertionProvider; accessToken?: never } | { accessToken: AccessTokenProvider; assertion?: never });

export class TokenClient {
  readonly fetch: typeof fetch;
  readonly audience: string;
  private readonly loginEndpoint: string;
  private readonly clock: () => number;
  private readonly credentials: (now: number) => Promise<Record<string, string>>;
  private clientState: string | undefined;
  private cached: CachedToken | undefined;
  private gate: Gate = OPEN_GATE;
  private offset = 0;
  private inflight: { epoch: number; promise: Promise<Token> } | undefined;
  // Bumped whenever the cache is invalidated, so a login already under way
  // with the old client state does not refill it.
  private epoch = 0;

  constructor(opts: TokenClientOptions) {
    const login = new URL(opts.loginUrl);
    const url = new URL(`${login.href.replace(/\/+$/, '')}/1.0/${encodeURIComponent(opts.app)}/${encodeURIComponent(opts.version)}`);
    if (opts.duration !== undefined) url.searchParams.set('duration', String(opts.duration));
    this.loginEndpoint = url.href;
    this.audience = opts.audience ?? login.origin;
    const { assertion, accessToken } = opts;
    if ((assertion === undefined) === (accessToken === undefined)) throw new TypeError('TokenClient needs exactly one of assertion and accessToken');
    this.credentials = assertion
      ? async (now) => ({ Authorization: `Assertion ${await assertion(this.audience, { now })}` })
      : async (now) => {
          const { accessToken: token, keyId } = await accessToken!({ now });
          return { Authorization: `Bearer ${token}`, 'X-KeyID': keyId };
        };
    this.clientState = opts.clientState;
    this.fetch = opts.fetch ?? globalThis.fetch;
    this.clock = opts.clock ?? Date.now;
  }

  /** The server-corrected time in ms (for assertion expiry and Hawk `ts`). */
  now(): number {
    return this.clock() + this.offset;
  }

  /** Server time minus local time, ms. */
  get clockOffset(): number {
    return this.offset;
  }

  /** Moves the clock to a server time (seconds) learnt from an answer. */
  syncClock(serverSeconds: number): void {
    this.offset = correctedOffset(serverSeconds, this.clock(), this.offset);
  }

  /** Forgets the cached token; the next getToken logs in (backoff permitting). */
  invalidate(): void {
    this.cached = undefined;
    this.epoch++;
  }

  /** A new client state (X-Client-State) for the next login; drops the cached token. */
  setClientState(clientState: string | undefined): void {
    this.clientState = clientState;
    this.invalidate();
  }

  /**
   * A token, from the cache until 80 % of its duration has passed. While the
   * server asked for quiet (X-Backoff, or a 503's Retry-After) no request is
   * made: an unexpired cached token is returned, else this throws
   * BackoffError / ServiceUnavailableError with `retryAfter` seconds. It never
   * sleeps; the caller decides whether to wait.
   */
  async getToken(): Promise<Token> {
    // Concurrent callers share one login, unless the cache was invalidated since it started.
    if (this.inflight?.epoch === this.epoch) return this.inflight.promise;
    const step = nextStep(this.cached, this.gate, this.clock());
    switch (step.kind) {
      case 'cached':
        return step.token;
      case 'backoff':
        throw new BackoffError(step.retryAfter);
      case 'unavailable':
        throw new ServiceUnavailableError(`login service unavailable; retry after ${step.retryAfter} s (no request made)`, null, step.retryAfter);
      case 'login': {
        const inflight = { epoch: this.epoch, promise: this.login() };
        this.inflight = inflight;
        const clear = () => {
          if (this.inflight === inflight) this.inflight = undefined;
        };
        inflight.promise.then(clear, clear);
        return inflight.promise;
      }
    }
  }

  private async login(): Promise<Token> {
    const epoch = this.epoch;
    for (let attempt = 1; ; attempt++) {
      const headers: Record<string, string> = { ...(await this.credentials(this.now())), Accept: 'application/json' };
      if (this.clientState !== undefined) headers['X-Client-State'] = this.clientState;
      const res = await this.fetch(this.loginEndpoint, { headers });
      const receivedAt = this.clock();
      const serverSeconds = parseSeconds(res.headers.get('x-timestamp'));
      if (serverSeconds !== undefined) this.syncClock(serverSeconds);
      const retryAfter = parseRetryAfter(res.headers.get('retry-after'), this.now());
      this.gate = gateAfter(this.gate, { status: res.status, backoff: parseSeconds(res.headers.get('x-backoff')), retryAfter }, receivedAt);
      const body = await readBody(res);

      if (res.status === 200) {
        const token = parseTokenBody(body);
        if (!token) throw new LoginError('login answered 200 without a valid token', 200, 'error', body);
        if (epoch === this.epoch) this.cached = { token, receivedAt };
        return token;
      }
      const err = loginErrorFrom(res.status, body, retryAfter ?? DEFAULT_RETRY_AFTER);
      // The clock has just been corrected from X-Timestamp: one more try with a fresh
      // assertion, unless the same answer asked for quiet.
      if (err instanceof InvalidTimestampError && attempt === 1 && nextStep(undefined, this.gate, receivedAt).kind === 'login') continue;
      if (err instanceof ServiceUnavailableError) {
        const step = nextStep(this.cached, this.gate, receivedAt);
        if (step.kind === 'cached') return step.token;
      }
      throw err;
    }
  }
}

async function readBody(res: Response): Promise<unknown> {
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
