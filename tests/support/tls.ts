// Throwaway certificates for tests that need real TLS, made by openssl.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

export interface TestPki {
  /** The certificate, signed by `ca` (PEM file). */
  cert: string;
  key: string;
  /** The CA that signed it, for clients to trust (PEM file). */
  ca: string;
}

/**
 * A CA in `dir`, and a certificate it signs for `altNames` (e.g.
 * `IP:127.0.0.1,DNS:localhost`), usable by servers and by clients.
 */
export function makePki(dir: string, name: string, altNames: string): TestPki {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', `/CN=${name} test CA`,
    '-keyout', `${name}-ca.key`, '-out', `${name}-ca.pem`);
  openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', `/CN=${name} service`,
    '-keyout', `${name}.key`, '-out', `${name}.csr`);
  writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=${altNames}\nextendedKeyUsage=serverAuth,clientAuth\n`);
  openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${name}-ca.pem`, '-CAkey', `${name}-ca.key`, '-CAcreateserial', '-days', '1',
    '-extfile', `${name}.ext`, '-out', `${name}.pem`);
  return { cert: path.join(dir, `${name}.pem`), key: path.join(dir, `${name}.key`), ca: path.join(dir, `${name}-ca.pem`) };
}
