// `import --from mysql://…|postgres://…`: moves a Mozilla tokenserver database
// into our stores over the admin RPCs, keeping every uid. First the source as
// a whole is checked (uid range, a uid on two rows, the e-mail domain), then
// one pass writes nothing and finds every uid another account holds here; only
// when there is none does the writing pass run: the uid counter raised above
// Mozilla's highest uid (ReserveUids), each node written (ImportNode), the
// users table streamed account by account (import-rules.ts resolveAccount) and
// written in batches (ImportUsers). Each write is keyed by the account and
// skips what is there already, so a second run changes nothing and an
// interrupted run continues where it stopped.
import { normalizeEmail } from '../lib/email.js';
import { BadRequest } from '../lib/errors.js';
import type { User } from '../lib/gen/directory.js';
import { CliFailure, type Backends } from './backends.js';
import {
  accounts,
  duplicateUidProblem,
  emailDomainProblem,
  EmailSurvey,
  emptySummary,
  loginSettings,
  plural,
  uidRangeProblem,
  LISTED_PROBLEMS,
  parseNode,
  parseUser,
  progressLine,
  redactUrl,
  resolveAccount,
  RowProblem,
  type ImportSummary,
  type RawUser,
  withPassword,
} from './import-rules.js';
import { openSource, type MozillaSource } from './import-source.js';

