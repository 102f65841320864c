export const ORGANISATION_KINDS = ['authority', 'operator', 'agency', 'advertiser'] as const;
export type OrganisationKind = (typeof ORGANISATION_KINDS)[number];

/** Every scope a key can hold (DESIGN.md section 3). */
export const SCOPES = [
  'write:submissions',
  'read:submissions',
  'read:creatives',
  // Ad Management API view of the organisation's own programmatic submissions (src/ad-management/README.md).
  'read:ads',
  'write:plays',
  'console:admin',
  'console:fleet',
  'console:read',
] as const;
export type Scope = (typeof SCOPES)[number];

export interface Organisation {
  id: string;
  name: string;
  kind: OrganisationKind;
}

/** Who is calling: an API key today, a console session beside it later. */
export interface Principal {
  type: 'api_key' | 'session';
  /** API key id or session id. */
  id: string;
  organisation: Organisation;
  scopes: ReadonlySet<string>;
  /** Allowed routes ('METHOD /pattern'); null allows every route the scopes allow. */
  routes: readonly string[] | null;
}

/**
 * What a route requires: any one of the grants. A grant names a scope and,
 * optionally, the organisation kinds that may use it.
 */
export interface RouteAuth {
  anyOf: readonly { scope: Scope; kinds?: readonly OrganisationKind[] }[];
}

export const isAuthority = (p: Principal): boolean => p.organisation.kind === 'authority';
