// `users purge` end to end (issue #10 item 2): the embedded stack (login,
// directory, nodeassign over real gRPC, SQLite, the gateway) with the demo
// application behind the gateway; the CLI runs in this process (runCli) and
// deletes replaced uids' data with Hawk-signed DELETEs through the gateway.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startDemoApp, type DemoApp } from '../services/demo-app/server.js';
import { APP, stackCli, startTestStack, type TestStack } from './support/stack.js';

let stack: TestStack;
let demo: DemoApp;
/** What reached the application: method, path, the uid the gateway vouched for. */
const seen: Array<{ method: string; path: string; uid: string | undefined }> = [];

before(async () => {
  demo = await startDemoApp();
  demo.server.on('request', (req: IncomingMessage) => {
    seen.push({ method: req.method ?? '', path: req.url ?? '', uid: req.headers['x-authenticated-uid'] as string | undefined });
  });
  stack = await startTestStack({ UPSTREAM_URL: demo.url });
});
after(async () => {
  await stack.close();
  await demo.close();
});

const cli = (...argv: string[]) => stackCli(stack, argv);

async function loginUid(email: string, clientState?: string): Promise<number> {
  const res = await stack.login(email, { clientState });
  assert.equal(res.status, 200, res.text);
  return (res.json as { uid: number }).uid;
}

async function nodeLoad(): Promise<number> {
  const r = await cli('nodes', 'list', APP, '--json');
  return r.json.nodes[0].currentLoad;
}

const deletes = () => seen.filter((s) => s.method === 'DELETE');

const urlOf = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

test('purge deletes the data of replaced uids on their node through the gateway, then the records; a second run finds nothing', async () => {
  const first = await loginUid('purge-a@example.com', 'aa');
  const second = await loginUid('purge-a@example.com', 'bb');
  assert.notEqual(first, second);
  const loadBefore = await nodeLoad();

  // Within the grace period nothing is due.
  const early = await cli('users', 'purge', '--grace', '1h', '--json');
  assert.equal(early.code, 0, early.stderr);
  assert.equal(early.json.due, 0);

  const dry = await cli('users', 'purge', '--grace', '0', '--dry-run', '--json');
  assert.equal(dry.json.purged, 1);
  assert.deepEqual(
    dry.json.wouldPurge.map((c: { app: string; email: string; uid: number; node: string }) => [c.app, c.email, c.uid, c.node]),
    [[APP, 'purge-a@example.com', first, stack.gatewayUrl]],
    'a dry run lists the uids it would purge',
  );
  const dryText = await cli('users', 'purge', '--grace', '0', '--dry-run');
  assert.match(dryText.stdout, new RegExp(`^  would purge ${APP} uid ${first} of purge-a@example\\.com, on ${stack.gatewayUrl.replace(/[.]/g, '\\.')}, replaced \\d{4}-`, 'm'));
  assert.equal(deletes().length, 0, 'a dry run deletes nothing');

  const run = await cli('users', 'purge', '--grace', '0', '--json');
  assert.equal(run.code, 0, run.stderr + run.stdout);
  assert.equal(run.json.purged, 1);
  assert.equal(run.json.nodeDeletes, 1);
  // The new uid landed on the same node, so login gave the old uid's slot back already.
  assert.equal(run.json.slotsReleased, 0);
  // The gateway checked the purger's token and Hawk signature, and vouched for the old uid only.
  assert.deepEqual(deletes(), [{ method: 'DELETE', path: `/1.5/${first}`, uid: String(first) }]);
  const user = await cli('users', 'show', APP, 'purge-a@example.com', '--json');
  assert.equal(user.json.user.uid, second, 'the live record is untouched');
  assert.deepEqual(user.json.user.replaced, []);
  assert.equal(await nodeLoad(), loadBefore);

  const again = await cli('users', 'purge', '--grace', '0', '--json');
  assert.equal(again.json.due, 0);
  assert.equal(again.json.purged, 0);
  assert.equal(deletes().length, 1);
  const text = await cli('users', 'purge', '--grace', '0');
  assert.match(text.stdout, /^purged 0 of 0 replaced records/);
});

