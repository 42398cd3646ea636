// The baseline for the login service: a bare Koa hello-world on node:http,
// the least any Koa service on this machine can cost per request. It prints
// the same kind of JSON ready line as our services, so bench/proc.ts starts it alike.
import Koa from 'koa';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const app = new Koa();
app.use(async (ctx) => {
  ctx.type = 'application/json';
  ctx.body = '{"hello":"world"}';
});
const server = createServer(app.callback());
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ msg: 'listening', port: (server.address() as AddressInfo).port }) + '\n');
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
