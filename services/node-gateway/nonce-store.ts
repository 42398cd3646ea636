// Where the gateway remembers Hawk nonces (NONCE_STORE). Both stores keep the
// same rule: a (token, ts, nonce) is accepted once, and is remembered until its
// timestamp could no longer pass the skew check; a full share or store refuses
// the new request (503) rather than forget a nonce early.
//  - memory (NonceCache): one gateway process per node; synchronous, no promise.
//  - redis (RedisNonceStore): shared by every gateway of a node, one round trip.
import type { GatewayConfig } from '../../lib/config.js';
import type { Logger } from '../../lib/log.js';
import { NonceCache } from './nonces.js';
import { RedisNonceStore } from './redis-nonces.js';

export type NonceOutcome = 'new' | 'replayed' | 'token-full' | 'cache-full';

/**
 * A refusal for lack of room says when there will be some. `unknown`: the
 * request's window opened before the store's epoch began (a shared store that
 * lost nonces), so whether it is a replay cannot be told.
 */
export type NonceVerdict = { outcome: 'new' } | { outcome: 'replayed' } | { outcome: 'token-full' | 'cache-full' | 'unknown'; retryAfter: number };

export interface NonceStore {
  readonly kind: 'memory' | 'redis';
  /**
   * Remembers (id, ts, nonce) of a request that passed every other check, or
   * says why not. Synchronous for the memory store; a shared store answers
   * with a promise that rejects with ServiceUnavailable when it cannot answer.
   */
  remember(id: string, nonce: string, ts: string, nowMs: number): NonceVerdict | Promise<NonceVerdict>;
  /** Whether requests can be checked now (the heartbeat asks). */
  healthy(): Promise<boolean>;
  close(): Promise<void>;
}

/** The store NONCE_STORE names; a shared one is connected (or found unreachable) before this returns. */
export async function openNonceStore(config: GatewayConfig, log: Logger): Promise<NonceStore> {
  if (config.nonceStore.kind === 'memory') {
    return new NonceCache({ capacity: config.nonceCacheSize, perToken: config.noncePerToken, skewSeconds: config.hawkSkew });
  }
  return RedisNonceStore.open(config.nonceStore, { perToken: config.noncePerToken, skewSeconds: config.hawkSkew, retryAfter: config.retryAfter }, log);
}
