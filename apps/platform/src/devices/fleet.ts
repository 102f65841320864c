import { DateTime, Uuid } from '@ooh/protocol';
import { type Static, Type } from '@sinclair/typebox';
import { AlertView, openAlertsOf } from '../alerts/index.js';
import type { Db } from '../db/pool.js';
import { refusalsView } from './refusals.js';
import { DeviceStorage, deviceStorageOf } from './storage.js';

const NullableDateTime = Type.Union([DateTime, Type.Null()]);
const NullableInteger = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]);
const NullableString = Type.Union([Type.String(), Type.Null()]);

/**
 * A device the platform keeps answering 5xx (migration 069): since its first 5xx after its newest stored batch of
 * records, how many 5xx answers since, the last one, the batch it answered (null when not a batch) and its problem
 * code.
 */
const Stuck = Type.Object({
  since: DateTime,
  count: Type.Integer({ minimum: 1 }),
  last_at: DateTime,
  batch_seq: NullableInteger,
  reason: Type.String(),
});

const RecentRefusal = Type.Object({
  at: DateTime,
  reason: Type.String(),
  subject: NullableString,
  serial: NullableString,
  address: NullableString,
  device_id: Type.Union([Uuid, Type.Null()]),
});

/** GET /api/v1/console/devices (apps/platform/console/README.md "Fleet"; src/devices/README.md). */
export const FleetList = Type.Object({
  items: Type.Array(
    Type.Object({
      device_id: Uuid,
      structure_id: Uuid,
      structure_code: Type.String(),
      organisation_id: Uuid,
      created_at: DateTime,
      revoked_at: NullableDateTime,
      force_renewal_until: NullableDateTime,
      certificate_not_after: NullableDateTime,
      last_batch_at: NullableDateTime,
      last_batch_seq: NullableInteger,
      queue_lag_seconds: NullableInteger,
      stuck: Type.Union([Stuck, Type.Null()]),
      handshake_refusals_24h: Type.Integer({ minimum: 0 }),
      /** The disk state the player last reported; null if it never did (src/devices/storage.ts, migration 074). */
      storage: Type.Union([DeviceStorage, Type.Null()]),
    }),
  ),
  handshake_refusals: Type.Object({
    last_24h: Type.Integer({ minimum: 0 }),
    recent: Type.Array(RecentRefusal, { maxItems: 20 }),
  }),
  /** Open alerts of the devices and CMS players the caller sees, newest first (src/alerts, docs/alerts.md). */
  alerts: Type.Array(AlertView),
});
export type FleetList = Static<typeof FleetList>;

interface FleetRow {
  device_id: string;
  structure_id: string;
  structure_code: string;
  organisation_id: string;
  created_at: Date;
  revoked_at: Date | null;
  force_renewal_until: Date | null;
  certificate_not_after: Date | null;
  last_batch_at: Date | null;
  last_batch_seq: number | null;
  queue_lag_seconds: number | null;
  stuck_since: Date | null;
  stuck_count: number | null;
  stuck_last_at: Date | null;
  stuck_batch_seq: number | null;
  stuck_reason: string | null;
  handshake_refusals_24h: number;
}

/**
 * The fleet list: devices with structure, current certificate expiry, force-renewal allowance, last batch and queue
 * lag (apps/platform/console/README.md "Fleet": the receive time of the device's newest batch minus the newest time
 * a record in it carries, never below 0; null without a batch or without a timed record in it). One index read per
 * device (migration 061); the batch row holds the newest record time (migration 063).
 *
 * Stuck (migration 069): no batch of records of the device was stored since its last 5xx answer (a batch of no
 * records, the agent's probe, does not count: apps/agent/README.md "Nothing resent forever"). Refusals of its client certificates in the 24 hours before now (migration
 * 070). $1: the caller's organisation (null for the authority: every device); $2: now.
 */
