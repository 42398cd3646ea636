// Entry point of the operator CLI: `npm run cli -- <command>`, `npx tsx cli/main.ts`,
// or `node dist/cli/main.js` in the Docker image.
import { runCli } from './run.js';

const code = await runCli(process.argv.slice(2), process.env, {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  stderrIsTTY: process.stderr.isTTY,
});
// Writes to pipes and files are synchronous on Linux, so nothing is lost; exiting
// here keeps a lingering socket (a keep-alive fetch, a closing channel) from delaying it.
process.exit(code);
