// Secrets and internal gRPC settings (DESIGN §10), and other settings read at start: every refusal names its variable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { address, applications, bool, DEFAULTS, demoAppConfig, demoClientConfig, directoryConfig, discoveryUrl, domain, gatewayConfig, int, isLoopbackHost, jwksFile, list, metricsListener, num, parseTrustedIssuers, port, remoteUrlProblem, storeUrl, str, trustedIssuersFile, url, grpcTls, internalSecret, loginConfig, loginWorkers, masterSecrets, masterSecretsProblem, nodeAssignConfig, nodeSecrets as nodeSecretsOf, nodeSecretsProblem, nodeType, nonceStore, SAMPLE_SECRETS, secretValue, bearerConfig, webhookConfig } from './config.js';
import { nodeSecrets } from './token.js';
import { ConfigError } from './errors.js';
import { refused } from './testkit.js';

const secret = (bytes = 32) => randomBytes(bytes).toString('hex');


function withTempDir(fn: (dir: string) => void): void {
  const dir = mkdtempSync(path.join(tmpdir(), 'config-'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('MASTER_SECRETS: a 16- or 63-character secret, or any short one in the list, is refused', () => {
  refused(() => masterSecrets({ MASTER_SECRETS: 'a'.repeat(16) }), 'MASTER_SECRETS', /at least 64 characters/);
  refused(() => masterSecrets({ MASTER_SECRETS: 'a'.repeat(63) }), 'MASTER_SECRETS', /at least 64 characters/);
  refused(() => masterSecrets({ MASTER_SECRETS: `${secret()},${'b'.repeat(63)}` }), 'MASTER_SECRETS');
  const ok = [secret(), 'c'.repeat(64)];
  assert.deepEqual(masterSecrets({ MASTER_SECRETS: ` ${ok.join(' , ')} ` }), ok);
});

test('MASTER_SECRETS: the published sample values are refused', () => {
  refused(() => masterSecrets({ MASTER_SECRETS: 'dev-only-not-secret-0123456789abcdef' }), 'MASTER_SECRETS', /sample/);
  for (const sample of SAMPLE_SECRETS) assert.match(masterSecretsProblem([sample]) ?? '', /sample/, sample);
});

test('MASTER_SECRETS: required, empty list refused, fallback used only when unset', () => {
  refused(() => masterSecrets({}), 'MASTER_SECRETS', /required/);
  refused(() => masterSecrets({ MASTER_SECRETS: ' , ' }), 'MASTER_SECRETS', /at least one/);
  const fallback = [secret()];
  assert.deepEqual(masterSecrets({}, fallback), fallback);
  assert.equal(masterSecretsProblem([]), 'must hold at least one secret');
});

test('login and the gateway refuse a short master secret at start', () => {
  const env = { MASTER_SECRETS: 'sixteen-chars-00', NODE_URL: 'https://n.example', UPSTREAM_URL: 'http://127.0.0.1:1', AUDIENCES: 'https://a.example' };
  refused(() => gatewayConfig(env), 'MASTER_SECRETS');
  refused(() => loginConfig({ ...env, INTERNAL_SECRET: secret() }, { trustedIssuers: new Map() }), 'MASTER_SECRETS');
});

test('TOKEN_SECRETS: derived by default, or master, for login and the gateway alike; anything else stops them, naming it', () => {
  const env = { MASTER_SECRETS: secret(), INTERNAL_SECRET: secret(), NODE_URL: 'https://n.example', UPSTREAM_URL: 'http://127.0.0.1:1', AUDIENCES: 'https://a.example' };
  const login = (extra: Record<string, string> = {}) => loginConfig({ ...env, ...extra }, { trustedIssuers: new Map() });
  assert.equal(login().tokenSecrets, 'derived');
  assert.equal(gatewayConfig(env).tokenSecrets, 'derived');
  assert.equal(login({ TOKEN_SECRETS: ' master ' }).tokenSecrets, 'master');
  assert.equal(gatewayConfig({ ...env, TOKEN_SECRETS: 'master' }).tokenSecrets, 'master');
  assert.equal(gatewayConfig({ ...env, TOKEN_SECRETS: 'derived' }).tokenSecrets, 'derived');
  for (const bad of ['MASTER', 'node', 'derived,master', '1']) {
    refused(() => login({ TOKEN_SECRETS: bad }), 'TOKEN_SECRETS', /must be derived or master/);
    refused(() => gatewayConfig({ ...env, TOKEN_SECRETS: bad }), 'TOKEN_SECRETS', /must be derived or master/);
  }
});

test('*_FILE: the value comes from the file; both forms, an unreadable or empty file are refused, naming the variable', () => {
  withTempDir((dir) => {
    const file = path.join(dir, 'master');
    const value = secret();
    writeFileSync(file, `${value}\n`);
    assert.deepEqual(masterSecrets({ MASTER_SECRETS_FILE: file }), [value]);
    assert.equal(secretValue({ INTERNAL_SECRET_FILE: file }, 'INTERNAL_SECRET'), value);
    assert.equal(secretValue({}, 'INTERNAL_SECRET'), undefined);
    refused(() => masterSecrets({ MASTER_SECRETS: value, MASTER_SECRETS_FILE: file }), 'MASTER_SECRETS', /not both/);
    refused(() => masterSecrets({ MASTER_SECRETS_FILE: path.join(dir, 'missing') }), 'MASTER_SECRETS_FILE', /cannot read .*ENOENT/);
    writeFileSync(file, '\n');
    refused(() => internalSecret({ INTERNAL_SECRET_FILE: file }), 'INTERNAL_SECRET_FILE', /empty/);
    writeFileSync(file, 'short');
    refused(() => masterSecrets({ MASTER_SECRETS_FILE: file }), 'MASTER_SECRETS', /64/);
  });
});

test('NODE_SECRETS: a gateway holds the node secrets `cli nodes secret` prints, and then no master secret', () => {
  const url = 'https://n.example';
  const masters = [secret(), secret(48)];
  const derived = nodeSecrets(masters, url);
  const env = { NODE_URL: url, UPSTREAM_URL: 'http://127.0.0.1:1' };
  const config = gatewayConfig({ ...env, NODE_SECRETS: derived.join(',') });
  assert.deepEqual(config.nodeSecrets, derived);
  assert.equal(config.masterSecrets, undefined);
  assert.equal(config.tokenSecrets, 'derived');
  // Each master's node secret is half its bytes, in hex: 64 and 96 digits here.
  assert.deepEqual(derived.map((s) => s.length), [64, 96]);
  assert.deepEqual(gatewayConfig({ ...env, NODE_SECRETS: ` ${derived[0]} ` }).nodeSecrets, [derived[0]]);
  // Unset, MASTER_SECRETS as before.
  assert.deepEqual(gatewayConfig({ ...env, MASTER_SECRETS: masters.join(',') }).masterSecrets, masters);
  assert.equal(gatewayConfig({ ...env, MASTER_SECRETS: masters.join(',') }).nodeSecrets, undefined);
  refused(() => gatewayConfig(env), 'MASTER_SECRETS', /required/);
  // The embedded stack's generated masters stand in only when neither is set.
  assert.equal(gatewayConfig({ ...env, NODE_SECRETS: derived[0] }, { masterSecrets: masters }).masterSecrets, undefined);
});

test('NODE_SECRETS_FILE: commas or one a line, so the file may be exactly what `cli nodes secret` printed', () => {
  const derived = nodeSecrets([secret(), secret()], 'https://n.example');
  withTempDir((dir) => {
    const file = path.join(dir, 'node_secrets');
    writeFileSync(file, derived.map((s) => `${s}\n`).join(''));
    assert.deepEqual(nodeSecretsOf({ NODE_SECRETS_FILE: file }), derived);
    writeFileSync(file, `${derived.join(',')}\r\n`);
    assert.deepEqual(nodeSecretsOf({ NODE_SECRETS_FILE: file }), derived);
    refused(() => nodeSecretsOf({ NODE_SECRETS: derived[0], NODE_SECRETS_FILE: file }), 'NODE_SECRETS', /not both/);
    refused(() => nodeSecretsOf({ NODE_SECRETS_FILE: path.join(dir, 'missing') }), 'NODE_SECRETS_FILE', /cannot read/);
  });
  assert.equal(nodeSecretsOf({}), undefined);
  assert.equal(nodeSecretsOf({ NODE_SECRETS: '  ' }), undefined);
});

test('NODE_SECRETS: anything but lowercase hex of an even length ≥ 64 is refused, naming which entry and never its value', () => {
  const good = secret();
  const bad = {
    short: 'a'.repeat(62),
    odd: 'a'.repeat(65),
    upper: good.toUpperCase(),
    'not hex': `${'g'.repeat(64)}`,
    'a master secret that is not hex': `master-${'x'.repeat(64)}`,
    base64: Buffer.from(good, 'hex').toString('base64'),
  };
  for (const [what, value] of Object.entries(bad)) {
    assert.throws(
      () => nodeSecretsOf({ NODE_SECRETS: `${good},${value}` }),
      (e: unknown) => e instanceof ConfigError && e.variable === 'NODE_SECRETS' && /secret 2 of 2 .*cli nodes secret <app> <NODE_URL>/.test(e.message) && !e.message.includes(value),
      what,
    );
  }
  assert.equal(nodeSecretsProblem([good, 'b'.repeat(128)]), undefined);
  assert.match(nodeSecretsProblem([]) ?? '', /at least one/);
  refused(() => nodeSecretsOf({ NODE_SECRETS: ' , ' }), 'NODE_SECRETS', /at least one/);
});

test('NODE_SECRETS with MASTER_SECRETS, in any form, or with TOKEN_SECRETS=master, stops the gateway, naming both', () => {
  const env = { NODE_URL: 'https://n.example', UPSTREAM_URL: 'http://127.0.0.1:1' };
  const node = nodeSecrets([secret()], env.NODE_URL)[0];
  withTempDir((dir) => {
    const file = path.join(dir, 's');
    writeFileSync(file, node);
    const pairs: Array<[Record<string, string>, RegExp]> = [
      [{ NODE_SECRETS: node, MASTER_SECRETS: secret() }, /^NODE_SECRETS: NODE_SECRETS and MASTER_SECRETS are both set/],
      [{ NODE_SECRETS_FILE: file, MASTER_SECRETS: secret() }, /NODE_SECRETS_FILE and MASTER_SECRETS are both set/],
      [{ NODE_SECRETS: node, MASTER_SECRETS_FILE: file }, /NODE_SECRETS and MASTER_SECRETS_FILE are both set/],
      [{ NODE_SECRETS_FILE: file, MASTER_SECRETS_FILE: file }, /NODE_SECRETS_FILE and MASTER_SECRETS_FILE are both set/],
    ];
    for (const [both, message] of pairs) refused(() => gatewayConfig({ ...env, ...both }), 'NODE_SECRETS', message);
  });
  refused(() => gatewayConfig({ ...env, NODE_SECRETS: node, TOKEN_SECRETS: 'master' }), 'NODE_SECRETS', /TOKEN_SECRETS=master: tokens are then signed with the master secrets themselves/);
  assert.equal(gatewayConfig({ ...env, NODE_SECRETS: node, TOKEN_SECRETS: 'derived' }).tokenSecrets, 'derived');
});

test('INTERNAL_SECRET: required by directory, nodeassign and login; at least 32 bytes; samples refused', () => {
  refused(() => internalSecret({}), 'INTERNAL_SECRET', /required/);
  refused(() => internalSecret({ INTERNAL_SECRET: 'x'.repeat(31) }), 'INTERNAL_SECRET', /32 bytes/);
  refused(() => internalSecret({ INTERNAL_SECRET: 'dev-only-not-secret-0123456789abcdef' }), 'INTERNAL_SECRET', /sample/);
  // Bytes, not characters: 16 two-byte characters are 32 bytes.
  assert.equal(internalSecret({ INTERNAL_SECRET: 'é'.repeat(16) }), 'é'.repeat(16));
  assert.equal(internalSecret({}, 'f'.repeat(32)), 'f'.repeat(32));
  refused(() => directoryConfig({}), 'INTERNAL_SECRET');
  refused(() => nodeAssignConfig({}), 'INTERNAL_SECRET');
  refused(
    () => loginConfig({ MASTER_SECRETS: secret(), AUDIENCES: 'https://a.example' }, { trustedIssuers: new Map() }),
    'INTERNAL_SECRET',
  );
  const s = secret(16);
  assert.deepEqual(directoryConfig({ INTERNAL_SECRET: s }).auth, { internalSecret: s, tls: undefined });
});

test('GRPC_TLS_*: all three files or none; unreadable files name their variable', () => {
  assert.equal(grpcTls({}), undefined);
  withTempDir((dir) => {
    const files = Object.fromEntries(['cert', 'key', 'ca'].map((n) => [n, path.join(dir, `${n}.pem`)]));
    for (const [n, f] of Object.entries(files)) writeFileSync(f, `${n} pem`);
    const all = { GRPC_TLS_CERT: files.cert, GRPC_TLS_KEY: files.key, GRPC_TLS_CA: files.ca };
    const tls = grpcTls(all);
    assert.equal(tls?.cert.toString(), 'cert pem');
    assert.equal(tls?.key.toString(), 'key pem');
    assert.equal(tls?.ca.toString(), 'ca pem');
    refused(() => grpcTls({ GRPC_TLS_CERT: files.cert }), 'GRPC_TLS_KEY', /all three or none/);
    refused(() => grpcTls({ GRPC_TLS_CERT: files.cert, GRPC_TLS_KEY: files.key }), 'GRPC_TLS_CA');
    refused(() => grpcTls({ ...all, GRPC_TLS_CA: path.join(dir, 'missing.pem') }), 'GRPC_TLS_CA', /cannot read/);
  });
});

test('domain: default when unset, lowercased, refused (naming the variable) when not a domain name', () => {
  assert.equal(domain({}, 'OAUTH_EMAIL_DOMAIN', 'api.accounts.firefox.com'), 'api.accounts.firefox.com');
  assert.equal(domain({ OAUTH_EMAIL_DOMAIN: ' Corp.Example ' }, 'OAUTH_EMAIL_DOMAIN', 'x.example'), 'corp.example');
  assert.equal(domain({ OAUTH_EMAIL_DOMAIN: 'localhost' }, 'OAUTH_EMAIL_DOMAIN', 'x.example'), 'localhost');
  for (const bad of ['a@b.example', '-a.example', 'a-.example', 'a..example', '.example', 'a.example.', 'a b.example', `${'a'.repeat(254)}`]) {
    assert.throws(() => domain({ OAUTH_EMAIL_DOMAIN: bad }, 'OAUTH_EMAIL_DOMAIN', 'x.example'), (e: unknown) => e instanceof ConfigError && /OAUTH_EMAIL_DOMAIN/.test(e.message), bad);
  }
});

test('NODE_TYPE: unset by default; a lowercase word; anything else refused, naming it', () => {
  assert.equal(nodeType({}), undefined);
  assert.equal(nodeType({ NODE_TYPE: ' ' }), undefined);
  assert.equal(nodeType({ NODE_TYPE: 'mysql' }), 'mysql');
  assert.equal(nodeType({ NODE_TYPE: ' spanner ' }), 'spanner');
  for (const bad of ['MySQL', 'my sql', '9x', 'a'.repeat(33), 'mysql"']) {
    assert.throws(() => nodeType({ NODE_TYPE: bad }), (e: unknown) => e instanceof ConfigError && /NODE_TYPE/.test(e.message), bad);
  }
});

test('NONCE_STORE: memory by default, or a redis:// / rediss:// URL; anything else is refused naming it, without the password', () => {
  const env = { MASTER_SECRETS: secret(), NODE_URL: 'https://n.example', UPSTREAM_URL: 'http://127.0.0.1:1' };
  assert.deepEqual(gatewayConfig(env).nonceStore, { kind: 'memory' });
  assert.deepEqual(gatewayConfig({ ...env, NONCE_STORE: 'memory' }).nonceStore, { kind: 'memory' });
  assert.deepEqual(gatewayConfig({ ...env, NONCE_STORE: 'redis://:pw@redis:6379/2' }).nonceStore, { kind: 'redis', url: 'redis://:pw@redis:6379/2', timeoutMs: 500 });
  assert.deepEqual(gatewayConfig({ ...env, NONCE_STORE: 'rediss://r.example', NONCE_STORE_TIMEOUT_MS: '50' }).nonceStore, { kind: 'redis', url: 'rediss://r.example', timeoutMs: 50 });
  assert.equal(gatewayConfig({ ...env, RETRY_AFTER: '3' }).retryAfter, 3);
  for (const bad of ['redis', 'Memory', 'mongodb://h', 'http://redis:6379', 'redis://', 'redis://:hunter2@h/x', 'redis://h/0?tls=1', 'unix:///run/redis.sock']) {
    refused(() => gatewayConfig({ ...env, NONCE_STORE: bad }), 'NONCE_STORE');
  }
  assert.throws(() => gatewayConfig({ ...env, NONCE_STORE: 'redis://:hunter2@h/x' }), (e: Error) => !e.message.includes('hunter2'));
  refused(() => gatewayConfig({ ...env, NONCE_STORE: 'redis://h', NONCE_STORE_TIMEOUT_MS: '5' }), 'NONCE_STORE_TIMEOUT_MS');
});

test('LOGIN_WORKERS: 1 to 64; unset, the CPUs this process may use (or the fallback given); anything else refused', () => {
  assert.equal(loginWorkers({}), DEFAULTS.LOGIN_WORKERS);
  assert.equal(DEFAULTS.LOGIN_WORKERS, Math.min(availableParallelism(), 64));
  assert.equal(loginWorkers({}, 1), 1, 'npm start: one unless set');
  assert.equal(loginWorkers({ LOGIN_WORKERS: ' 4 ' }, 1), 4);
  assert.equal(loginWorkers({ LOGIN_WORKERS: '64' }), 64);
  for (const v of ['0', '65']) refused(() => loginWorkers({ LOGIN_WORKERS: v }), 'LOGIN_WORKERS', /between 1 and 64/);
  for (const v of ['two', '1.5', '-1']) refused(() => loginWorkers({ LOGIN_WORKERS: v }), 'LOGIN_WORKERS', /whole number/);
});

test('DIRECTORY_ADDR and NODEASSIGN_ADDR: host:port, dns:///host:port (every replica) or a fixed ipv4/ipv6 list', () => {
  const ok = ['directory:50051', '127.0.0.1:1', '[::1]:50051', 'dns:///directory:50051', 'ipv4:127.0.0.1:5001,127.0.0.1:5002', 'ipv6:[::1]:5001,[::1]:5002'];
  for (const v of ok) assert.equal(address({ DIRECTORY_ADDR: v }, 'DIRECTORY_ADDR', ''), v);
  const bad = ['directory', 'dns:///directory', 'dns://8.8.8.8/directory:1', 'ipv4:', 'ipv4:127.0.0.1:1,', 'ipv4:127.0.0.1', 'http://directory:50051', 'unix:/tmp/x.sock', 'directory:50051,other:1',
    // A line break inside the value (a multi-line .env value): refused by name, not a TypeError.
    'directory:50051\nother:1', 'dns:///directory:50051\nother:1', 'ipv4:127.0.0.1:1,\n127.0.0.1:2', 'directory:1 ipv4:127.0.0.1:2'];
  for (const v of bad) assert.throws(() => address({ DIRECTORY_ADDR: v }, 'DIRECTORY_ADDR', ''), /DIRECTORY_ADDR: must be host:port, dns:\/\/\/host:port or ipv4:host:port,host:port/, v);
});

// ---- found missing by mutation testing (npm run mutation -- lib/config.ts): the parsers at their edges ----

/** `fn` stops with exactly `message` (the variable's name first). */
function refusedWith(fn: () => unknown, variable: string, message: string): void {
  refused(fn, variable);
  assert.throws(fn, (e: Error) => e.message === `${variable}: ${message}`);
}

test('str and list: unset or blank is the fallback, or required without one; values trimmed', () => {
  assert.equal(str({ X: '  ' }, 'X', 'fb'), 'fb');
  assert.equal(str({}, 'X', 'fb'), 'fb');
  assert.equal(str({ X: ' v ' }, 'X'), 'v');
  refusedWith(() => str({ X: ' ' }, 'X'), 'X', 'is required');
  assert.deepEqual(list({ X: ' a, ,b ,' }, 'X', 'z'), ['a', 'b']);
  assert.deepEqual(list({}, 'X', 'z,y'), ['z', 'y']);
});

test('int, num and port: blank is the fallback; the bounds are inclusive; anything else is refused, quoting it', () => {
  assert.equal(int({ X: ' ' }, 'X', 9), 9);
  assert.equal(int({ X: ' 42 ' }, 'X', 9), 42);
  assert.equal(int({ X: '1' }, 'X', 0, 1, 5), 1);
  assert.equal(int({ X: '5' }, 'X', 0, 1, 5), 5);
  refusedWith(() => int({ X: '0' }, 'X', 0, 1, 5), 'X', 'must be between 1 and 5, got 0');
  refusedWith(() => int({ X: '6' }, 'X', 0, 1, 5), 'X', 'must be between 1 and 5, got 6');
  refusedWith(() => int({ X: '1.5' }, 'X', 0), 'X', 'must be a whole number, got "1.5"');
  assert.equal(num({ X: ' ' }, 'X', 0.5, 0, 10), 0.5);
  assert.equal(num({ X: ' 2.5 ' }, 'X', 0, 0, 10), 2.5);
  assert.equal(num({ X: '0' }, 'X', 1, 0, 10), 0);
  assert.equal(num({ X: '10' }, 'X', 1, 0, 10), 10);
  for (const bad of ['-0.1', '10.5', 'abc', 'Infinity', 'NaN']) refusedWith(() => num({ X: bad }, 'X', 1, 0, 10), 'X', `must be a number between 0 and 10, got ${JSON.stringify(bad)}`);
  assert.equal(port({}, 'P', 8000), 8000);
  assert.equal(port({ P: '65535' }, 'P', 8000), 65535);
  assert.equal(port({ P: '0' }, 'P', 8000), 0);
  refusedWith(() => port({ P: '65536' }, 'P', 8000), 'P', 'must be between 0 and 65535, got 65536');
});

test('bool: 1/true/yes/on and 0/false/no/off in any case and spacing; blank is the fallback; anything else refused', () => {
  for (const yes of ['1', 'true', 'yes', 'on', 'TRUE', ' On ']) assert.equal(bool({ B: yes }, 'B', false), true, yes);
  for (const no of ['0', 'false', 'no', 'off', 'FALSE', ' Off ']) assert.equal(bool({ B: no }, 'B', true), false, no);
  assert.equal(bool({ B: ' ' }, 'B', true), true);
  assert.equal(bool({}, 'B', false), false);
  refusedWith(() => bool({ B: 'maybe' }, 'B', false), 'B', 'must be true or false, got "maybe"');
  refusedWith(() => bool({ B: 'y' }, 'B', false), 'B', 'must be true or false, got "y"');
});

test('domain and url at their edges: 253 characters, one-letter labels; a fragment alone; trailing slashes', () => {
  const label = 'a'.repeat(63);
  const long = [label, label, label, 'b'.repeat(61)].join('.');
  assert.equal(long.length, 253);
  assert.equal(domain({ D: long }, 'D', 'x'), long);
  refusedWith(() => domain({ D: `${long}c` }, 'D', 'x'), 'D', `must be a domain name, got ${JSON.stringify(`${long}c`)}`);
  assert.equal(domain({ D: 'a.b.c' }, 'D', 'x'), 'a.b.c');
  assert.equal(url({ U: 'http://n.example/a//' }, 'U'), 'http://n.example/a');
  assert.equal(url({ U: 'https://n.example' }, 'U'), 'https://n.example');
  refusedWith(() => url({ U: 'n.example' }, 'U'), 'U', 'must be an absolute URL, got "n.example"');
  refusedWith(() => url({ U: 'ftp://n.example' }, 'U'), 'U', 'must be an http or https URL');
  refusedWith(() => url({ U: 'http://n.example/#f' }, 'U'), 'U', 'must not carry a query or fragment');
  refusedWith(() => url({ U: 'http://n.example/?q' }, 'U'), 'U', 'must not carry a query or fragment');
});

test('*_FILE: a blank one is unset; the direct value trimmed; an unreadable file named with its error code', () => {
  assert.equal(secretValue({ S: ' v ', S_FILE: '  ' }, 'S'), 'v');
  refusedWith(() => secretValue({ S_FILE: '/nonexistent/secret-file' }, 'S'), 'S_FILE', 'cannot read /nonexistent/secret-file: ENOENT');
});

test('APPLICATIONS: name/version items of letters, digits, _ and - (versions also .); none at all is refused', () => {
  assert.deepEqual([...applications({ APPLICATIONS: 'my_app-2/1.0_b-c,my_app-2/2' }).entries()].map(([k, v]) => [k, [...v]]), [['my_app-2', ['1.0_b-c', '2']]]);
  for (const bad of ['sync/1.5/x', 'sy nc/1', '/1.5', 'sync/', 'sync', 'x/1.5 beta']) {
    refusedWith(() => applications({ APPLICATIONS: bad }), 'APPLICATIONS', `expected name/version, got ${JSON.stringify(bad)}`);
  }
  refusedWith(() => applications({ APPLICATIONS: ' , ' }), 'APPLICATIONS', 'must name at least one application');
});

test('STORE_URL: SQLite under DATA_DIR by default; mongodb://, mongodb+srv:// or sqlite:<path>; refused without its password', () => {
  assert.equal(storeUrl({}), `sqlite:${path.join('./data', 'tokenserver.db')}`);
  assert.equal(storeUrl({ DATA_DIR: '/var/ts' }), 'sqlite:/var/ts/tokenserver.db');
  for (const ok of ['mongodb://h/db', 'mongodb+srv://h/db', 'sqlite:/x.db']) assert.equal(storeUrl({ STORE_URL: ok }), ok);
  refusedWith(() => storeUrl({ STORE_URL: 'sqlite:' }), 'STORE_URL', 'must start with mongodb:// or sqlite:, got "sqlite:"');
  refusedWith(() => storeUrl({ STORE_URL: 'postgres://u:pw@h/db' }), 'STORE_URL', 'must start with mongodb:// or sqlite:, got "h/db"');
  refusedWith(() => storeUrl({ STORE_URL: 'x-mongodb://h/db' }), 'STORE_URL', 'must start with mongodb:// or sqlite:, got "x-mongodb://h/db"');
});

test('metrics listeners: none unless their port is set; then METRICS_HOST (default loopback) and that port', () => {
  assert.equal(metricsListener({}, 'X_METRICS_PORT'), undefined);
  assert.equal(metricsListener({ X_METRICS_PORT: ' ' }, 'X_METRICS_PORT'), undefined);
  assert.deepEqual(metricsListener({ X_METRICS_PORT: '9100' }, 'X_METRICS_PORT'), { host: '127.0.0.1', port: 9100 });
  assert.deepEqual(metricsListener({ X_METRICS_PORT: '9100', METRICS_HOST: '0.0.0.0' }, 'X_METRICS_PORT'), { host: '0.0.0.0', port: 9100 });
});

test('key files (OAUTH_JWKS, TRUSTED_ISSUERS): unreadable, not JSON, no keys, a key that is no JWK: each refusal says which', () => {
  withTempDir((dir) => {
    const file = (name: string, text: string) => {
      const f = path.join(dir, name);
      writeFileSync(f, text);
      return f;
    };
    const jwk = { kty: 'EC', crv: 'P-256', x: 'x', y: 'y' };
    assert.deepEqual(jwksFile({ K: file('ok.json', JSON.stringify({ keys: [jwk] })) }, 'K'), [jwk]);
    const missing = path.join(dir, 'missing.json');
    refused(() => jwksFile({ K: missing }, 'K'), 'K', new RegExp(`^K: cannot read ${missing}: ENOENT`));
    refusedWith(() => jwksFile({ K: file('bad.json', '{') }, 'K'), 'K', `${path.join(dir, 'bad.json')} is not valid JSON`);
    for (const [name, doc] of [['null.json', 'null'], ['none.json', '{}'], ['empty.json', '{"keys": []}'], ['object.json', '{"keys": {"kty": "EC"}}']] as const) {
      refusedWith(() => jwksFile({ K: file(name, doc) }, 'K'), 'K', `${path.join(dir, name)} must be {"keys": [JWK, …]} with at least one key`);
    }
    for (const key of ['7', 'null', '{}', '{"kty": 7}']) {
      refusedWith(() => jwksFile({ K: file('key.json', `{"keys": [${JSON.stringify(jwk)}, ${key}]}`) }, 'K'), 'K', 'every key must be a JWK with "kty"');
    }
    refused(() => trustedIssuersFile({ TRUSTED_ISSUERS: missing }), 'TRUSTED_ISSUERS', new RegExp(`^TRUSTED_ISSUERS: cannot read ${missing}: ENOENT`));
    refusedWith(() => trustedIssuersFile({ TRUSTED_ISSUERS: file('ti.json', '[') }), 'TRUSTED_ISSUERS', `${path.join(dir, 'ti.json')} is not valid JSON`);
    assert.deepEqual([...trustedIssuersFile({ TRUSTED_ISSUERS: file('ti-ok.json', JSON.stringify({ 'idp.example': { keys: [jwk] } })) }).keys()], ['idp.example']);
  });
  const key = { kty: 'EC' };
  refusedWith(() => parseTrustedIssuers([]), 'TRUSTED_ISSUERS', 'must be a JSON object {"<issuer>": {"keys": [JWK, …], "domains": ["<e-mail domain>", …]}}');
  refusedWith(() => parseTrustedIssuers({ 'idp.example': null }), 'TRUSTED_ISSUERS', 'issuer idp.example: "keys" must be a non-empty array');
  refusedWith(() => parseTrustedIssuers({ 'idp.example': { keys: [7] } }), 'TRUSTED_ISSUERS', 'issuer idp.example: every key must be a JWK with "kty" or a BrowserID key with "algorithm"');
  refusedWith(() => parseTrustedIssuers({ 'idp.example/x': { keys: [key] } }, 'X'), 'X', 'issuer idp.example/x: not a host name, so "domains" must list what it may certify');
  refusedWith(() => parseTrustedIssuers({ 'idp.example': { keys: [key], domains: [] } }), 'TRUSTED_ISSUERS', 'issuer idp.example: "domains" must be a non-empty array (["*"] for any domain)');
  refusedWith(() => parseTrustedIssuers({ 'idp.example': { keys: [key], domains: ['a b'] } }), 'TRUSTED_ISSUERS', 'issuer idp.example: every domain must be a domain name or "*" (subdomains are not matched: list each), got "a b"');
  assert.deepEqual(parseTrustedIssuers({ 'idp.example': { keys: [key], domains: ['x'.repeat(255)] } }).get('idp.example')?.domains, ['x'.repeat(255)], '255 characters is a domain');
});

test('remote key URLs: a user or a password alone is refused; loopback is 127.a.b.c with 1 to 3 digits each; trailing slashes of an issuer', () => {
  assert.equal(remoteUrlProblem('https://user@accounts.example/'), 'must not carry a user or password');
  assert.equal(remoteUrlProblem('https://:pw@accounts.example/'), 'must not carry a user or password');
  assert.equal(remoteUrlProblem('not a url'), 'is not a URL: "not a url"');
  assert.equal(remoteUrlProblem(` ${'x'.repeat(300)}`), `is not a URL: ${JSON.stringify(` ${'x'.repeat(199)}`)}`);
  assert.ok(isLoopbackHost('127.100.200.254'));
  assert.ok(!isLoopbackHost('127.1000.0.1'));
  assert.ok(!isLoopbackHost('127.0.0.1000'));
  assert.ok(!isLoopbackHost('x127.0.0.1'));
  assert.equal(discoveryUrl('https://idp.example//'), 'https://idp.example/.well-known/openid-configuration');
});

// ---- found missing by mutation testing (npm run mutation -- lib/config.ts): each service's own settings ----

/** What every builder below needs set, so that one variable at a time can be checked. */
const MASTER = 'm'.repeat(64);
const INTERNAL = secret();
const builders = {
  directory: (env: Record<string, string>) => directoryConfig({ INTERNAL_SECRET: INTERNAL, ...env }),
  nodeassign: (env: Record<string, string>) => nodeAssignConfig({ INTERNAL_SECRET: INTERNAL, ...env }),
  // An empty issuer map and no Bearer: no login scheme check in the way.
  login: (env: Record<string, string>) => loginConfig({ INTERNAL_SECRET: INTERNAL, ...env }, { masterSecrets: [MASTER], trustedIssuers: new Map() }),
  gateway: (env: Record<string, string>) => gatewayConfig({ NODE_URL: 'https://node.example', UPSTREAM_URL: 'http://127.0.0.1:9000', ...env }, { masterSecrets: [MASTER] }),
  bearer: (env: Record<string, string>) => bearerConfig({ OAUTH_JWKS: 'https://accounts.example/jwks', ...env })!,
  webhook: (env: Record<string, string>) => webhookConfig({ WEBHOOK_JWKS: 'https://accounts.example/jwks', WEBHOOK_AUDIENCE: 'https://token.example', ...env })!,
};
/** The refresh settings of a key set fetched from a URL. */
const remoteOf = (c: { jwks: object }) => (c.jwks as { remote: { refreshSeconds: number; minIntervalSeconds: number } }).remote;

type Builder = keyof typeof builders;
type Built<K extends Builder> = ReturnType<(typeof builders)[K]>;
/** A setting of one builder's config: `read` builds it from an environment and reads the setting. */
const setting = <K extends Builder>(builder: K, variable: string, read: (c: Built<K>) => unknown) => ({
  what: `${builder} ${variable}`,
  variable,
  read: (env: Record<string, string>) => read(builders[builder](env) as Built<K>),
});

/** Each bounded setting: its default, least and most (integers unless `step` says otherwise). */
const BOUNDED: Array<{ s: ReturnType<typeof setting>; fallback: number; least: number; most: number; step?: number }> = [
  { s: setting('directory', 'CLIENT_STATE_CHANGES_PER_DAY', (c) => c.clientStateChangesPerDay), fallback: 10, least: 1, most: 10_000 },
  { s: setting('nodeassign', 'RELEASE_RATE', (c) => c.releaseRate), fallback: 0.1, least: 0.0001, most: 1, step: 0.00001 },
  { s: setting('login', 'TOKEN_DURATION', (c) => c.tokenDuration), fallback: 3600, least: 1, most: 86_400 * 30 },
  { s: setting('login', 'ASSERTION_SKEW', (c) => c.assertionSkew), fallback: 60, least: 0, most: 3600 },
  { s: setting('login', 'MAX_ASSERTION_LIFETIME', (c) => c.maxAssertionLifetime), fallback: 600, least: 1, most: 86_400 * 365 },
  { s: setting('login', 'MAX_CERTIFICATE_LIFETIME', (c) => c.maxCertificateLifetime), fallback: 86_400, least: 1, most: 86_400 * 365 },
  { s: setting('login', 'GRPC_DEADLINE_MS', (c) => c.grpcDeadlineMs), fallback: 2000, least: 50, most: 60_000 },
  { s: setting('login', 'RETRY_AFTER', (c) => c.retryAfter), fallback: 10, least: 1, most: 86_400 },
  { s: setting('login', 'RETRY_AFTER', (c) => c.overload.retryAfter), fallback: 10, least: 1, most: 86_400 },
  { s: setting('login', 'BACKOFF_SECONDS', (c) => c.overload.backoffSeconds), fallback: 30, least: 1, most: 86_400 },
  { s: setting('login', 'BACKOFF_LOOP_DELAY_MS', (c) => c.overload.backoffLoopDelayMs), fallback: 500, least: 0, most: 60_000 },
  { s: setting('gateway', 'HAWK_SKEW', (c) => c.hawkSkew), fallback: 60, least: 1, most: 86_400 },
  { s: setting('gateway', 'NONCE_CACHE_SIZE', (c) => c.nonceCacheSize), fallback: 1_000_000, least: 100, most: 10_000_000 },
  { s: setting('gateway', 'RETRY_AFTER', (c) => c.retryAfter), fallback: 10, least: 1, most: 86_400 },
  { s: setting('gateway', 'HASH_BODY_LIMIT', (c) => c.hashBodyLimit), fallback: 1_048_576, least: 1, most: 2 ** 30 },
  { s: setting('gateway', 'UPSTREAM_CONNECT_TIMEOUT_MS', (c) => c.upstreamConnectTimeoutMs), fallback: 2000, least: 10, most: 600_000 },
  { s: setting('gateway', 'UPSTREAM_TIMEOUT_MS', (c) => c.upstreamTimeoutMs), fallback: 30_000, least: 10, most: 3_600_000 },
  { s: setting('bearer', 'MAX_ACCESS_TOKEN_LIFETIME', (c) => c.maxLifetime), fallback: 86_400, least: 1, most: 86_400 * 365 },
  { s: setting('bearer', 'OAUTH_JWKS_REFRESH', (c) => remoteOf(c).refreshSeconds), fallback: 3600, least: 1, most: 86_400 * 7 },
  { s: setting('bearer', 'OAUTH_JWKS_MIN_INTERVAL', (c) => remoteOf(c).minIntervalSeconds), fallback: 30, least: 1, most: 3600 },
  { s: setting('webhook', 'WEBHOOK_MAX_AGE', (c) => c.maxAge), fallback: 3600, least: 1, most: 79_200 },
];

test("each service's bounded settings: the default when unset, both bounds accepted, one step beyond either refused by name", () => {
  for (const { s, fallback, least, most, step = 1 } of BOUNDED) {
    assert.equal(s.read({}), fallback, s.what);
    assert.equal(s.read({ [s.variable]: String(least) }), least, s.what);
    assert.equal(s.read({ [s.variable]: String(most) }), most, s.what);
    refused(() => s.read({ [s.variable]: String(least - step) }), s.variable);
    refused(() => s.read({ [s.variable]: String(most + step) }), s.variable);
  }
});

test("each service's ports, host and other settings: the default when unset, the variable's value when set", () => {
  const cases: Array<{ s: ReturnType<typeof setting>; fallback: unknown; value: string; expected: unknown }> = [
    { s: setting('directory', 'DIRECTORY_PORT', (c) => c.port), fallback: 50051, value: '6001', expected: 6001 },
    { s: setting('directory', 'BIND_HOST', (c) => c.host), fallback: '127.0.0.1', value: '0.0.0.0', expected: '0.0.0.0' },
    { s: setting('directory', 'DIRECTORY_METRICS_PORT', (c) => c.metrics?.port), fallback: undefined, value: '9101', expected: 9101 },
    { s: setting('nodeassign', 'NODEASSIGN_PORT', (c) => c.port), fallback: 50052, value: '6002', expected: 6002 },
    { s: setting('nodeassign', 'BIND_HOST', (c) => c.host), fallback: '127.0.0.1', value: '::', expected: '::' },
    { s: setting('nodeassign', 'NODEASSIGN_METRICS_PORT', (c) => c.metrics?.port), fallback: undefined, value: '9102', expected: 9102 },
    { s: setting('login', 'LOGIN_PORT', (c) => c.port), fallback: 8000, value: '6003', expected: 6003 },
    { s: setting('login', 'BIND_HOST', (c) => c.host), fallback: '127.0.0.1', value: '0.0.0.0', expected: '0.0.0.0' },
    { s: setting('login', 'ALLOW_NEW_USERS', (c) => c.allowNewUsers), fallback: true, value: 'false', expected: false },
    { s: setting('login', 'MAINTENANCE_MODE', (c) => c.maintenanceMode), fallback: false, value: 'true', expected: true },
    { s: setting('login', 'DIRECTORY_ADDR', (c) => c.directoryAddr), fallback: '127.0.0.1:50051', value: 'directory:7001', expected: 'directory:7001' },
    { s: setting('login', 'NODEASSIGN_ADDR', (c) => c.nodeAssignAddr), fallback: '127.0.0.1:50052', value: 'nodeassign:7002', expected: 'nodeassign:7002' },
    { s: setting('login', 'GENERATION_CLAIM', (c) => c.generationClaim), fallback: 'fxa-generation', value: 'gen', expected: 'gen' },
    { s: setting('login', 'OAUTH_EMAIL_DOMAIN', (c) => c.oauthEmailDomain), fallback: 'api.accounts.firefox.com', value: 'Accounts.Example', expected: 'accounts.example' },
    { s: setting('login', 'LOGIN_METRICS_PORT', (c) => c.metrics?.port), fallback: undefined, value: '9103', expected: 9103 },
    { s: setting('login', 'BACKOFF_INFLIGHT', (c) => c.overload.backoffInFlight), fallback: 100, value: '7', expected: 7 },
    { s: setting('login', 'MAX_INFLIGHT', (c) => c.overload.maxInFlight), fallback: 400, value: '900', expected: 900 },
    { s: setting('gateway', 'GATEWAY_PORT', (c) => c.port), fallback: 8080, value: '6004', expected: 6004 },
    { s: setting('gateway', 'BIND_HOST', (c) => c.host), fallback: '127.0.0.1', value: '0.0.0.0', expected: '0.0.0.0' },
    { s: setting('gateway', 'NONCE_PER_TOKEN', (c) => c.noncePerToken), fallback: 1000, value: '5', expected: 5 },
    { s: setting('gateway', 'GATEWAY_METRICS_PORT', (c) => c.metrics?.port), fallback: undefined, value: '9104', expected: 9104 },
  ];
  for (const { s, fallback, value, expected } of cases) {
    assert.deepEqual(s.read({}), fallback, `${s.what} unset`);
    assert.deepEqual(s.read({ [s.variable]: value }), expected, `${s.what}=${value}`);
  }
});

test('the in-flight caps and the nonce share: each bounded by the other setting, by name', () => {
  // MAX_INFLIGHT defaults to at least BACKOFF_INFLIGHT, and may not be set below it.
  assert.equal(builders.login({ BACKOFF_INFLIGHT: '1000' }).overload.maxInFlight, 1000);
  refusedWith(() => builders.login({ BACKOFF_INFLIGHT: '50', MAX_INFLIGHT: '49' }), 'MAX_INFLIGHT', 'must be at least BACKOFF_INFLIGHT (50), got 49');
  assert.equal(builders.login({ BACKOFF_INFLIGHT: '50', MAX_INFLIGHT: '50' }).overload.maxInFlight, 50);
  for (const variable of ['BACKOFF_INFLIGHT', 'MAX_INFLIGHT']) {
    refused(() => builders.login({ [variable]: '0' }), variable);
    refused(() => builders.login({ BACKOFF_INFLIGHT: '1', [variable]: '1000001' }), variable);
    assert.equal(builders.login({ BACKOFF_INFLIGHT: '1', MAX_INFLIGHT: '1000000', [variable]: '1000000' }).overload.maxInFlight, 1_000_000);
  }
  // NONCE_PER_TOKEN: at most the whole cache, and by default no more than it.
  assert.equal(builders.gateway({ NONCE_CACHE_SIZE: '100' }).noncePerToken, 100);
  assert.equal(builders.gateway({ NONCE_CACHE_SIZE: '500', NONCE_PER_TOKEN: '500' }).noncePerToken, 500);
  refused(() => builders.gateway({ NONCE_CACHE_SIZE: '500', NONCE_PER_TOKEN: '501' }), 'NONCE_PER_TOKEN');
  refused(() => builders.gateway({ NONCE_PER_TOKEN: '0' }), 'NONCE_PER_TOKEN');
});

test('loginConfig: AUDIENCES, blank as unset, else the embedded stack\'s; required with assertion issuers, by name', () => {
  const issuers = new Map([['idp.example', { keys: [], domains: ['*'] }]]);
  const build = (env: Record<string, string>, audiences?: string[]) =>
    loginConfig({ INTERNAL_SECRET: INTERNAL, ...env }, { masterSecrets: [MASTER], trustedIssuers: issuers, ...(audiences ? { audiences } : {}) });
  refusedWith(() => build({}), 'AUDIENCES', 'is required (accepted "aud" values)');
  refusedWith(() => build({ AUDIENCES: ' ' }), 'AUDIENCES', 'is required (accepted "aud" values)');
  assert.deepEqual(build({}, ['https://stack.example']).audiences, ['https://stack.example']);
  assert.deepEqual(build({ AUDIENCES: ' ' }, ['https://stack.example']).audiences, ['https://stack.example']);
  assert.deepEqual(build({ AUDIENCES: 'https://a.example, https://b.example' }, ['https://stack.example']).audiences, ['https://a.example', 'https://b.example']);
  // A blank TRUSTED_ISSUERS is unset: the embedded stack's issuers stay.
  assert.equal(build({ TRUSTED_ISSUERS: '  ' }, ['https://stack.example']).trustedIssuers, issuers);
  // No issuer at all: no audience needed.
  assert.deepEqual(builders.login({}).audiences, []);
});

test('nonceStore: memory, or a Redis URL with its timeout; each refusal says what is wrong, never quoting the URL', () => {
  assert.deepEqual(nonceStore({}), { kind: 'memory' });
  assert.deepEqual(nonceStore({ NONCE_STORE: 'redis://:pw@cache:6379/12' }), { kind: 'redis', url: 'redis://:pw@cache:6379/12', timeoutMs: 500 });
  assert.deepEqual(nonceStore({ NONCE_STORE: 'rediss://cache/', NONCE_STORE_TIMEOUT_MS: '10' }), { kind: 'redis', url: 'rediss://cache/', timeoutMs: 10 });
  assert.equal((nonceStore({ NONCE_STORE: 'redis://cache/99999' }) as { url: string }).url, 'redis://cache/99999');
  refused(() => nonceStore({ NONCE_STORE: 'redis://cache', NONCE_STORE_TIMEOUT_MS: '9' }), 'NONCE_STORE_TIMEOUT_MS');
  refused(() => nonceStore({ NONCE_STORE: 'redis://cache', NONCE_STORE_TIMEOUT_MS: '60001' }), 'NONCE_STORE_TIMEOUT_MS');
  refusedWith(() => nonceStore({ NONCE_STORE: 'not a url' }), 'NONCE_STORE', 'must be memory or a redis:// or rediss:// URL');
  refusedWith(() => nonceStore({ NONCE_STORE: 'http://pw@cache' }), 'NONCE_STORE', 'must be memory or a redis:// or rediss:// URL, got a http: URL');
  refusedWith(() => nonceStore({ NONCE_STORE: 'redis:///0' }), 'NONCE_STORE', 'the Redis URL must name a host');
  refusedWith(() => nonceStore({ NONCE_STORE: 'redis://cache/db' }), 'NONCE_STORE', 'the Redis URL path must be empty or a database number (/0)');
  refusedWith(() => nonceStore({ NONCE_STORE: 'redis://cache/123456' }), 'NONCE_STORE', 'the Redis URL path must be empty or a database number (/0)');
  refusedWith(() => nonceStore({ NONCE_STORE: 'redis://cache/0?x=1' }), 'NONCE_STORE', 'the Redis URL must not carry a query or fragment');
  refusedWith(() => nonceStore({ NONCE_STORE: 'redis://cache/0#f' }), 'NONCE_STORE', 'the Redis URL must not carry a query or fragment');
});

test("the demo's settings: its port and host, the login it calls, the data directory and the first application", () => {
  assert.deepEqual(demoAppConfig({}), { port: 8090, host: '127.0.0.1' });
  assert.deepEqual(demoAppConfig({ DEMO_APP_PORT: '7090', BIND_HOST: '0.0.0.0' }), { port: 7090, host: '0.0.0.0' });
  assert.deepEqual(demoClientConfig({}), { loginUrl: 'http://127.0.0.1:8000', dataDir: './data', app: 'sync', version: '1.5' });
  assert.deepEqual(demoClientConfig({ LOGIN_URL: 'https://login.example/', DATA_DIR: '/srv/data', APPLICATIONS: 'notes/2.0,notes/2.1,sync/1.5' }), {
    loginUrl: 'https://login.example',
    dataDir: '/srv/data',
    app: 'notes',
    version: '2.0',
  });
});

test('Bearer: the scope, trimmed; a blank OAUTH_ISSUER is unset', () => {
  assert.equal(builders.bearer({}).scope, 'https://identity.mozilla.com/apps/oldsync');
  assert.equal(builders.bearer({ OAUTH_SCOPE: ' https://example.com/scope ' }).scope, 'https://example.com/scope');
  // No issuer to require.
  assert.equal(builders.bearer({ OAUTH_ISSUER: '  ' }).issuer, undefined);
});

test('NODE_TYPE: blank is unset; anything but a lowercase word is refused, quoting it', () => {
  assert.equal(nodeType({ NODE_TYPE: '  ' }), undefined);
  assert.equal(nodeType({ NODE_TYPE: ' spanner ' }), 'spanner');
  refusedWith(() => nodeType({ NODE_TYPE: 'MySQL' }), 'NODE_TYPE', 'must be a lowercase word such as mysql, postgres or spanner, got "MySQL"');
});

// ---- found missing by mutation testing (npm run mutation -- lib/config.ts): messages, trimming and forms ----

test('MASTER_SECRETS: an empty fallback is no fallback', () => {
  refused(() => masterSecrets({}, []), 'MASTER_SECRETS', /required/);
});

test('NODE_SECRETS: white space around each entry is trimmed; a refused entry gets the whole message', () => {
  const [a, b] = nodeSecrets([secret(), secret()], 'https://n.example');
  assert.deepEqual(nodeSecretsOf({ NODE_SECRETS: ` ${a} , ${b} ` }), [a, b]);
  refusedWith(
    () => nodeSecretsOf({ NODE_SECRETS: `${a},zz` }),
    'NODE_SECRETS',
    'secret 2 of 2 is not a node secret: each must be what `cli nodes secret <app> <NODE_URL>` prints, 64 or more lowercase hex digits, an even number of them',
  );
});

test('a blank NODE_SECRETS or NODE_SECRETS_FILE is unset: MASTER_SECRETS beside it is no conflict', () => {
  const masters = [secret()];
  for (const blank of [{ NODE_SECRETS: '  ' }, { NODE_SECRETS_FILE: ' ' }] as Record<string, string>[]) {
    const config = builders.gateway({ ...blank, MASTER_SECRETS: masters[0] });
    assert.deepEqual(config.masterSecrets, masters, JSON.stringify(blank));
    assert.equal(config.nodeSecrets, undefined);
  }
});

test('INTERNAL_SECRET: its length is counted in UTF-8 bytes', () => {
  assert.equal(internalSecret({ INTERNAL_SECRET: 'é'.repeat(16) }), 'é'.repeat(16), '16 characters, 32 bytes');
  refused(() => internalSecret({ INTERNAL_SECRET: `${'é'.repeat(15)}a` }), 'INTERNAL_SECRET', /32 bytes/);
});

test('GRPC_TLS_*: a blank variable is unset; the refusal names the ones set; an unreadable file gives its reason', () => {
  assert.equal(grpcTls({ GRPC_TLS_CERT: '  ', GRPC_TLS_KEY: '', GRPC_TLS_CA: ' ' }), undefined);
  withTempDir((dir) => {
    const file = path.join(dir, 'x.pem');
    writeFileSync(file, 'pem');
    refusedWith(() => grpcTls({ GRPC_TLS_CERT: file, GRPC_TLS_KEY: file }), 'GRPC_TLS_CA', 'must be set with GRPC_TLS_CERT and GRPC_TLS_KEY (all three or none)');
    refusedWith(() => grpcTls({ GRPC_TLS_CERT: file, GRPC_TLS_KEY: ' ', GRPC_TLS_CA: file }), 'GRPC_TLS_KEY', 'must be set with GRPC_TLS_CERT and GRPC_TLS_CA (all three or none)');
    const missing = path.join(dir, 'missing.pem');
    refusedWith(() => grpcTls({ GRPC_TLS_CERT: file, GRPC_TLS_KEY: missing, GRPC_TLS_CA: file }), 'GRPC_TLS_KEY', `cannot read ${missing}: ENOENT`);
  });
});

test('the files settings name: unreadable, each refusal names its variable, the file and the reason; not JSON, says so', () => {
  withTempDir((dir) => {
    const missing = path.join(dir, 'missing.json');
    refusedWith(() => trustedIssuersFile({ TRUSTED_ISSUERS: missing }), 'TRUSTED_ISSUERS', `cannot read ${missing}: ENOENT`);
    refusedWith(() => trustedIssuersFile({ TRUSTED_ISSUERS: dir }), 'TRUSTED_ISSUERS', `cannot read ${dir}: EISDIR`);
    refusedWith(() => jwksFile({ K: missing }, 'K'), 'K', `cannot read ${missing}: ENOENT`);
    refusedWith(() => secretValue({ S_FILE: dir }, 'S'), 'S_FILE', `cannot read ${dir}: EISDIR`);
    const notJson = path.join(dir, 'x.json');
    writeFileSync(notJson, '{"keys": [');
    refusedWith(() => trustedIssuersFile({ TRUSTED_ISSUERS: notJson }), 'TRUSTED_ISSUERS', `${notJson} is not valid JSON`);
    refusedWith(() => jwksFile({ K: notJson }, 'K'), 'K', `${notJson} is not valid JSON`);
  });
});

test('TRUSTED_ISSUERS: a document that is a number, a string or a boolean is no object of issuers', () => {
  for (const doc of [5, 'idp.example', true]) {
    refusedWith(() => parseTrustedIssuers(doc), 'TRUSTED_ISSUERS', 'must be a JSON object {"<issuer>": {"keys": [JWK, …], "domains": ["<e-mail domain>", …]}}');
  }
});

test('STORE_URL: sqlite: counts only at the start', () => {
  refusedWith(() => storeUrl({ STORE_URL: 'xsqlite:/a.db' }), 'STORE_URL', 'must start with mongodb:// or sqlite:, got "xsqlite:/a.db"');
});

// ---- every setting against odd values: parsed or refused by name, never another error ----

test('every setting of every service, set to an odd value, is accepted or refused with a ConfigError, never a crash', () => {
  const variables = [
    ...'ALLOWED_USERS ALLOW_NEW_USERS APPLICATIONS ASSERTION_SKEW AUDIENCES BACKOFF_INFLIGHT BACKOFF_LOOP_DELAY_MS BACKOFF_SECONDS BIND_HOST'.split(' '),
    ...'CLIENT_STATE_CHANGES_PER_DAY DATA_DIR DEMO_APP_PORT DIRECTORY_ADDR DIRECTORY_METRICS_PORT DIRECTORY_PORT GATEWAY_METRICS_PORT GATEWAY_PORT'.split(' '),
    ...'GENERATION_CLAIM GRPC_DEADLINE_MS GRPC_TLS_CA GRPC_TLS_CERT GRPC_TLS_KEY HASH_BODY_LIMIT HAWK_SKEW INTERNAL_SECRET INTERNAL_SECRET_FILE'.split(' '),
    ...'LOGIN_METRICS_PORT LOGIN_PORT LOGIN_URL LOGIN_WORKERS MAINTENANCE_MODE MASTER_SECRETS MASTER_SECRETS_FILE MAX_ACCESS_TOKEN_LIFETIME'.split(' '),
    ...'MAX_ASSERTION_LIFETIME MAX_CERTIFICATE_LIFETIME MAX_INFLIGHT METRICS_HASH_SECRET METRICS_HASH_SECRET_FILE METRICS_HOST NODEASSIGN_ADDR'.split(' '),
    ...'NODEASSIGN_METRICS_PORT NODEASSIGN_PORT NODE_SECRETS NODE_SECRETS_FILE NODE_TYPE NODE_URL NONCE_CACHE_SIZE NONCE_PER_TOKEN NONCE_STORE'.split(' '),
    ...'NONCE_STORE_TIMEOUT_MS OAUTH_EMAIL_DOMAIN OAUTH_ISSUER OAUTH_JWKS OAUTH_JWKS_CACHE OAUTH_JWKS_MIN_INTERVAL OAUTH_JWKS_REFRESH OAUTH_SCOPE'.split(' '),
    ...'RELEASE_RATE RETRY_AFTER STORE_URL TOKEN_DURATION TOKEN_SECRETS TRUSTED_ISSUERS UPSTREAM_CONNECT_TIMEOUT_MS UPSTREAM_TIMEOUT_MS'.split(' '),
    ...'UPSTREAM_URL WEBHOOK_AUDIENCE WEBHOOK_JWKS WEBHOOK_JWKS_CACHE WEBHOOK_MAX_AGE'.split(' '),
  ];
  // Line breaks (a multi-line .env value), NUL, lone surrogates, sizes, number spellings, URL and path edge cases.
  const odd = [
    '\n', 'a\nb', 'a:1\nb:2', 'dns:///a:1\n', '\u0000', 'a\u0000b', '\ud800', '\u{1F4A5}', '   ', '\t1\t', 'x'.repeat(5000),
    '-1', '-0', '1.5', '1e3', '0x10', 'NaN', 'Infinity', '999999999999999999999', 'undefined', 'null', 'true',
    '%', '%zz', '[', '{', '}', ',', ',,', 'a,b', '#', '*', '@', '@/', '@./', '@/nonexistent/x', 'a@b',
    'http://', 'https://', 'https://[::1', 'https://a.example/%zz', 'http://u:p@127.0.0.1/', 'file:///etc/passwd',
    'mongodb://', 'sqlite:', 'redis://', 'rediss://:@/', 'ipv4:', 'dns:///', '/', '.', '..', '/dev/null', tmpdir(), 'sync/', '/1.5', 'sync/1.5/x',
  ];
  const services: Record<string, (env: Record<string, string>) => unknown> = {
    ...builders,
    login: (env) => loginConfig({ INTERNAL_SECRET: INTERNAL, MASTER_SECRETS: MASTER, OAUTH_JWKS: 'https://accounts.example/jwks', ...env }),
    loginWorkers: (env) => loginWorkers(env),
    demoApp: (env) => demoAppConfig(env),
    demoClient: (env) => demoClientConfig(env),
  };
  const crashes: string[] = [];
  for (const [service, build] of Object.entries(services)) {
    for (const name of variables) {
      for (const value of odd) {
        try {
          build({ [name]: value });
        } catch (e) {
          if (!(e instanceof ConfigError)) crashes.push(`${service} ${name}=${JSON.stringify(value).slice(0, 40)}: ${String(e)}`);
        }
      }
    }
  }
  assert.deepEqual(crashes, []);
});
