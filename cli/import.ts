// `import --from mysql://…|postgres://…`: moves a Mozilla tokenserver database
// into our stores over the admin RPCs, keeping every uid. First the uid counter
// is raised above Mozilla's highest uid (ReserveUids), then each node is
// written (ImportNode), then the users table is streamed account by account
// (import-rules.ts resolveAccount) and written in batches (ImportUsers). Each
// write is keyed by the account and skips what is there already, so a second
// run changes nothing and an interrupted run continues where it stopped.
import { BadRequest } from '../lib/errors.js';
import type { User } from '../lib/gen/directory.js';
import { CliFailure, type Backends } from './backends.js';
import {
  accounts,
  emptySummary,
  LISTED_PROBLEMS,
  parseNode,
  parseUser,
  progressLine,
  redactUrl,
  resolveAccount,
  RowProblem,
  type ImportSummary,
  type RawUser,
} from './import-rules.js';
import { openSource, type MozillaSource } from './import-source.js';

export interface ImportOptions {
  /** The database URL (with its password: never printed). */
  from: string;
  /** Mozilla's service name, e.g. sync-1.5. */
  service: string;
  /** Our application name (by default appOf(service)). */
  app: string;
  dryRun: boolean;
}

/** Where progress goes: a line redrawn in place, only on a terminal. */
export interface Progress {
  update(done: number, total: number): void;
  done(): void;
}

/** Users per ImportUsers call (the directory takes at most 256). */
const BATCH = 200;
/** Redraws per second at most. */
const PROGRESS_MS = 100;

export function terminalProgress(write: (text: string) => void): Progress {
  let last = 0;
  let drawn = false;
  return {
    update(done, total) {
      const now = Date.now();
      if (now - last < PROGRESS_MS && done < total) return;
      last = now;
      drawn = true;
      write(`\r${progressLine(done, total)}`);
    },
    done() {
      // Clears the line, so the summary starts on a clean one.
      if (drawn) write('\r\x1b[K');
    },
  };
}

export const NO_PROGRESS: Progress = { update: () => undefined, done: () => undefined };

function problem(s: ImportSummary, p: ImportSummary['problems'][number]): void {
  if (s.problems.length < LISTED_PROBLEMS) s.problems.push(p);
}

async function importNodes(b: Backends, src: MozillaSource, serviceId: number, s: ImportSummary): Promise<Map<number, string>> {
  const urls = new Map<number, string>();
  for (const raw of await src.nodes(serviceId)) {
    let parsed;
    try {
      parsed = parseNode(raw, s.app);
      const { result } = await b.rpc('nodeassign', (c) => c.importNode, { node: parsed.node, dryRun: s.dryRun });
      s.nodes[result as 'created' | 'updated' | 'unchanged']++;
      urls.set(parsed.id, parsed.node.url);
    } catch (e) {
      // A node we cannot take (a URL our tokens cannot carry): its users get a node at their next login.
      if (!(e instanceof RowProblem) && !(e instanceof BadRequest)) throw e;
      s.nodes.invalid++;
      problem(s, { what: `node ${raw.node}`, uids: [], result: 'invalid', detail: (e as Error).message });
    }
  }
  return urls;
}

async function writeBatch(b: Backends, batch: User[], s: ImportSummary): Promise<void> {
  if (batch.length === 0) return;
  const { results } = await b.rpc('directory', (c) => c.importUsers, { users: batch, dryRun: s.dryRun });
  results.forEach((r, i) => {
    const result = r.result as keyof ImportSummary['users'];
    s.users[result]++;
    if (result === 'kept' || result === 'invalid') {
      const u = batch[i];
      const detail = result === 'kept' ? 'this store has another record of the account (a login here, or other data imported before); it stays' : r.detail;
      problem(s, { what: u.email, uids: [u.uid, ...u.replaced.map((x) => x.uid)].filter((x) => x > 0), result, detail });
    }
  });
}

async function importUsers(b: Backends, src: MozillaSource, serviceId: number, nodeUrls: Map<number, string>, s: ImportSummary, progress: Progress) {
  const total = await src.userRows(serviceId);
  progress.update(0, total);
  let batch: User[] = [];
  for await (const rows of accounts<RawUser>(src.users(serviceId))) {
    s.rows += rows.length;
    s.accounts++;
    let account;
    try {
      account = resolveAccount(rows.map(parseUser), s.app, (id) => nodeUrls.get(id));
    } catch (e) {
      if (!(e instanceof RowProblem)) throw e;
      s.users.invalid++;
      problem(s, { what: rows[0].email, uids: [], result: 'invalid', detail: e.message });
      continue;
    }
    s.replacedUids += account.user.replaced.length;
    if (account.retired) s.retired++;
    if (account.unassigned) s.unassigned++;
    if (account.severalLive) s.severalLive++;
    s.replacedDropped += account.replacedDropped;
    batch.push(account.user);
    if (batch.length === BATCH) {
      await writeBatch(b, batch, s);
      batch = [];
      progress.update(s.rows, total);
    }
  }
  await writeBatch(b, batch, s);
  progress.update(s.rows, Math.max(total, s.rows));
}

export async function importMozilla(b: Backends, o: ImportOptions, progress: Progress): Promise<ImportSummary> {
  const source = redactUrl(o.from);
  const s = emptySummary(source, o.service, o.app, o.dryRun);
  let src: MozillaSource;
  try {
    src = await openSource(o.from);
  } catch (e) {
    throw new CliFailure(`cannot read ${source}: ${(e as Error).message}`);
  }
  try {
    const serviceId = await src.serviceId(o.service);
    if (serviceId === null) {
      throw new CliFailure(`${source} has no service ${JSON.stringify(o.service)} (it has: ${(await src.serviceNames()).join(', ') || 'none'}); pick one with --service`);
    }
    // Before any record: no uid handed out here from now on can be one of Mozilla's.
    s.uidCounter = await b.rpc('directory', (c) => c.reserveUids, { upTo: await src.maxUid(), dryRun: o.dryRun });
    const nodeUrls = await importNodes(b, src, serviceId, s);
    await importUsers(b, src, serviceId, nodeUrls, s, progress);
    return s;
  } finally {
    progress.done();
    await src.close().catch(() => undefined);
  }
}
