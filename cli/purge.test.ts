import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { parseHawkHeader } from '../lib/hawk.js';
import { nodeSecrets, parseToken } from '../lib/token.js';
import { nodeDeleteRequest } from './purge.js';

const MASTERS = [randomBytes(32).toString('hex'), randomBytes(32).toString('hex')];
const NODE = 'https://node-1.example';

test("nodeDeleteRequest: the purger's token is signed as login signs (TOKEN_SECRETS), for that uid and node", () => {
  const entry = { uid: 17, node: NODE };
  const now = 1_700_000_000;
  const o = { masterSecrets: MASTERS, oauthEmailDomain: 'api.accounts.firefox.com' };
  const tokenOf = (authorization: string) => parseHawkHeader(authorization).id;

  const derived = nodeDeleteRequest({ email: 'a@example.com' }, entry, '1.5', { ...o, tokenSecrets: 'derived' }, now);
  assert.equal(derived.url, `${NODE}/1.5/17`);
  const { payload, secret } = parseToken(tokenOf(derived.authorization), nodeSecrets(MASTERS, NODE), now);
  assert.equal(secret, nodeSecrets(MASTERS, NODE)[0]);
  assert.deepEqual([payload.uid, payload.node], [17, NODE]);

  const master = nodeDeleteRequest({ email: 'a@example.com' }, entry, '1.5', { ...o, tokenSecrets: 'master' }, now);
  assert.equal(parseToken(tokenOf(master.authorization), MASTERS, now).secret, MASTERS[0]);
  assert.throws(() => parseToken(tokenOf(master.authorization), nodeSecrets(MASTERS, NODE), now), /signature/);
});
