import type { RouteAuth } from '../auth/principal.js';

/** Authority administrators (console routes, unless a route says otherwise). */
export const AUTHORITY_ADMIN: RouteAuth = { anyOf: [{ scope: 'console:admin', kinds: ['authority'] }] };

/** Fleet management: the authority, or an operator for its own organisation. */
export const FLEET_ADMIN: RouteAuth = {
  anyOf: [
    { scope: 'console:admin', kinds: ['authority'] },
    { scope: 'console:fleet', kinds: ['operator'] },
  ],
};