export interface ImportOptions {
  /** The database URL (with its password: never printed). */
  from: string;
  /** MYSQL_PWD or PGPASSWORD: the password when the URL has none. */
  password?: string;
  /** Mozilla's service name, e.g. sync-1.5. */
  service: string;
  /** Our application name (by default appOf(service)). */
  app: string;
  dryRun: boolean;
  /** OAUTH_EMAIL_DOMAIN: the accounts' e-mail domain must be this one… */
  emailDomain: string;
  /** …unless --any-email-domain (BrowserID-era accounts under their own addresses). */
  anyEmailDomain: boolean;
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

async function importNodes(b: Backends, src: MozillaSource, serviceId: number, s: ImportSummary, dryRun: boolean): Promise<Map<number, string>> {
  const urls = new Map<number, string>();
  for (const raw of await src.nodes(serviceId)) {
    let parsed;
    try {
      parsed = parseNode(raw, s.app);
      const { result } = await b.rpc('nodeassign', (c) => c.importNode, { node: parsed.node, dryRun });
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

async function writeBatch(b: Backends, batch: User[], s: ImportSummary, dryRun: boolean): Promise<void> {
  if (batch.length === 0) return;
  const { results } = await b.rpc('directory', (c) => c.importUsers, { users: batch, dryRun });
  results.forEach((r, i) => {
    const result = r.result as keyof ImportSummary['users'];
    s.users[result]++;
    if (result === 'kept' || result === 'invalid' || result === 'conflict') {
      const u = batch[i];
      const detail = result === 'kept' ? 'this store has another record of the account (a login here, or other data imported before); it stays' : r.detail;
      problem(s, { what: u.email, uids: [u.uid, ...u.replaced.map((x) => x.uid)].filter((x) => x > 0), result, detail });
    }
  });
}

/** One account's rows as its record, counted in the summary; null when its rows do not fit (reported). */
function resolve(rows: RawUser[], s: ImportSummary, nodeUrls: Map<number, string>): User | null {
  let account;
  try {
    account = resolveAccount(rows.map(parseUser), s.app, (id) => nodeUrls.get(id));
  } catch (e) {
    if (!(e instanceof RowProblem)) throw e;
    s.users.invalid++;
    problem(s, { what: rows[0].email, uids: [], result: 'invalid', detail: e.message });
    return null;
  }
  s.accounts++;
  s.replacedUids += account.user.replaced.length;
  if (account.retired) s.retired++;
  if (account.unassigned) s.unassigned++;
  if (account.severalLive) s.severalLive++;
  s.replacedDropped += account.replacedDropped;
  const spellings = [...new Set(rows.map((r) => r.email))];
  if (spellings.length > 1) {
    s.respelled++;
    if (s.respelledAccounts.length < LISTED_PROBLEMS) {
      s.respelledAccounts.push({ email: account.user.email, spellings, uid: account.user.uid, replacedUids: account.user.replaced.map((r) => r.uid) });
    }
  }
  return account.user;
}

/**
 * The users table, account by account, in batches. Rows of an address that
 * some row spells otherwise (survey.respelled) wait until the end, where all
 * spellings of it are together, and become one account.
 */
async function importUsers(b: Backends, src: MozillaSource, serviceId: number, nodeUrls: Map<number, string>, survey: EmailSurvey, s: ImportSummary, dryRun: boolean, progress: Progress) {
  const total = await src.userRows(serviceId);
  progress.update(0, total);
  let batch: User[] = [];
  const add = async (rows: RawUser[]) => {
    const user = resolve(rows, s, nodeUrls);
    if (!user) return;
    batch.push(user);
    if (batch.length === BATCH) {
      await writeBatch(b, batch, s, dryRun);
      batch = [];
      progress.update(s.rows, total);
    }
  };
  const waiting = new Map<string, RawUser[]>();
  for await (const rows of accounts<RawUser>(src.users(serviceId))) {
    s.rows += rows.length;
    const key = normalizeEmail(rows[0].email);
    if (survey.respelled.has(key)) waiting.set(key, [...(waiting.get(key) ?? []), ...rows]);
    else await add(rows);
  }
  for (const rows of waiting.values()) await add(rows);
  await writeBatch(b, batch, s, dryRun);
  progress.update(s.rows, Math.max(total, s.rows));
}

/** The checks on the whole source, before anything is read into our stores: a refusal names what to fix. */
async function checkSource(src: MozillaSource, serviceId: number, o: ImportOptions): Promise<EmailSurvey> {
  const refused = (why: string | null) => {
    if (why) throw new CliFailure(why);
  };
  refused(uidRangeProblem(await src.maxUid()));
  refused(duplicateUidProblem(await src.duplicateUids(LISTED_PROBLEMS)));
  const survey = new EmailSurvey();
  for await (const { email } of src.emails(serviceId)) survey.add(email);
  refused(emailDomainProblem(survey.domains, o.emailDomain, o.anyEmailDomain));
  return survey;
}

/** One pass over the source: the uid counter, the nodes, the users; a dry pass writes nothing. */
async function importPass(b: Backends, src: MozillaSource, serviceId: number, survey: EmailSurvey, s: ImportSummary, dryRun: boolean, progress: Progress) {
  // Before any record: no uid handed out here from now on can be one of Mozilla's.
  s.uidCounter = await b.rpc('directory', (c) => c.reserveUids, { upTo: Number(await src.maxUid()), dryRun });
  const nodeUrls = await importNodes(b, src, serviceId, s, dryRun);
  await importUsers(b, src, serviceId, nodeUrls, survey, s, dryRun, progress);
}

function conflictRefusal(s: ImportSummary): string {
  const listed = s.problems.filter((p) => p.result === 'conflict').map((p) => `${p.what}: ${p.detail}`);
  return (
    `${plural(s.users.conflict, 'account')} of ${s.source} would share a uid with another account here; nothing was written:\n  ` +
    listed.join('\n  ') +
    (s.users.conflict > listed.length ? `\n  … and ${s.users.conflict - listed.length} more` : '') +
    '\nEach uid names one account\'s data on its node: import each source into a store of its own, or remove the other account first'
  );
}

export async function importMozilla(b: Backends, o: ImportOptions, progress: Progress): Promise<ImportSummary> {
  const source = redactUrl(o.from);
  const summary = () => emptySummary(source, o.service, o.app, o.dryRun, loginSettings(o.emailDomain));
  let src: MozillaSource;
  try {
    src = await openSource(withPassword(o.from, o.password));
  } catch (e) {
    throw new CliFailure(`cannot read ${source}: ${(e as Error).message}`);
  }
  try {
    const serviceId = await src.serviceId(o.service);
    if (serviceId === null) {
      throw new CliFailure(`${source} has no service ${JSON.stringify(o.service)} (it has: ${(await src.serviceNames()).join(', ') || 'none'}); pick one with --service`);
    }
    const survey = await checkSource(src, serviceId, o);
    // First a pass that writes nothing: a uid another account holds here refuses the whole import before any write.
    const dry = summary();
    await importPass(b, src, serviceId, survey, dry, true, o.dryRun ? progress : NO_PROGRESS);
    if (o.dryRun) return dry;
    if (dry.users.conflict > 0) throw new CliFailure(conflictRefusal(dry));
    const s = summary();
    await importPass(b, src, serviceId, survey, s, false, progress);
    return s;
  } finally {
    progress.done();
    await src.close().catch(() => undefined);
  }
}
