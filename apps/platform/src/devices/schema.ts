import { DateTime, Uuid } from '@ooh/protocol';
import { type Static, Type } from '@sinclair/typebox';

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

/** Answer of enrolment and re-enrolment; the certificate fields only when a CSR was given. */
export const EnrolAnswer = Type.Object({
  device_id: Uuid,
  structure_code: Type.String(),
  certificate_pem: Type.Optional(Type.String()),
  chain_pem: Type.Optional(Type.String()),
  not_after: Type.Optional(DateTime),
});
export type EnrolAnswer = Static<typeof EnrolAnswer>;

export const ForceGrantAnswer = Type.Object({ device_id: Uuid, until: DateTime });

export const CertificateView = Type.Object({
  serial: Type.String(),
  state: Type.Union([
    Type.Literal('current'),
    Type.Literal('previous-until'),
    Type.Literal('superseded'),
    Type.Literal('revoked'),
  ]),
  not_before: DateTime,
  not_after: DateTime,
  issued_at: DateTime,
  issued_by: Type.String(),
  first_used_at: Nullable(DateTime),
  replaced_at: Nullable(DateTime),
  old_valid_until: Nullable(DateTime),
  key_fingerprint: Type.String(),
  certificate_pem: Type.String(),
});

export const DeviceView = Type.Object({
  device_id: Uuid,
  structure_id: Uuid,
  structure_code: Type.String(),
  organisation_id: Uuid,
  created_at: DateTime,
  re_enrolled_at: Nullable(DateTime),
  revoked_at: Nullable(DateTime),
  /** End of the live force-renewal grant, or null. */
  force_renewal_until: Nullable(DateTime),
  keys: Type.Array(
    Type.Object({
      fingerprint: Type.String(),
      public_key: Type.String(),
      registered_at: DateTime,
      accepted_until: Nullable(DateTime),
    }),
  ),
  certificates: Type.Array(CertificateView),
});
export type DeviceView = Static<typeof DeviceView>;

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

const Counted = Type.Integer({ minimum: 0 });

/** GET /api/v1/console/devices/{id}/activity: what the device page shows beside its certificates. */
export const DeviceActivity = Type.Object({
  /** Newest first, at most DEVICE_ACTIVITY_BATCHES: each stored batch and the answer it got. */
  batches: Type.Array(
    Type.Object({
      batch_seq: Counted,
      channel: Type.String(),
      received_at: DateTime,
      /** Plays in the body (spec: record_count). */
      record_count: Counted,
      queue_lag_seconds: Type.Union([Counted, Type.Null()]),
      /** The agent's clock (the signed body's ts) minus the platform's at receipt; null without ts. */
      clock_offset_ms: Type.Union([Type.Integer(), Type.Null()]),
      answer: Type.Object({
        received: Counted,
        accepted: Counted,
        duplicates: Counted,
        refused: Counted,
        flagged: Counted,
        duplicate: Type.Boolean(),
        /** Refused records by reason. */
        refusals: Type.Array(Type.Object({ reason: Type.String(), records: Counted })),
      }),
    }),
  ),
  /** The agent's clock offset by its newest signed batch (null: none sent a ts). */
  clock_offset: Type.Union([Type.Object({ ms: Type.Integer(), at: DateTime }), Type.Null()]),
  /** The player's reject events (it refused to show a creative), newest first. */
  rejects: Type.Array(
    Type.Object({
      at: Nullable(DateTime),
      received_at: DateTime,
      seq: Type.Union([Counted, Type.Null()]),
      code: Nullable(Type.String()),
      approval_number: Nullable(Type.String()),
      media_sha256: Nullable(Type.String()),
      /** The file the player refused and why, in its own words (apps/agent/src/media/library.ts). */
      file: Nullable(Type.String()),
      reason: Nullable(Type.String()),
    }),
  ),
  /** Its refused handshakes and certificates, newest first (migration 070). */
  refusals: Type.Array(
    Type.Object({
      at: DateTime,
      reason: Type.String(),
      serial: Nullable(Type.String()),
      address: Nullable(Type.String()),
      refusals: Counted,
    }),
  ),
});
export type DeviceActivity = Static<typeof DeviceActivity>;
