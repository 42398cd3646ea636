// `users purge` (issue #10): for every replaced record older than the grace
// period, delete the uid's data on its node (a Hawk-signed DELETE through the
// node's gateway, with a token minted here for that uid and node), then the
// record, then give its node slot back. The directory's claim (a lease on the
// record) keeps a concurrent purger off it; a node that fails keeps the record
// for the next run. Each user's seen client states are trimmed on the way.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { RecordNotFound } from '../lib/errors.js';
import type { ReplacedUser, User } from '../lib/gen/directory.js';
import { hawkHeader } from '../lib/hawk.js';
import { accountIdKey, makeToken, newSalt, tokenSecrets, type TokenSecretsMode } from '../lib/token.js';
import { accountId, apiEndpoint } from '../services/login/rules.js';
import type { Backends } from './backends.js';

export interface PurgeOptions {
  /** '' = every application. */
  app: string;
  graceMs: number;
  /** Most replaced records purged in this run. */
  max: number;
  dryRun: boolean;
  skipNodeDelete: boolean;
  keepClientStates: number;
  /** How long a claim keeps other purgers off a record, ms. */
  leaseMs: number;
  /** Node deletes: secrets, the versions of each application, the FxA domain; unused with skipNodeDelete. */
  masterSecrets: string[];
  /** TOKEN_SECRETS: the node checks the purger's token as it checks login's. */
  tokenSecrets: TokenSecretsMode;
  versions: Map<string, Set<string>>;
  oauthEmailDomain: string;
  deadlineMs: number;
}

export interface PurgeFailure {
  app: string;
  uid: number;
  node: string;
  error: string;
}

/** A replaced uid a dry run would purge. */
export interface PurgeCandidate {
  app: string;
  email: string;
  uid: number;
  /** '' when the uid never had a node (nothing to delete there). */
  node: string;
  /** ms since epoch */
  replacedAt: number;
}

export interface PurgeSummary {
  dryRun: boolean;
  /** Dry run only: every replaced uid it would purge, in the order a run would take them. */
  wouldPurge: PurgeCandidate[];
  usersExamined: number;
  /** Replaced records past the grace period that this run found. */
  due: number;
  /** Records removed (dry run: that would be). */
  purged: number;
  /** Node DELETEs that answered 2xx. */
  nodeDeletes: number;
  slotsReleased: number;
  /** Held by another purger's running claim. */
  busy: number;
  failed: PurgeFailure[];
  clientStatesTrimmed: number;
}

/** One purger's name for its claims: unique per run. */
export function claimantId(): string {
  return `${hostname()}/${process.pid}/${randomBytes(6).toString('hex')}`;
}

/**
 * The request that deletes `entry`'s data on its node for one application
 * version: DELETE <node>/<version>/<uid>, signed with a short token for that uid
 * and node, as a client of the gateway would.
 */
export function nodeDeleteRequest(
  user: Pick<User, 'email'>,
  entry: Pick<ReplacedUser, 'uid' | 'node'>,
  version: string,
  o: Pick<PurgeOptions, 'masterSecrets' | 'tokenSecrets' | 'oauthEmailDomain'>,
  nowSeconds: number,
): { url: string; authorization: string } {
  const secret = tokenSecrets(o.tokenSecrets, o.masterSecrets, entry.node)[0];
  const { id, key } = makeToken(
    {
      uid: entry.uid,
      node: entry.node,
      expires: Math.floor(nowSeconds) + 300,
      salt: newSalt(),
      fxa_uid: accountId(user.email, o.oauthEmailDomain, accountIdKey(o.masterSecrets[0])),
    },
    secret,
  );
  const url = apiEndpoint(entry.node, version, entry.uid);
  return { url, authorization: hawkHeader({ id, key, method: 'DELETE', url }) };
}

/** For a 3xx answer, where it pointed: the summary says the redirect was not followed. */
function redirectNote(res: Response): string {
  if (res.status < 300 || res.status > 399) return '';
  const location = res.headers.get('location');
  return `, a redirect${location ? ` to ${location}` : ''} (not followed)`;
}

async function deleteOnNode(user: User, entry: ReplacedUser, o: PurgeOptions): Promise<void> {
  const versions = o.versions.get(user.service);
  if (!versions || versions.size === 0) throw new Error(`no version of ${user.service} in APPLICATIONS`);
  for (const version of versions) {
    const { url, authorization } = nodeDeleteRequest(user, entry, version, o, Date.now() / 1000);
    let res: Response;
    try {
      // Never followed: a node's redirect would send this DELETE, for this uid, wherever it points.
      res = await fetch(url, { method: 'DELETE', headers: { Authorization: authorization }, signal: AbortSignal.timeout(o.deadlineMs), redirect: 'manual' });
      await res.body?.cancel();
    } catch (e) {
      const err = e as Error & { cause?: Error };
      throw new Error(err.name === 'TimeoutError' ? `no answer within ${o.deadlineMs} ms` : (err.cause?.message ?? err.message));
    }
    // 404: nothing there (never written, or purged before) is as good as deleted.
    if (!res.ok && res.status !== 404) throw new Error(`DELETE ${url}: HTTP ${res.status}${redirectNote(res)}`);
  }
}

