import { test } from 'node:test';
import assert from 'node:assert/strict';
import { domain } from './config.js';
import { ConfigError } from './errors.js';

test('domain: default when unset, lowercased, refused (naming the variable) when not a domain name', () => {
  assert.equal(domain({}, 'OAUTH_EMAIL_DOMAIN', 'api.accounts.firefox.com'), 'api.accounts.firefox.com');
  assert.equal(domain({ OAUTH_EMAIL_DOMAIN: ' Corp.Example ' }, 'OAUTH_EMAIL_DOMAIN', 'x.example'), 'corp.example');
  assert.equal(domain({ OAUTH_EMAIL_DOMAIN: 'localhost' }, 'OAUTH_EMAIL_DOMAIN', 'x.example'), 'localhost');
  for (const bad of ['a@b.example', '-a.example', 'a-.example', 'a..example', '.example', 'a.example.', 'a b.example', `${'a'.repeat(254)}`]) {
    assert.throws(() => domain({ OAUTH_EMAIL_DOMAIN: bad }, 'OAUTH_EMAIL_DOMAIN', 'x.example'), (e: unknown) => e instanceof ConfigError && /OAUTH_EMAIL_DOMAIN/.test(e.message), bad);
  }
});
