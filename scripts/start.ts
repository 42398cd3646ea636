// `npm start`: the whole system on one machine (see scripts/stack.ts), each
// service in a process of its own, built at start (scripts/stack-part.ts).
import { ConfigError } from '../lib/errors.js';
import { applications } from '../lib/config.js';
import { DEV_IDP_WARNING } from '../lib/idp.js';
import { buildParts, startPartProcess } from './stack-part.js';
import { startStack, type Stack } from './stack.js';

let stack: Stack | undefined;
let stopping = false;

async function stop(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  process.stdout.write('stopping...\n');
  // Still starting: main() stops it once it is up.
  if (!stack) return;
  await stack.close();
  process.stdout.write('stopped\n');
  process.exit(code);
}

async function main(): Promise<void> {
  // Before anything starts: a signal that found no handler would end this process and leave the services running.
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));
  // A service that exits on its own leaves no whole stack: stop the others too.
  const partExited = (name: string, code: number | null): void => {
    if (stopping || !stack) return;
    process.stderr.write(`${name} exited unexpectedly (${code}): stopping the stack\n`);
    void stop(1);
  };
  const started = await startStack(process.env, startPartProcess(partExited, buildParts()));
  stack = started;
  if (stopping) {
    await started.close();
    process.stdout.write('stopped\n');
    process.exit(0);
  }
  const app = [...applications(process.env).entries()][0];
  const [appName, versions] = [app[0], [...app[1]][0]];
  const lines = [
    '',
    '  Token server running (embedded stack, SQLite under ' + stack.dataDir + ')',
    '',
    `  login:         ${stack.loginUrl}/1.0/${appName}/${versions}`,
    `  node-gateway:  ${stack.gatewayUrl}   (guards the demo application at ${stack.demoAppUrl})`,
    `  directory:     ${stack.directoryAddr}  (gRPC)`,
    `  nodeassign:    ${stack.nodeAssignAddr}  (gRPC)`,
    ...Object.entries(stack.metricsUrls).filter(([, url]) => url).map(([service, url]) => `  metrics:       ${url}   (${service})`),
    '',
    ...(stack.devIdpTrusted
      ? [
          '  !! DEVELOPMENT MODE: a development IdP key (' + stack.dataDir + '/dev-idp.json) is TRUSTED.',
          '  !! Never expose this stack to the internet; production uses TRUSTED_ISSUERS only.',
          '',
          '  Try it:',
          `    npm run cli -- dev assertion alice@example.com --audience ${stack.audience} --data-dir ${stack.dataDir}`,
          `    curl -H "Authorization: Assertion <that assertion>" ${stack.loginUrl}/1.0/${appName}/${versions}`,
          '  or the whole round trip (token + Hawk-signed request through the gateway):',
          '    npm run demo',
        ]
      : ['  Trusted issuers: the TRUSTED_ISSUERS file only (the development IdP is not trusted).']),
    '',
    '  Ctrl-C stops everything.',
    '',
  ];
  process.stdout.write(lines.join('\n') + '\n');
  // On stderr too, where it survives `npm start > /dev/null` and log collectors.
  if (stack.devIdpTrusted) process.stderr.write(`WARNING: ${DEV_IDP_WARNING}\n`);
}

main().catch((e) => {
  if (e instanceof ConfigError) {
    process.stderr.write(`configuration error: ${e.message}\n`);
  } else {
    process.stderr.write(`failed to start: ${(e as Error).message}\n`);
  }
  process.exit(1);
});
