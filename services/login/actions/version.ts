// GET /__version__ — name and version from package.json.
import type { Middleware } from 'koa';
import { VERSION_INFO } from '../../../lib/version.js';
import { sendJson } from '../error-handler.js';
import { allowMethods, GET_HEAD } from '../shared.js';

export function versionEndpoint(): Middleware[] {
  return [
    allowMethods(GET_HEAD),
    async function version(ctx) {
      sendJson(ctx, 200, VERSION_INFO);
    },
  ];
}
