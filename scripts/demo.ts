// `npm run demo [-- --email someone@example.com]`: the whole round trip
// against a running `npm start`, through the SDK: a development assertion,
// a token from the login service, then Hawk-signed requests through the
// node-gateway to the demo application. Never prints the assertion or keys.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { demoClientConfig, type DemoClientConfig } from '../lib/config.js';
import { ConfigError } from '../lib/errors.js';
import { DEV_IDP_FILE, loadOrCreateDevIdp } from '../lib/idp.js';
import { hawkFetch, InvalidCredentialsError, LoginError, TokenClient } from '../sdk/index.js';

const USAGE = `usage: npm run demo [-- --email <address>]

Environment: LOGIN_URL (default http://127.0.0.1:8000), DATA_DIR (default ./data,
where npm start keeps the development IdP key), APPLICATIONS (first entry is used).`;

class DemoFailure extends Error {}

const say = (line: string) => process.stdout.write(line + '\n');

async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { email: { type: 'string', default: 'demo@example.com' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    say(USAGE);
    return;
  }
  const email = values.email!;
  const config = demoClientConfig(process.env);
  await roundTrip(config, email);
}

async function roundTrip(config: DemoClientConfig, email: string): Promise<void> {
  const idpFile = path.join(config.dataDir, DEV_IDP_FILE);
  // Creating a key here would make one the stack does not trust.
  if (!existsSync(idpFile)) {
    throw new DemoFailure(`no development IdP key at ${idpFile}: is \`npm start\` running, with the same DATA_DIR?`);
  }
  const idp = await loadOrCreateDevIdp(config.dataDir);
  const loginEndpoint = `${config.loginUrl}/1.0/${config.app}/${config.version}`;
  say(`login service: ${loginEndpoint}`);

  const tokens = new TokenClient({
    loginUrl: config.loginUrl,
    app: config.app,
    version: config.version,
    assertion: async (audience) => {
      const assertion = await idp.makeAssertion(email, { audience });
      say(`1. assertion made for ${email} by ${idp.issuer} (audience ${audience}, ${assertion.length} characters, not shown)`);
      return assertion;
    },
  });

  let token;
  try {
    token = await tokens.getToken();
  } catch (e) {
    throw explainLoginFailure(e, config);
  }
  say(`2. token received: uid=${token.uid} api_endpoint=${token.api_endpoint} duration=${token.duration}s (token and key not shown)`);

  const api = hawkFetch(tokens);
  const getUrl = `${token.api_endpoint}/hello?from=demo`;
  say(`3. Hawk-signed GET ${getUrl} through the node-gateway`);
  const got = await api('hello?from=demo');
  const getReply = await replyOf(got, 'GET');
  say(`   demo app answered ${got.status}: uid=${getReply.uid} method=${getReply.method} path=${getReply.path}`);
  if (String(getReply.uid) !== String(token.uid)) throw new DemoFailure(`the demo app saw uid ${getReply.uid}, expected ${token.uid}`);

  const body = JSON.stringify({ note: 'hello from npm run demo', at: new Date().toISOString() });
  say(`4. Hawk-signed POST ${token.api_endpoint}/notes with a ${Buffer.byteLength(body)}-byte JSON body (payload hash signed)`);
  const posted = await api('notes', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  const postReply = await replyOf(posted, 'POST');
  say(`   demo app answered ${posted.status}: uid=${postReply.uid} method=${postReply.method} bodyBytes=${postReply.bodyBytes}`);
  if (String(postReply.uid) !== String(token.uid)) throw new DemoFailure(`the demo app saw uid ${postReply.uid}, expected ${token.uid}`);

  say('round trip complete: login → token → Hawk → node-gateway → demo app');
}

interface EchoReply {
  uid: string | null;
  method: string;
  path: string;
  bodyBytes: number;
}

async function replyOf(res: Response, what: string): Promise<EchoReply> {
  const text = await res.text();
  if (res.status !== 200) throw new DemoFailure(`the signed ${what} was answered ${res.status}: ${text.slice(0, 300)}`);
  try {
    return JSON.parse(text) as EchoReply;
  } catch {
    throw new DemoFailure(`the signed ${what} was answered with something other than JSON: ${text.slice(0, 300)}`);
  }
}

/** fetch's own failure (refused, reset, unknown host ...), with its cause in words. */
function networkFailure(e: unknown): string | null {
  if (!(e instanceof TypeError) || e.message !== 'fetch failed') return null;
  const cause = e.cause as { code?: string; message?: string } | undefined;
  return cause?.code ?? cause?.message ?? 'no connection';
}

function explainLoginFailure(e: unknown, config: DemoClientConfig): unknown {
  const failure = networkFailure(e);
  if (failure) {
    return new DemoFailure(
      `cannot reach the login service at ${config.loginUrl} (${failure}): is \`npm start\` running? (set LOGIN_URL if it listens elsewhere)`,
    );
  }
  if (e instanceof InvalidCredentialsError) {
    return new DemoFailure(
      `${e.message}\n   the assertion was refused: DATA_DIR must be the one \`npm start\` uses (its development key), and LOGIN_URL its login URL (the audience).`,
    );
  }
  if (e instanceof LoginError) return new DemoFailure(e.message);
  return e;
}

main(process.argv.slice(2)).catch((e: unknown) => {
  if (e instanceof DemoFailure || e instanceof ConfigError) {
    process.stderr.write(`demo failed: ${e.message}\n`);
  } else if (networkFailure(e)) {
    process.stderr.write(`demo failed: a service stopped answering (${networkFailure(e)}): is \`npm start\` running?\n`);
  } else {
    process.stderr.write(`demo failed: ${(e as Error)?.message ?? String(e)}\n`);
  }
  process.exit(1);
});