export const FLEET_LIST_SQL = `
   SELECT d.id AS device_id, d.structure_id, s.code AS structure_code, s.organisation_id, d.created_at,
          d.revoked_at,
          (SELECT max(g.valid_until) FROM device_force_renewal_grants g
            WHERE g.device_id = d.id AND g.valid_until > $2 AND g.used_at IS NULL) AS force_renewal_until,
          -- The current certificate: not replaced by a renewal, nor ended by a re-enrolment.
          (SELECT c.not_after FROM device_certificates c WHERE c.device_id = d.id AND c.replaced_at IS NULL
            ORDER BY c.issued_at DESC LIMIT 1) AS certificate_not_after,
          b.received_at AS last_batch_at, b.batch_seq AS last_batch_seq,
          -- greatest() skips nulls, hence the CASE: no timed record, no lag.
          CASE WHEN b.newest_record_at IS NOT NULL
               THEN greatest(0, floor(extract(epoch FROM b.received_at - b.newest_record_at)))::bigint
          END AS queue_lag_seconds,
          e.since AS stuck_since, e.answers AS stuck_count, e.last_at AS stuck_last_at,
          e.batch_seq AS stuck_batch_seq, e.code AS stuck_reason,
          (SELECT coalesce(sum(r.refusals), 0) FROM device_handshake_refusal_counts r
            WHERE r.device_id = d.id AND r.minute > $2::timestamptz - interval '24 hours'
              AND r.minute <= $2::timestamptz)::int AS handshake_refusals_24h
     FROM devices d JOIN structures s ON s.id = d.structure_id
     LEFT JOIN LATERAL (SELECT received_at, batch_seq, newest_record_at FROM pop_batches
                         WHERE owner = 'device:' || d.id
                         ORDER BY received_at DESC, id DESC LIMIT 1) b ON true
     LEFT JOIN device_server_errors e
            ON e.device_id = d.id
           AND NOT EXISTS (SELECT 1 FROM pop_batches r
                            WHERE r.owner = 'device:' || d.id AND r.received_at >= e.last_at
                              AND (r.answer->>'received')::int > 0)
    WHERE $1::uuid IS NULL OR s.organisation_id = $1
    ORDER BY s.code, d.id`;

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** The fleet as `organisationId` sees it (null: the authority, every device) at `now`. */
export async function fleetList(db: Db, organisationId: string | null, now: Date): Promise<FleetList> {
  const [{ rows }, handshakeRefusals, alerts, storage] = await Promise.all([
    db.query<FleetRow>(FLEET_LIST_SQL, [organisationId, now]),
    refusalsView(db, organisationId, now),
    openAlertsOf(db, organisationId),
    deviceStorageOf(db, organisationId),
  ]);
  return {
    items: rows.map((row) => ({
      device_id: row.device_id,
      structure_id: row.structure_id,
      structure_code: row.structure_code,
      organisation_id: row.organisation_id,
      created_at: row.created_at.toISOString(),
      revoked_at: iso(row.revoked_at),
      force_renewal_until: iso(row.force_renewal_until),
      certificate_not_after: iso(row.certificate_not_after),
      last_batch_at: iso(row.last_batch_at),
      last_batch_seq: row.last_batch_seq === null ? null : Number(row.last_batch_seq),
      queue_lag_seconds: row.queue_lag_seconds === null ? null : Number(row.queue_lag_seconds),
      stuck:
        row.stuck_since && row.stuck_last_at
          ? {
              since: row.stuck_since.toISOString(),
              count: row.stuck_count ?? 1,
              last_at: row.stuck_last_at.toISOString(),
              batch_seq: row.stuck_batch_seq === null ? null : Number(row.stuck_batch_seq),
              reason: row.stuck_reason ?? 'internal_error',
            }
          : null,
      handshake_refusals_24h: row.handshake_refusals_24h,
      storage: storage.get(row.device_id) ?? null,
    })),
    handshake_refusals: handshakeRefusals,
    alerts,
  };
}
