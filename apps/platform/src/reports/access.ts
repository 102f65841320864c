import type { Principal, RouteAuth } from '../auth/principal.js';
import { isAuthority } from '../auth/principal.js';

/**
 * Who may read reports (docs in src/reports/README.md "Who sees what"):
 * - the authority: everything;
 * - an operator: the plays on its own structures, whoever's campaign they belong to, and its own campaigns whole;
 * - an agency or an advertiser: its own campaigns (approvals of its own submissions), on every structure.
 * Anything else is 404 not_found, as for a submission of another organisation.
 */
export const READ_REPORTS: RouteAuth = {
  anyOf: [
    { scope: 'console:admin', kinds: ['authority'] },
    { scope: 'console:read', kinds: ['authority'] },
    { scope: 'write:submissions', kinds: ['operator', 'agency', 'advertiser'] },
    { scope: 'read:submissions', kinds: ['operator', 'agency', 'advertiser'] },
  ],
};

/** Fleet health: whoever sees the fleet list (authority administrators, operators with console:fleet), and the
 * authority's readers. */
export const READ_FLEET_HEALTH: RouteAuth = {
  anyOf: [
    { scope: 'console:admin', kinds: ['authority'] },
    { scope: 'console:read', kinds: ['authority'] },
    { scope: 'console:fleet', kinds: ['operator'] },
  ],
};

export interface Viewer {
  organisationId: string;
  organisationName: string;
  authority: boolean;
  operator: boolean;
}

export function viewerOf(principal: Principal): Viewer {
  return {
    organisationId: principal.organisation.id,
    organisationName: principal.organisation.name,
    authority: isAuthority(principal),
    operator: principal.organisation.kind === 'operator',
  };
}

/** The organisation a query is limited to: null for the authority (everything). */
export const scopeOf = (viewer: Viewer): string | null => (viewer.authority ? null : viewer.organisationId);
