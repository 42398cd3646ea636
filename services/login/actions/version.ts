// GET /__version__ — name and version from package.json.
import type { Middleware } from 'koa';
import { readFileSync } from 'node:fs';
import { sendJson } from '../error-handler.js';
import { allowMethods, GET_HEAD } from '../shared.js';

const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { name: string; version: string };

export function versionEndpoint(): Middleware[] {
  const body = { name: pkg.name, version: pkg.version };
  return [
    allowMethods(GET_HEAD),
    async function version(ctx) {
      sendJson(ctx, 200, body);
    },
  ];
}