test('purge trims seen client states to the configured maximum, oldest first', async () => {
  for (const s of ['s1', 's2', 's3', 's4']) await loginUid('purge-trim@example.com', s);
  const run = await cli('users', 'purge', '--app', APP, '--grace', '1h', '--keep-client-states', '2', '--json');
  assert.equal(run.code, 0, run.stderr);
  assert.ok(run.json.clientStatesTrimmed >= 1);
  const user = await cli('users', 'show', APP, 'purge-trim@example.com', '--json');
  assert.deepEqual(user.json.user.seenClientStates, ['s2', 's3']);
  // DESIGN §3 rule 3 still holds for the values kept.
  const stale = await stack.login('purge-trim@example.com', { clientState: 's3' });
  assert.equal(stale.status, 401);
  assert.equal((stale.json as { status: string }).status, 'invalid-client-state');
});

/**
 * Gives `email` a uid on `node` (added already; the gateway's node is down meanwhile), then
 * replaces it with one on the gateway's node (`node` down meanwhile). Returns the replaced uid.
 */
async function uidReplacedOn(node: string, email: string): Promise<number> {
  await cli('nodes', 'down', APP, stack.nodeUrl);
  let old: number;
  try {
    old = await loginUid(email, 'aa');
  } finally {
    await cli('nodes', 'up', APP, stack.nodeUrl);
  }
  await cli('nodes', 'down', APP, node);
  await loginUid(email, 'bb');
  return old;
}

test("a node that fails keeps its records for the next run (exit 1); a purged uid on another node gives its slot back", async () => {
  await cli('users', 'purge', '--grace', '0');
  // A second node nobody listens on, where the user's first uid goes.
  const dead = 'http://127.0.0.1:9';
  assert.equal((await cli('nodes', 'add', APP, dead, '--capacity', '10')).code, 0);
  const deadLoad = async () => (await cli('nodes', 'list', APP, '--json')).json.nodes.find((n: { url: string }) => n.url === dead).currentLoad;
  try {
    const old = await uidReplacedOn(dead, 'purge-dead@example.com');
    assert.equal(await deadLoad(), 1);
    const run = await cli('users', 'purge', '--grace', '0', '--json');
    assert.equal(run.code, 1);
    assert.equal(run.json.purged, 0);
    assert.deepEqual(run.json.failed.map((f: { uid: number; node: string }) => [f.uid, f.node]), [[old, dead]]);
    assert.match((await cli('users', 'purge', '--grace', '0')).stdout, /failed \(kept for the next run\): 1\n {2}sync uid \d+ on http:\/\/127\.0\.0\.1:9: /);
    const user = await cli('users', 'show', APP, 'purge-dead@example.com', '--json');
    assert.deepEqual(user.json.user.replaced.map((r: { uid: number }) => r.uid), [old], 'kept until the node confirms');
    // Without the node delete (the node is gone for good) the record goes, and its slot with it.
    const skip = await cli('users', 'purge', '--grace', '0', '--skip-node-delete', '--json');
    assert.equal(skip.code, 0);
    assert.equal(skip.json.purged, 1);
    assert.equal(skip.json.slotsReleased, 1);
    assert.equal(await deadLoad(), 0);
  } finally {
    await cli('nodes', 'remove', APP, dead);
  }
});

