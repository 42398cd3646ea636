// A test process in small, for tests/children.test.ts: starts one child that runs until signalled,
// through stopOnExit (with the folder given as its first argument, if any), prints the child's pid,
// then runs until killed, or, with "exit" as its second argument, exits at once.
import { spawn } from 'node:child_process';
import { stopOnExit } from './children.js';

const [dir, then] = process.argv.slice(2);
const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1e9)'], { stdio: 'ignore' });
stopOnExit(child, dir ? { dir } : {});
console.log(JSON.stringify({ child: child.pid }));
if (then === 'exit') process.exit(0);
setInterval(() => {}, 1e9);
