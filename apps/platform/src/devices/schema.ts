import { DateTime, FLEET_SORTS, FLEET_STATES, type FleetSort, type FleetState, Uuid } from '@ooh/protocol';
import { type Static, Type } from '@sinclair/typebox';

// The answers the console reads (enrolment, a device, the fleet's states and sorts, a device's activity) are
// @ooh/protocol's (schemas/console.ts): one statement for the platform, which serializes through them, and the console.
export {
  CertificateView,
  DeviceActivity,
  DeviceView,
  EnrolAnswer,
  FLEET_SORTS,
  FLEET_STATES,
  type FleetSort,
  type FleetState,
} from '@ooh/protocol';

/** base64 SPKI DER of a P-256 key is 124 characters; PEM is accepted too. */
const PublicKey = Type.String({ minLength: 40, maxLength: 400 });
/** A P-256 CSR is some 400 bytes; generous room for PEM armour and extensions. */
export const CSR_MAX_CHARS = 8192;
const Csr = Type.String({ minLength: 1, maxLength: CSR_MAX_CHARS });
const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);

export const EnrolBody = Type.Object(
  { structure_id: Uuid, public_key: PublicKey, csr: Type.Optional(Csr) },
  { additionalProperties: false },
);
export type EnrolBody = Static<typeof EnrolBody>;

export const ReEnrolBody = Type.Object(
  { public_key: PublicKey, csr: Type.Optional(Csr) },
  { additionalProperties: false },
);
export type ReEnrolBody = Static<typeof ReEnrolBody>;

export const ForceGrantAnswer = Type.Object({ device_id: Uuid, until: DateTime });

/** GET {devices_url}/d/v1/whoami: what the client certificate proves (for agents and technicians). */
export const WhoAmIAnswer = Type.Object({
  device_id: Uuid,
  structure_code: Type.String(),
  certificate_serial: Type.String(),
  certificate_state: Type.String(),
  not_after: DateTime,
  old_valid_until: Nullable(DateTime),
});

/*
 * The fleet list's query (GET /api/v1/console/devices; issue 22, item 2: "server-side paging, search by device or
 * structure code, filters on those states, sorting by last batch and queue lag"). Every parameter is checked: an
 * unknown one, a repeated one or a value out of its set is 422 validation_failed, never an empty or a partial list.
 */
export type FleetOrder = 'asc' | 'desc';
/** Without `order`: codes A to Z, the longest-quiet devices first, the most behind first. */
export const FLEET_SORT_DEFAULT_ORDER: Record<FleetSort, FleetOrder> = {
  structure: 'asc',
  last_batch: 'asc',
  queue_lag: 'desc',
};
export const FLEET_DEFAULT_LIMIT = 50;
export const FLEET_MAX_LIMIT = 200;
/** Characters of a search: a device id is 36, structure codes are short. */
export const FLEET_SEARCH_MAX = 100;

export const FleetQuerystring = Type.Object(
  {
    q: Type.Optional(Type.String({ maxLength: FLEET_SEARCH_MAX, pattern: '^[^\\u0000-\\u001f\\u007f]*$' })),
    state: Type.Optional(Type.Union(FLEET_STATES.map((s) => Type.Literal(s)))),
    sort: Type.Optional(Type.Union(FLEET_SORTS.map((s) => Type.Literal(s)))),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
    // Query values are strings (no coercion): 1 to 200, and 0 to 9,999,999.
    limit: Type.Optional(Type.String({ pattern: '^(?:[1-9]|[1-9][0-9]|1[0-9][0-9]|200)$' })),
    offset: Type.Optional(Type.String({ pattern: '^(?:0|[1-9][0-9]{0,6})$' })),
  },
  { additionalProperties: false },
);
export type FleetQuerystring = Static<typeof FleetQuerystring>;

export interface FleetQuery {
  q?: string;
  state?: FleetState;
  sort?: FleetSort;
  order?: FleetOrder;
  limit?: number;
  offset?: number;
}

export function fleetQueryOf(query: FleetQuerystring): FleetQuery {
  return {
    ...(query.q !== undefined ? { q: query.q } : {}),
    ...(query.state ? { state: query.state } : {}),
    ...(query.sort ? { sort: query.sort } : {}),
    ...(query.order ? { order: query.order } : {}),
    ...(query.limit !== undefined ? { limit: Number(query.limit) } : {}),
    ...(query.offset !== undefined ? { offset: Number(query.offset) } : {}),
  };
}