test('a node that answers with a redirect: the DELETE is not followed, the record stays, the summary says why (exit 1)', async () => {
  await cli('users', 'purge', '--grace', '0');
  // Whatever a redirect points at: here a server that would count what reaches it and answer 204.
  const reached: string[] = [];
  const elsewhere = createServer((req, res) => {
    reached.push(`${req.method} ${req.url}`);
    res.writeHead(204).end();
  });
  const redirecting = createServer((req, res) => {
    res.writeHead(307, { Location: `${urlOf(elsewhere)}${req.url}` }).end();
  });
  await Promise.all([elsewhere, redirecting].map((s) => new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))));
  const node = urlOf(redirecting);
  assert.equal((await cli('nodes', 'add', APP, node, '--capacity', '10')).code, 0);
  try {
    const old = await uidReplacedOn(node, 'purge-redirect@example.com');
    const run = await cli('users', 'purge', '--grace', '0', '--json');
    assert.equal(run.code, 1, run.stdout);
    assert.equal(run.json.purged, 0);
    assert.equal(run.json.nodeDeletes, 0);
    assert.deepEqual(run.json.failed, [
      {
        app: APP,
        uid: old,
        node,
        error: `DELETE ${node}/1.5/${old}: HTTP 307, a redirect to ${urlOf(elsewhere)}/1.5/${old} (not followed)`,
      },
    ]);
    assert.deepEqual(reached, [], 'nothing reached the address the node pointed at');
    const user = await cli('users', 'show', APP, 'purge-redirect@example.com', '--json');
    assert.deepEqual(user.json.user.replaced.map((r: { uid: number }) => r.uid), [old], 'kept until the node itself confirms');
  } finally {
    // The node is not coming back: its record goes without the node delete.
    await cli('users', 'purge', '--grace', '0', '--skip-node-delete');
    await cli('nodes', 'remove', APP, node);
    await Promise.all([elsewhere, redirecting].map((s) => new Promise((resolve) => s.close(resolve))));
  }
});

test('a purge racing with logins and another purge loses no live record and deletes no live uid', async () => {
  const emails = Array.from({ length: 6 }, (_, i) => `race${i}@example.com`);
  const live = new Map<string, number>();
  for (const e of emails) live.set(e, await loginUid(e, 'c0'));
  const before = deletes().length;
  const churn = async (email: string) => {
    for (let i = 1; i <= 4; i++) live.set(email, await loginUid(email, `c${i}`));
  };
  const purges = [cli('users', 'purge', '--grace', '0', '--json'), cli('users', 'purge', '--grace', '0', '--json')];
  const [p1, p2] = await Promise.all([Promise.all(purges), ...emails.map(churn)]).then(([p]) => p);
  assert.equal(p1.code, 0, p1.stderr);
  assert.equal(p2.code, 0, p2.stderr);
  // Whatever is left is purged now; then compare with what the users hold.
  await cli('users', 'purge', '--grace', '0', '--json');
  const deleted = deletes().slice(before).map((d) => Number(d.uid));
  assert.equal(new Set(deleted).size, deleted.length, 'no uid deleted twice');
  for (const [email, uid] of live) {
    const user = (await cli('users', 'show', APP, email, '--json')).json.user;
    assert.equal(user.uid, uid, `${email}: its live uid is the last one login gave`);
    assert.deepEqual(user.replaced, []);
    assert.ok(!deleted.includes(uid), `${email}: its live uid's data was never deleted`);
  }
  assert.equal(deleted.length, emails.length * 4, 'every replaced uid was deleted once');
});

test('users retire: the live record becomes a replaced one, its slot goes back, the next login gets a new uid; idempotent; then purged', async () => {
  const uid = await loginUid('retire@example.com');
  const loadBefore = await nodeLoad();
  const r = await cli('users', 'retire', APP, 'retire@example.com', '--json');
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(r.json.retired.map((x: { uid: number }) => x.uid), [uid]);
  assert.equal(await nodeLoad(), loadBefore - 1);
  const again = await cli('users', 'retire', APP, 'retire@example.com');
  assert.equal(again.code, 0);
  assert.match(again.stdout, /nothing to retire/);
  assert.equal(await nodeLoad(), loadBefore - 1, 'a second retire gives nothing back');
  const before = deletes().length;
  const purged = await cli('users', 'purge', '--grace', '0', '--json');
  assert.equal(purged.code, 0, purged.stderr);
  assert.ok(deletes().slice(before).some((d) => d.uid === String(uid)), "the retired uid's data is deleted on its node");
  assert.equal(purged.json.slotsReleased, 0, 'retire gave the slot back already');
  const next = await loginUid('retire@example.com');
  assert.notEqual(next, uid);
});
