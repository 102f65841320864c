/**
 * The fleet list's word lists (GET /api/v1/console/devices `state` and `sort`), with no TypeBox: the platform's
 * query schema and the console's filter read the same lists, and the console's bundle takes them without a schema.
 */
export const FLEET_STATES = [
  'reporting',
  'silent',
  'never_reported',
  'screen_off',
  'expiring',
  'refused',
  'stuck',
  'revoked',
] as const;
export type FleetState = (typeof FLEET_STATES)[number];
export const FLEET_SORTS = ['structure', 'last_batch', 'queue_lag'] as const;
export type FleetSort = (typeof FLEET_SORTS)[number];
