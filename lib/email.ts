// E-mail addresses as user keys, and which e-mail domains an issuer may
// certify (DESIGN §10). Pure functions: login normalises every certified
// address before it reaches the directory, and config normalises the
// domains of TRUSTED_ISSUERS the same way, so both sides compare alike.

/** In a TRUSTED_ISSUERS `domains` list: the issuer may certify any domain. */
export const ANY_DOMAIN = '*';

/**
 * One spelling per address: NFC throughout, domain lowercased. The local part
 * keeps its case (RFC 5321 leaves it to the mailbox's host), so an IdP whose
 * accounts are case-insensitive must send one canonical spelling of it.
 */
export function normalizeEmail(email: string): string {
  const at = email.lastIndexOf('@');
  if (at < 0) return email.normalize('NFC');
  return `${email.slice(0, at).normalize('NFC')}@${normalizeDomain(email.slice(at + 1))}`;
}

/** Lowercase, then NFC (lowercasing can leave combining marks to compose). */
export function normalizeDomain(domain: string): string {
  return domain.toLowerCase().normalize('NFC');
}

/** The part after the last `@`, as normalizeEmail spells it. */
export function emailDomain(email: string): string {
  return normalizeDomain(email.slice(email.lastIndexOf('@') + 1));
}

/**
 * Whether an issuer bound to `domains` (normalised) may certify `email`.
 * Exact match only: `corp.example` does not cover `eu.corp.example`, so a
 * subdomain run by someone else cannot be claimed by accident.
 */
export function issuerMayCertify(domains: readonly string[], email: string): boolean {
  return domains.includes(ANY_DOMAIN) || domains.includes(emailDomain(email));
}
