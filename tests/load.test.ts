// Load without loss: a mixed run against the whole system (the embedded
// stack) — logins of existing and new users, concurrent first logins of one
// user, client-state changes with generation bumps, refused stale states and
// generations, and Hawk-signed requests through the gateway — checked against
// a model of what each answer must be. Afterwards every user record is read
// back from the directory: one live record per (app, email), live uids
// distinct and never a replaced one, generations never lower, every uid
// handed to one user only.
//
// npm test runs ~5 s closed-loop. The bench's long mode runs it with
// LOAD_SECONDS=60 LOAD_RATE=<req/s> and LOAD_REPORT=<file> (a JSON summary).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { call, grpcClient } from '../lib/grpc.js';
import { TEST_AUTH } from './support/services.js';
import { DirectoryClient } from '../lib/gen/directory.js';
import { nodeSecrets, parseToken } from '../lib/token.js';
import type { HttpResponse } from '../services/login/testkit.js';
import { APP, startTestStack, type TestStack, type Token } from './support/stack.js';

/** Test-run settings from the environment (see the header comment). */
function settings() {
  const num = (name: string, fallback: number) => {
    const v = process.env[name]?.trim();
    if (!v) return fallback;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(v)}`);
    return n;
  };
  return { seconds: num('LOAD_SECONDS', 5), rate: num('LOAD_RATE', Infinity), workers: num('LOAD_WORKERS', 8), report: process.env.LOAD_REPORT?.trim() };
}

interface UserModel {
  email: string;
  uid: number;
  generation: number;
  clientState: string;
  seenStates: string[];
  replacedUids: number[];
  token?: Token;
  /** fxa_kid generations seen in this user's tokens, in order. */
  tokenGenerations: number[];
  busy: boolean;
}

const ACTIONS = ['existing', 'new', 'race', 'change-state', 'stale-state', 'old-generation', 'gateway-get', 'gateway-post'] as const;
type Action = (typeof ACTIONS)[number];
const WEIGHTS: Record<Action, number> = {
  existing: 30,
  new: 10,
  race: 3,
  'change-state': 10,
  'stale-state': 4,
  'old-generation': 3,
  'gateway-get': 25,
  'gateway-post': 15,
};

/** Concurrent first logins in a 'race' action. */
const RACERS = 4;

let stack: TestStack;
let secrets: string[];
const users = new Map<string, UserModel>();
/** uid → the email it was handed to (a uid handed to two users is a loss). */
const uidOwner = new Map<number, string>();
const unexpected: string[] = [];
const statuses: Record<string, number> = {};
/** Answers that matched the model, by action: the run must have exercised every action. */
const matched: Record<string, number> = {};
let requests = 0;
let emails = 0;
const assertions = new Map<string, Promise<string>>();

before(async () => {
  stack = await startTestStack();
  secrets = nodeSecrets(stack.masterSecrets, stack.nodeUrl);
});

after(async () => {
  await stack?.close();
});

/** One assertion per (email, generation), reused while it is valid (the run is far shorter). */
function authorization(email: string, generation: number): Promise<string> {
  const key = `${email}\n${generation}`;
  let a = assertions.get(key);
  if (!a) {
    a = stack.authorization(email, { generation });
    assertions.set(key, a);
  }
  return a;
}

const newState = () => randomBytes(4).toString('hex');

function record(what: string, res: { status: number; text?: string }, ok: boolean, detail = ''): boolean {
  requests++;
  statuses[res.status] = (statuses[res.status] ?? 0) + 1;
  if (ok) matched[what] = (matched[what] ?? 0) + 1;
  if (!ok && unexpected.length < 50) unexpected.push(`${what}: ${res.status} ${detail} ${res.text?.slice(0, 200) ?? ''}`);
  return ok;
}

async function login(email: string, generation: number, clientState: string): Promise<HttpResponse> {
  const headers: Record<string, string> = { Authorization: await authorization(email, generation) };
  if (clientState !== '') headers['X-Client-State'] = clientState;
  return stack.login(email, { headers });
}

function claimUid(uid: number, email: string, what: string): void {
  const owner = uidOwner.get(uid);
  if (owner !== undefined && owner !== email) unexpected.push(`${what}: uid ${uid} handed to ${email} and ${owner}`);
  uidOwner.set(uid, email);
}

/** Checks a 200 token answer against the model and records the token. */
function acceptToken(u: UserModel, res: HttpResponse, what: string): void {
  const t = res.json as Token;
  if (!record(what, res, res.status === 200 && t.uid === u.uid, `expected uid ${u.uid}, got ${t?.uid}`)) return;
  u.token = t;
  const kid = parseToken(t.id, secrets).payload.fxa_kid;
  const generation = typeof kid === 'string' ? Number(kid.split('-')[0]) : NaN;
  const last = u.tokenGenerations.at(-1);
  if (!(generation >= (last ?? 0))) unexpected.push(`${what}: ${u.email} token generation ${generation} after ${last}`);
  u.tokenGenerations.push(generation);
}

async function createUser(what: string, email = `load-${++emails}@example.com`): Promise<UserModel | null> {
  const u: UserModel = { email, uid: -1, generation: 1, clientState: newState(), seenStates: [], replacedUids: [], tokenGenerations: [], busy: true };
  const res = await login(email, u.generation, u.clientState);
  if (res.status !== 200) {
    record(what, res, false);
    return null;
  }
  u.uid = res.json.uid;
  claimUid(u.uid, email, what);
  acceptToken(u, res, what);
  users.set(email, u);
  return u;
}

/** A user no other worker is using, marked busy; null when all are. */
function takeUser(pick: (u: UserModel) => boolean = () => true): UserModel | null {
  const free = [...users.values()].filter((u) => !u.busy && pick(u));
  if (free.length === 0) return null;
  const u = free[Math.floor(Math.random() * free.length)];
  u.busy = true;
  return u;
}

async function act(action: Action): Promise<void> {
  if (action === 'new') {
    const u = await createUser(action);
    if (u) u.busy = false;
    return;
  }
  if (action === 'race') {
    // Concurrent first logins of one user: one record, one uid for all.
    const email = `race-${++emails}@example.com`;
    const state = newState();
    const answers = await Promise.all(Array.from({ length: RACERS }, () => login(email, 1, state)));
    const uids = new Set(answers.map((r) => r.json?.uid));
    for (const r of answers) record(action, r, r.status === 200);
    if (uids.size !== 1) unexpected.push(`race: ${email} got uids ${[...uids].join(', ')}`);
    const uid = answers[0].json?.uid;
    if (typeof uid === 'number') {
      claimUid(uid, email, action);
      users.set(email, { email, uid, generation: 1, clientState: state, seenStates: [], replacedUids: [], tokenGenerations: [1], token: answers[0].json, busy: false });
    }
    return;
  }
  const u = takeUser(action === 'stale-state' ? (x) => x.seenStates.length > 0 : undefined);
  if (!u) return;
  try {
    switch (action) {
      case 'existing':
        acceptToken(u, await login(u.email, u.generation, u.clientState), action);
        break;
      case 'change-state': {
        const state = newState();
        const res = await login(u.email, u.generation + 1, state);
        if (!record(action, res, res.status === 200 && res.json.uid !== u.uid && !uidOwner.has(res.json.uid), `old uid ${u.uid}`)) break;
        u.replacedUids.push(u.uid);
        u.seenStates.push(u.clientState);
        u.uid = res.json.uid;
        u.generation += 1;
        u.clientState = state;
        claimUid(u.uid, u.email, action);
        u.tokenGenerations.push(u.generation);
        u.token = res.json;
        break;
      }
      case 'stale-state': {
        const res = await login(u.email, u.generation + 1, u.seenStates[0]);
        record(action, res, res.status === 401 && res.json?.status === 'invalid-client-state');
        break;
      }
      case 'old-generation': {
        const res = await login(u.email, u.generation - 1, u.clientState);
        record(action, res, res.status === 401 && res.json?.status === 'invalid-generation');
        break;
      }
      case 'gateway-get':
      case 'gateway-post': {
        const body = action === 'gateway-post' ? JSON.stringify({ payload: randomBytes(16).toString('hex') }) : undefined;
        const res = await stack.signed(u.token!, { method: body ? 'POST' : 'GET', path: 'storage/items?full=1', body });
        record(action, res, res.status === 200 && res.json?.uid === String(u.uid) && res.json?.bodyBytes === (body?.length ?? 0), `uid ${u.uid}`);
        break;
      }
    }
  } finally {
    u.busy = false;
  }
}

const credit = Object.fromEntries(ACTIONS.map((a) => [a, 0])) as Record<Action, number>;

/**
 * Smooth weighted round robin: every 100 picks hold each action exactly its
 * weight's times, spread out, so every run exercises every action (the check
 * at the end cannot flake); the workers still interleave them at random.
 */
function pickAction(): Action {
  const total = ACTIONS.reduce((s, a) => s + WEIGHTS[a], 0);
  let best: Action = ACTIONS[0];
  for (const a of ACTIONS) {
    credit[a] += WEIGHTS[a];
    if (credit[a] > credit[best]) best = a;
  }
  credit[best] -= total;
  return best;
}

test('mixed load: no unexpected status, no duplicate or reused uid, generations never lower', async (t) => {
  const s = settings();
  for (let i = 0; i < 30; i++) {
    const u = await createUser('setup');
    assert.ok(u, unexpected.join('\n'));
    u.busy = false;
  }
  // Count the run only.
  requests = 0;
  for (const k of Object.keys(statuses)) delete statuses[k];
  for (const k of Object.keys(matched)) delete matched[k];
  const started = performance.now();
  const deadline = started + s.seconds * 1000;
  let scheduled = 0;
  const worker = async () => {
    while (performance.now() < deadline) {
      if (Number.isFinite(s.rate)) {
        // Paced by requests: the k-th starts at k / rate seconds, whichever worker sends it.
        const action = pickAction();
        const at = started + (scheduled * 1000) / s.rate;
        scheduled += action === 'race' ? RACERS : 1;
        if (at >= deadline) break;
        const wait = at - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        await act(action);
      } else await act(pickAction());
    }
  };
  await Promise.all(Array.from({ length: s.workers }, worker));
  const seconds = (performance.now() - started) / 1000;

  // Every record, read back from the directory.
  const directory = grpcClient(DirectoryClient, stack.directoryAddr, TEST_AUTH);
  const live = new Map<number, string>();
  const replaced = new Set<number>();
  try {
    for (const u of users.values()) {
      const { user } = await call(directory, directory.getUser, { service: APP, email: u.email }, { deadlineMs: 5000, retryAfter: 1 });
      assert.ok(user, u.email);
      assert.equal(user.uid, u.uid, `${u.email}: live uid`);
      assert.equal(user.generation, u.generation, `${u.email}: generation`);
      assert.equal(user.clientState, u.clientState, `${u.email}: client state`);
      assert.deepEqual(user.replaced.map((r) => r.uid), u.replacedUids, `${u.email}: replaced uids`);
      assert.ok(!live.has(user.uid), `uid ${user.uid} live for ${u.email} and ${live.get(user.uid)}`);
      live.set(user.uid, u.email);
      for (const r of user.replaced) {
        assert.ok(!replaced.has(r.uid), `replaced uid ${r.uid} twice`);
        replaced.add(r.uid);
      }
    }
  } finally {
    directory.close();
  }
  for (const uid of live.keys()) assert.ok(!replaced.has(uid), `uid ${uid} is live and replaced`);

  const summary = { seconds: Math.round(seconds * 10) / 10, requests, rate: Math.round(requests / seconds), users: users.size, statuses, matched, unexpected: unexpected.length };
  t.diagnostic(JSON.stringify(summary));
  if (s.report) writeFileSync(s.report, JSON.stringify({ ...summary, firstUnexpected: unexpected.slice(0, 10) }, null, 2) + '\n');
  assert.deepEqual(unexpected, [], 'no unexpected answer');
  assert.ok(requests > 50, `enough requests (${requests})`);
  // Races, state changes, refused stale states…: each must have run and been answered as the model says.
  for (const a of ACTIONS) assert.ok((matched[a] ?? 0) > 0, `action ${a} exercised (answers matching the model: ${JSON.stringify(matched)})`);
});
