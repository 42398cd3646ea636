// `npm start`: the whole system on one machine (see scripts/stack.ts).
import { ConfigError } from '../lib/errors.js';
import { applications } from '../lib/config.js';
import { DEV_IDP_WARNING } from '../lib/idp.js';
import { startStack } from './stack.js';

async function main(): Promise<void> {
  const stack = await startStack(process.env);
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
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    process.stdout.write('stopping...\n');
    await stack.close();
    process.stdout.write('stopped\n');
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((e) => {
  if (e instanceof ConfigError) {
    process.stderr.write(`configuration error: ${e.message}\n`);
  } else {
    process.stderr.write(`failed to start: ${(e as Error).message}\n`);
  }
  process.exit(1);
});
