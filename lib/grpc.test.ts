// Internal gRPC authentication: the constant-time secret check, and mutual TLS
// over real gRPC with a throwaway CA made by openssl.
import { after, before, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { grpcTls, type GrpcAuth } from './config.js';
import { DirectoryClient } from './gen/directory.js';
import { call, CLIENT_OPTIONS, grpcClient, secretMatches } from './grpc.js';
import { startDirectory, type RunningDirectory } from '../services/directory/server.js';
import { healthStatus, tempStoreUrl, TEST_AUTH, UNAUTHENTICATED } from '../tests/support/services.js';

test('secretMatches: only the exact string matches', () => {
  const secret = 'a'.repeat(64);
  assert.equal(secretMatches(secret, secret), true);
  assert.equal(secretMatches(secret, 'a'.repeat(63)), false);
  assert.equal(secretMatches(secret, `${secret}a`), false);
  assert.equal(secretMatches(secret, 'b'.repeat(64)), false);
  assert.equal(secretMatches(secret, ''), false);
  assert.equal(secretMatches(secret, undefined), false);
  assert.equal(secretMatches(secret, Buffer.from(secret)), false);
});

const dir = mkdtempSync(path.join(tmpdir(), 'grpc-tls-'));
const temp = tempStoreUrl('grpc-tls-store-');
let server: RunningDirectory;
let serverAuth: GrpcAuth;
const addr = () => `127.0.0.1:${server.port}`;

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

/** A CA, and a certificate it signs for 127.0.0.1 usable by both servers and clients. */
function makePki(name: string): { GRPC_TLS_CERT: string; GRPC_TLS_KEY: string; GRPC_TLS_CA: string } {
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', `/CN=${name} test CA`,
    '-keyout', `${name}-ca.key`, '-out', `${name}-ca.pem`);
  openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', `/CN=${name} service`,
    '-keyout', `${name}.key`, '-out', `${name}.csr`);
  writeFileSync(path.join(dir, `${name}.ext`), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${name}-ca.pem`, '-CAkey', `${name}-ca.key`, '-CAcreateserial', '-days', '1',
    '-extfile', `${name}.ext`, '-out', `${name}.pem`);
  return { GRPC_TLS_CERT: path.join(dir, `${name}.pem`), GRPC_TLS_KEY: path.join(dir, `${name}.key`), GRPC_TLS_CA: path.join(dir, `${name}-ca.pem`) };
}

before(async () => {
  serverAuth = { ...TEST_AUTH, tls: grpcTls(makePki('internal')) };
  server = await startDirectory({ storeUrl: temp.storeUrl, port: 0, auth: serverAuth });
});

after(async () => {
  await server.close();
  temp.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

const opts = { deadlineMs: 3000, retryAfter: 1 };
const HealthClient = grpc.makeGenericClientConstructor(healthService, 'grpc.health.v1.Health');
const getUser = { service: 'sync', email: 'nobody@example.com' };

test('mutual TLS: a client with a certificate from the CA and the secret is served', async () => {
  const client = grpcClient(DirectoryClient, addr(), serverAuth);
  try {
    await assert.rejects(call(client, client.getUser, getUser, opts), { name: 'RecordNotFound' });
  } finally {
    client.close();
  }
});

test('mutual TLS: without a client certificate, with one from another CA, or in plaintext, the call never reaches the service', async () => {
  const other = grpcTls(makePki('other'))!;
  const ca = serverAuth.tls!.ca;
  const clients = {
    // By hand: grpcClient has no TLS-without-certificate form. A refused handshake is ServiceUnavailable, not UNAUTHENTICATED.
    'no client certificate': new DirectoryClient(addr(), grpc.credentials.createSsl(ca), CLIENT_OPTIONS),
    'certificate from another CA': grpcClient(DirectoryClient, addr(), { ...TEST_AUTH, tls: { ...other, ca } }),
    plaintext: grpcClient(DirectoryClient, addr(), TEST_AUTH),
  };
  try {
    for (const [name, client] of Object.entries(clients)) {
      await assert.rejects(call(client, client.getUser, getUser, opts), { name: 'ServiceUnavailable' }, name);
    }
  } finally {
    for (const c of Object.values(clients)) c.close();
  }
});

test('mutual TLS: a client with a certificate but without the secret is UNAUTHENTICATED; health needs the certificate only', async () => {
  const client = grpcClient(DirectoryClient, addr(), { tls: serverAuth.tls });
  try {
    await assert.rejects(call(client, client.getUser, getUser, opts), UNAUTHENTICATED);
  } finally {
    client.close();
  }
  // Health is open to any client the TLS layer lets in, plaintext ones are not.
  const health = grpcClient(HealthClient, addr(), { tls: serverAuth.tls }) as unknown as grpc.Client & {
    check(req: { service: string }, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: { status: string }) => void): void;
  };
  try {
    const status = await new Promise<string>((resolve, reject) =>
      health.check({ service: '' }, { deadline: Date.now() + 3000 }, (err, res) => (err ? reject(err) : resolve(res.status))),
    );
    assert.equal(status, 'SERVING');
  } finally {
    health.close();
  }
  await assert.rejects(healthStatus(server.port, ''));
});