export async function purge(b: Backends, o: PurgeOptions): Promise<PurgeSummary> {
  const s: PurgeSummary = { dryRun: o.dryRun, wouldPurge: [], usersExamined: 0, due: 0, purged: 0, nodeDeletes: 0, slotsReleased: 0, busy: 0, failed: [], clientStatesTrimmed: 0 };
  const claimant = claimantId();
  const replacedBefore = Date.now() - o.graceMs;
  let after = '';
  do {
    const page = await b.rpc('directory', (c) => c.listUsers, { service: o.app, replaced: false, limit: 100, after });
    after = page.next;
    for (const user of page.users) {
      s.usersExamined++;
      const excess = user.seenClientStates.length - o.keepClientStates;
      if (excess > 0) {
        s.clientStatesTrimmed += o.dryRun
          ? excess
          : (await b.rpc('directory', (c) => c.trimClientStates, { service: user.service, email: user.email, max: o.keepClientStates })).removed;
      }
      for (const entry of user.replaced) {
        if (entry.replacedAt > replacedBefore) continue;
        s.due++;
        if (s.purged + s.failed.length >= o.max) continue;
        if (o.dryRun) {
          s.purged++;
          s.wouldPurge.push({ app: user.service, email: user.email, uid: entry.uid, node: entry.node, replacedAt: entry.replacedAt });
          continue;
        }
        await purgeOne(b, o, s, claimant, user, entry, replacedBefore);
      }
    }
  } while (after !== '');
  return s;
}

async function purgeOne(b: Backends, o: PurgeOptions, s: PurgeSummary, claimant: string, user: User, entry: ReplacedUser, replacedBefore: number) {
  const target = { service: user.service, email: user.email, uid: entry.uid, claimant };
  const claimed = await b.rpc('directory', (c) => c.claimReplaced, { ...target, leaseMs: o.leaseMs, replacedBefore });
  if (!claimed.claimed) {
    // "gone": another purger finished it since the listing.
    if (claimed.reason === 'claimed') s.busy++;
    return;
  }
  if (entry.node !== '' && !o.skipNodeDelete) {
    try {
      await deleteOnNode(user, entry, o);
      s.nodeDeletes++;
    } catch (e) {
      // The record stays for the next run. Renewing the claim for 1 ms hands it back now, so
      // that run need not wait out the lease; if this fails, the lease runs out by itself.
      s.failed.push({ app: user.service, uid: entry.uid, node: entry.node, error: (e as Error).message });
      await b.rpc('directory', (c) => c.claimReplaced, { ...target, leaseMs: 1, replacedBefore }).catch(() => undefined);
      return;
    }
  }
  const deleted = await b.rpc('directory', (c) => c.deleteReplaced, target);
  if (!deleted.deleted) return;
  s.purged++;
  if (!deleted.releaseSlot) return;
  try {
    await b.rpc('nodeassign', (c) => c.release, { service: user.service, url: deleted.node });
    s.slotsReleased++;
  } catch (e) {
    // A removed node has no slots to give back.
    if (!(e instanceof RecordNotFound)) throw e;
  }
}

export function formatPurge(s: PurgeSummary): string {
  const lines = [
    `${s.dryRun ? 'dry run: would purge' : 'purged'} ${s.purged} of ${s.due} replaced records past the grace period (${s.usersExamined} users examined)`,
    `node deletes: ${s.nodeDeletes}, node slots given back: ${s.slotsReleased}, held by another purge: ${s.busy}`,
    `seen client states ${s.dryRun ? 'to trim' : 'trimmed'}: ${s.clientStatesTrimmed}`,
  ];
  for (const c of s.wouldPurge) {
    lines.push(`  would purge ${c.app} uid ${c.uid} of ${c.email}, ${c.node === '' ? 'no node' : `on ${c.node}`}, replaced ${new Date(c.replacedAt).toISOString()}`);
  }
  if (s.failed.length > 0) {
    lines.push(`failed (kept for the next run): ${s.failed.length}`);
    for (const f of s.failed) lines.push(`  ${f.app} uid ${f.uid} on ${f.node}: ${f.error}`);
  }
  return lines.join('\n') + '\n';
}
