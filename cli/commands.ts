// Executes one parsed CLI command: the I/O edge (gRPC through backends.ts,
// the development IdP files, health probes). Parsing is in args.ts, text
// output in format.ts, the glue in run.ts.
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Conflict, ProtocolError, RecordNotFound } from '../lib/errors.js';
import { grpcClient, type ClientAuth } from '../lib/grpc.js';
import type { Node } from '../lib/gen/nodeassign.js';
import { tokenSecrets } from '../lib/token.js';
import type { Command } from './args.js';
import { CliFailure, type Backends, type Globals } from './backends.js';
import { reconcileNodes } from '../services/nodeassign/rules.js';
import { formatNode, formatNodes, formatReconcile, formatRemoved, formatSetup, formatUser, formatUserList, type ReconcileRow } from './format.js';
import { formatPurge, purge } from './purge.js';

export interface Output {
  json: unknown;
  text: string;
  /** Exit status when not 0: the command ran but part of it failed (printed in the output). */
  code?: number;
}

// ---- commands ----

async function findNode(b: Backends, app: string, url: string): Promise<Node | undefined> {
  const { nodes } = await b.rpc('nodeassign', (c) => c.listNodes, { service: app });
  return nodes.find((n) => n.url === url);
}

function present(node: Node | undefined): Node {
  if (!node) throw new CliFailure('the service returned no node');
  return node;
}

async function nodesAdd(b: Backends, cmd: Extract<Command, { kind: 'nodes add' }>): Promise<Output> {
  try {
    const { node } = await b.rpc('nodeassign', (c) => c.addNode, { service: cmd.app, url: cmd.url, capacity: cmd.capacity });
    return { json: { node, created: true }, text: formatNode('registered', present(node)) };
  } catch (e) {
    if (!(e instanceof Conflict) || !cmd.existOk) throw e;
    const node = await findNode(b, cmd.app, cmd.url);
    if (!node) throw e;
    return { json: { node, created: false }, text: formatNode('already registered', node) };
  }
}

async function nodesRemove(b: Backends, cmd: Extract<Command, { kind: 'nodes remove' }>): Promise<Output> {
  let removed: Node | undefined;
  try {
    removed = (await b.rpc('nodeassign', (c) => c.removeNode, { service: cmd.app, url: cmd.url })).node;
  } catch (e) {
    // Still unassign: a retry after a remove whose unassign failed must finish the job.
    if (!(e instanceof RecordNotFound)) throw e;
  }
  const { count } = await b.rpc('directory', (c) => c.unassignNode, { service: cmd.app, node: cmd.url });
  if (!removed && count === 0) throw new CliFailure(`no node ${cmd.url} for ${cmd.app}`);
  return { json: { removed: removed ?? null, unassigned: count }, text: formatRemoved(cmd.app, cmd.url, removed !== undefined, count) };
}

