import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ANY_DOMAIN, emailDomain, issuerMayCertify, normalizeDomain, normalizeEmail } from './email.js';

test('normalizeEmail: domain lowercased, NFC throughout, local part keeps its case', () => {
  assert.equal(normalizeEmail('Alice@EXAMPLE.com'), 'Alice@example.com');
  assert.equal(normalizeEmail('Jose\u0301@Exa\u0301mple.COM'), 'Jos\u00e9@ex\u00e1mple.com');
  assert.equal(normalizeEmail(normalizeEmail('Jose\u0301@Exa\u0301mple.COM')), 'Jos\u00e9@ex\u00e1mple.com', 'idempotent');
  assert.equal(normalizeEmail('"a@b"@C.example'), '"a@b"@c.example', 'the domain follows the last @');
  assert.equal(normalizeEmail('Cafe\u0301'), 'Caf\u00e9', 'no @: NFC only');
});

test('normalizeDomain: lowercase first, then NFC composes what lowercasing left', () => {
  assert.equal(normalizeDomain('EXAMPLE.Com'), 'example.com');
  // U+0130 lowercases to i + U+0307, which NFC keeps as two code points (no precomposed form).
  assert.equal(normalizeDomain('\u0130.example'), 'i\u0307.example');
  assert.equal(normalizeDomain('E\u0301.example'), '\u00e9.example');
});

test('emailDomain: the normalised part after the last @', () => {
  assert.equal(emailDomain('a@B.Example'), 'b.example');
  assert.equal(emailDomain('a@b@C'), 'c');
});

test('issuerMayCertify: exact domains, "*" for any, no subdomains', () => {
  assert.equal(issuerMayCertify(['corp.example'], 'a@corp.example'), true);
  assert.equal(issuerMayCertify(['corp.example'], 'a@CORP.example'), true, 'compared normalised');
  assert.equal(issuerMayCertify(['corp.example'], 'a@eu.corp.example'), false, 'subdomain');
  assert.equal(issuerMayCertify(['corp.example'], 'a@corp.example.evil'), false);
  assert.equal(issuerMayCertify(['corp.example', 'other.example'], 'a@other.example'), true);
  assert.equal(issuerMayCertify([ANY_DOMAIN], 'a@anything.example'), true);
  assert.equal(issuerMayCertify([], 'a@corp.example'), false);
});

// Found missing by mutation testing (npm run mutation -- lib/email.ts).

test('ANY_DOMAIN is "*", as TRUSTED_ISSUERS writes it', () => {
  assert.equal(issuerMayCertify(['*'], 'a@anything.example'), true);
  assert.equal(issuerMayCertify([''], 'a@anything.example'), false);
});

test('normalizeEmail: an @ at the very start still splits off a domain', () => {
  assert.equal(normalizeEmail('@EXAMPLE.com'), '@example.com');
});
