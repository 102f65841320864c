import type { OrganisationKind, Scope } from '../auth/principal.js';

export const CONSOLE_ROLES = ['admin', 'member'] as const;
export type ConsoleRole = (typeof CONSOLE_ROLES)[number];

/**
 * The scopes a console session holds, by the kind of the user's organisation and the user's role
 * (apps/platform/console/README.md). Sessions never hold write:plays: proof of play comes from signed machine channels only.
 */
export function sessionScopes(kind: OrganisationKind, role: ConsoleRole): Scope[] {
  switch (kind) {
    case 'authority':
      // Administrators decide submissions and manage the console; members read everything the authority sees.
      return role === 'admin'
        ? ['console:admin', 'console:read', 'read:submissions', 'read:creatives']
        : ['console:read', 'read:submissions', 'read:creatives'];
    case 'operator':
      // An operator's administrators also manage its fleet (devices, CMS installations).
      return role === 'admin'
        ? ['write:submissions', 'read:submissions', 'read:creatives', 'console:fleet']
        : ['write:submissions', 'read:submissions', 'read:creatives'];
    case 'agency':
    case 'advertiser':
      return ['write:submissions', 'read:submissions', 'read:creatives'];
  }
}