/** dev init: the development IdP key and a TRUSTED_ISSUERS file that trusts it. */
async function devInit(dataDir: string, trustedIssuersFile: string) {
  const { loadOrCreateDevIdp, DEV_IDP_FILE } = await import('../lib/idp.js');
  const idp = await loadOrCreateDevIdp(dataDir);
  // `{"<issuer>": {"keys": […], "domains": ["*"]}}`: the development issuer may certify any address.
  const doc = Object.fromEntries(idp.trustedIssuers);
  await mkdir(path.dirname(trustedIssuersFile), { recursive: true });
  // Write then rename, so a login starting meanwhile never reads half a file.
  const tmp = `${trustedIssuersFile}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(doc, null, 2) + '\n', { mode: 0o644 });
  await rename(tmp, trustedIssuersFile);
  return { issuer: idp.issuer, keyFile: path.join(dataDir, DEV_IDP_FILE), trustedIssuersFile };
}

function devInitText(r: Awaited<ReturnType<typeof devInit>>): string {
  return (
    `development IdP ${r.issuer}: key in ${r.keyFile}\n` +
    `trusted issuers file: ${r.trustedIssuersFile} (login trusts it with TRUSTED_ISSUERS=${r.trustedIssuersFile}; development only)\n`
  );
}

async function setup(b: Backends, cmd: Extract<Command, { kind: 'setup' }>): Promise<Output> {
  const idp = cmd.devIdpDir ? await devInit(cmd.devIdpDir, path.join(cmd.devIdpDir, 'trusted-issuers.json')) : null;
  const results: Array<{ node: Node; created: boolean }> = [];
  for (const app of cmd.apps) {
    // Only an application without nodes gets one: what an operator changed since (removed, replaced) stays.
    const { nodes } = await b.rpc('nodeassign', (c) => c.listNodes, { service: app });
    if (nodes.length > 0) {
      results.push(...nodes.map((node) => ({ node, created: false })));
      continue;
    }
    try {
      const { node } = await b.rpc('nodeassign', (c) => c.addNode, { service: app, url: cmd.url, capacity: cmd.capacity });
      results.push({ node: present(node), created: true });
    } catch (e) {
      // Another setup run got there first.
      if (!(e instanceof Conflict)) throw e;
      results.push({ node: present(await findNode(b, app, cmd.url)), created: false });
    }
  }
  return { json: { nodes: results, devIdp: idp }, text: (idp ? devInitText(idp) : '') + formatSetup(results) };
}

async function health(cmd: Extract<Command, { kind: 'health' }>, deadlineMs: number, auth: ClientAuth): Promise<Output> {
  if (/^https?:\/\//.test(cmd.target)) {
    let res: Response;
    try {
      res = await fetch(cmd.target, { signal: AbortSignal.timeout(deadlineMs), redirect: 'manual' });
      await res.body?.cancel();
    } catch (e) {
      // fetch says only "fetch failed"; the cause says why (ECONNREFUSED, ENOTFOUND …).
      const err = e as Error & { cause?: Error };
      const why = err.name === 'TimeoutError' ? `no answer within ${deadlineMs} ms` : (err.cause?.message ?? err.message);
      throw new CliFailure(`cannot reach ${cmd.target} (${why})`);
    }
    if (!res.ok) throw new CliFailure(`${cmd.target}: unhealthy (HTTP ${res.status})`);
    return { json: { target: cmd.target, healthy: true, status: res.status }, text: `healthy (HTTP ${res.status})\n` };
  }
  const HealthClient = grpc.makeGenericClientConstructor(healthService, 'grpc.health.v1.Health');
  const client = grpcClient(HealthClient, cmd.target, auth);
  try {
    const res = await new Promise<{ status: string }>((resolve, reject) => {
      client.check({ service: cmd.service }, { deadline: Date.now() + deadlineMs }, (err: grpc.ServiceError | null, r: { status: string }) =>
        err ? reject(err) : resolve(r),
      );
    }).catch((err: grpc.ServiceError) => {
      throw new CliFailure(
        err.code === grpc.status.NOT_FOUND ? `${cmd.target}: no service ${JSON.stringify(cmd.service)}` : `cannot reach ${cmd.target} (${err.details || grpc.status[err.code]})`,
      );
    });
    if (res.status !== 'SERVING') throw new CliFailure(`${cmd.target}: ${res.status}`);
    return { json: { target: cmd.target, healthy: true, status: res.status }, text: `${res.status}\n` };
  } finally {
    client.close();
  }
}

/** Rounds of read, count and compare-and-set before a node whose load keeps moving is reported as such. */
const RECONCILE_ROUNDS = 5;

/**
 * Each node's load is read before the records are counted, and nodeassign
 * sets it only if it is still that load: a login that claimed a slot
 * meanwhile makes that node's check fail, and the node is read and counted again.
 */
async function nodesReconcile(b: Backends, cmd: Extract<Command, { kind: 'nodes reconcile' }>): Promise<Output> {
  const rows = new Map<string, ReconcileRow>();
  const key = (service: string, url: string) => JSON.stringify([service, url]);
  let pending: Set<string> | undefined;
  for (let round = 0; round < RECONCILE_ROUNDS && pending?.size !== 0; round++) {
    const { nodes } = await b.rpc('nodeassign', (c) => c.listNodes, { service: cmd.app });
    const { counts } = await b.rpc('directory', (c) => c.countUsers, { service: cmd.app });
    const checks = reconcileNodes(counts, nodes).filter((c) => !pending || pending.has(key(c.service, c.url)));
    const { results } = await b.rpc('nodeassign', (c) => c.reconcileLoads, { checks, dryRun: cmd.dryRun });
    pending = new Set();
    for (const r of results) {
      const check = r.check!;
      rows.set(key(check.service, check.url), { ...check, outcome: r.outcome });
      if (r.outcome === 'changed') pending.add(key(check.service, check.url));
    }
  }
  const list = [...rows.values()];
  return { json: { dryRun: cmd.dryRun, nodes: list }, text: formatReconcile(list), code: list.some((r) => r.outcome === 'changed') ? 1 : 0 };
}

/** Where errors and a long command's progress go: stderr (progress only when it is a terminal). */
export interface ProgressOutput {
  stderr(text: string): void;
  stderrIsTTY?: boolean;
}

export async function execute(cmd: Command, b: Backends, globals: Globals, io?: ProgressOutput): Promise<Output> {
  switch (cmd.kind) {
    case 'nodes add':
      return nodesAdd(b, cmd);
    case 'nodes list': {
      const { nodes } = await b.rpc('nodeassign', (c) => c.listNodes, { service: cmd.app });
      const { counts } = await b.rpc('directory', (c) => c.countUsers, { service: cmd.app });
      const live = (n: Node) => counts.find((c) => c.service === n.service && c.node === n.url)?.live ?? 0;
      const withUsers = nodes.map((n) => ({ ...n, liveUsers: live(n) }));
      return { json: { nodes: withUsers }, text: formatNodes(withUsers) };
    }
    case 'nodes update': {
      const { node } = await b.rpc('nodeassign', (c) => c.updateNode, { service: cmd.app, url: cmd.url, ...cmd.patch });
      return { json: { node }, text: formatNode('updated', present(node)) };
    }
    case 'nodes remove':
      return nodesRemove(b, cmd);
    case 'nodes reconcile':
      return nodesReconcile(b, cmd);
    case 'nodes secret': {
      const secrets = [...tokenSecrets(cmd.tokenSecrets, cmd.masterSecrets, cmd.url)];
      return { json: { app: cmd.app, url: cmd.url, tokenSecrets: cmd.tokenSecrets, secrets }, text: secrets.map((s) => `${s}\n`).join('') };
    }
    case 'users show': {
      const { user } = await b.rpc('directory', (c) => c.getUser, { service: cmd.app, email: cmd.email });
      if (!user) throw new CliFailure('the service returned no user');
      return { json: { user }, text: formatUser(user) };
    }
    case 'users retire': {
      // The directory operation the account-events webhook uses; then each retired uid's slot goes back, as login does.
      const { retired } = await b.rpc('directory', (c) => c.retireUser, { email: cmd.email, service: cmd.app });
      for (const r of retired) if (r.node !== '') await b.rpc('nodeassign', (c) => c.release, { service: r.service, url: r.node });
      const text = retired.length > 0 ? retired.map((r) => `retired ${r.service} uid ${r.uid}${r.node ? ` on ${r.node}` : ''}\n`).join('') : 'nothing to retire (retired already, or no such user)\n';
      return { json: { retired }, text };
    }
    case 'users list': {
      const { users, next } = await b.rpc('directory', (c) => c.listUsers, {
        service: cmd.app,
        node: cmd.node,
        replaced: cmd.replaced,
        limit: cmd.limit,
        after: cmd.after,
      });
      return { json: { users, next: next || null }, text: formatUserList(users, next, cmd.replaced, cmd.node) };
    }
    case 'users purge': {
      const summary = await purge(b, cmd);
      // A node that failed keeps its records for the next run; exit 1 so cron mails about it.
      return { json: summary, text: formatPurge(summary), code: summary.failed.length > 0 ? 1 : 0 };
    }
    case 'backup': {
      const { backupSqlite } = await import('./backup.js');
      const r = await backupSqlite(cmd.source, cmd.file);
      return { json: r, text: `backed up ${r.source} to ${r.file} (${r.pages} pages, ${r.bytes} bytes, integrity ok)\n` };
    }
    case 'import': {
      const { importMozilla, NO_PROGRESS, terminalProgress } = await import('./import.js');
      const { formatImport, importFailed } = await import('./import-rules.js');
      const summary = await importMozilla(b, cmd, io?.stderrIsTTY ? terminalProgress((t) => io.stderr(t)) : NO_PROGRESS);
      // Accounts not imported as Mozilla has them are listed; exit 1 so a script notices.
      return { json: summary, text: formatImport(summary), code: importFailed(summary) ? 1 : 0 };
    }
    case 'setup':
      return setup(b, cmd);
    case 'dev assertion': {
      const { loadOrCreateDevIdp } = await import('../lib/idp.js');
      const idp = await loadOrCreateDevIdp(cmd.dataDir, { generationClaim: cmd.generationClaim });
      const assertion = await idp.makeAssertion(cmd.email, { audience: cmd.audience, generation: cmd.generation, ttlSeconds: cmd.ttlSeconds });
      return {
        json: { assertion, authorization: `Assertion ${assertion}`, issuer: idp.issuer, email: cmd.email, audience: cmd.audience, generation: cmd.generation ?? null },
        text: `${assertion}\n`,
      };
    }
    case 'dev init': {
      const r = await devInit(cmd.dataDir, cmd.trustedIssuersFile);
      return { json: r, text: devInitText(r) };
    }
    case 'health':
      return health(cmd, globals.deadlineMs, globals.auth);
  }
}

export function describe(e: unknown): string {
  if (e instanceof CliFailure) return e.message;
  if (e instanceof ProtocolError) {
    // A server's 5xx detail is generic by design; point at where the real reason is.
    return e.status >= 500 ? `${e.message} (the service's log has the details)` : e.message;
  }
  const err = e as NodeJS.ErrnoException;
  if (err?.code && err.path) return `${err.path}: ${err.message}`;
  return (e as Error)?.message ?? String(e);
}
