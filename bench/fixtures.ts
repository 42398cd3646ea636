// What the login benchmarks share: a trusted issuer, a pool of users each
// with its own key, certificate and pre-made assertions, the login service's
// environment, and the node it hands out.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Env } from '../lib/config.js';
import { call, grpcClient } from '../lib/grpc.js';
import { NodeAssignClient } from '../lib/gen/nodeassign.js';
import { bundle, generateKey, signAssertion, signCertificate } from '../lib/idp.js';
import type { RequestSpec } from './load.js';
import { BENCH_AUTH } from './proc.js';

export const APP = 'sync';
export const VERSION = '1.5';
export const TOKEN_PATH = `/1.0/${APP}/${VERSION}`;
export const NODE_URL = 'http://bench-node.example';
const ISSUER = 'bench-idp.example';
const AUDIENCE = 'http://login.bench.example';
/** Certificates and assertions outlive any run. */
const TTL_SECONDS = 4 * 3600;

export interface LoginFixture {
  /** The login service's environment (without the backend addresses). */
  env: Env;
  /** One token request per assertion, users interleaved, as a JSON file for bench/load.ts. */
  requestsFile: string;
  requests: RequestSpec[];
  emails: string[];
}

/**
 * `users` users with `assertionsPerUser` distinct assertions each. Every user
 * has an own ES256 key, as real clients do, so the verifier's certificate
 * cache holds one entry per user.
 */
export async function loginFixture(dir: string, users: number, assertionsPerUser = 2, emailPrefix = 'bench'): Promise<LoginFixture> {
  const issuer = await generateKey('ES256');
  const trustedFile = path.join(dir, 'trusted-issuers.json');
  writeFileSync(trustedFile, JSON.stringify({ [ISSUER]: { keys: [issuer.publicJwk], domains: ['users.bench.example'] } }));
  const emails = Array.from({ length: users }, (_, i) => `${emailPrefix}${i}@users.bench.example`);
  const perUser = await Promise.all(
    emails.map(async (email) => {
      const key = await generateKey('ES256');
      const cert = await signCertificate(issuer, { issuer: ISSUER, email, publicKey: key.publicJwk, ttlSeconds: TTL_SECONDS });
      const out: string[] = [];
      for (let i = 0; i < assertionsPerUser; i++) {
        // A distinct exp per assertion makes each one a distinct string.
        out.push(bundle(cert, await signAssertion(key, { audience: AUDIENCE, expMs: Date.now() + TTL_SECONDS * 1000 + i })));
      }
      return out;
    }),
  );
  const requests: RequestSpec[] = [];
  for (let i = 0; i < assertionsPerUser; i++) {
    for (const assertions of perUser) requests.push({ path: TOKEN_PATH, headers: { authorization: `Assertion ${assertions[i]}` } });
  }
  const requestsFile = path.join(dir, 'login-requests.json');
  writeFileSync(requestsFile, JSON.stringify(requests));
  return {
    env: {
      APPLICATIONS: `${APP}/${VERSION}`,
      AUDIENCES: AUDIENCE,
      TRUSTED_ISSUERS: trustedFile,
      // The fixture's assertions are made once and replayed for the whole run.
      MAX_ASSERTION_LIFETIME: String(TTL_SECONDS),
      MASTER_SECRETS: randomBytes(32).toString('hex'),
    },
    requestsFile,
    requests,
    emails,
  };
}

/** Registers nodes with a nodeassign service over gRPC. */
export async function addNodes(nodeAssignPort: number, nodes: Array<{ url: string; capacity: number }>, service = APP): Promise<void> {
  const client = grpcClient(NodeAssignClient, `127.0.0.1:${nodeAssignPort}`, BENCH_AUTH);
  try {
    for (const n of nodes) await call(client, client.addNode, { service, url: n.url, capacity: n.capacity }, { deadlineMs: 10_000, retryAfter: 1 });
  } finally {
    client.close();
  }
}
