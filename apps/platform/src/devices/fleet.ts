import {
  ALERT_KINDS,
  type DeviceActivity,
  DeviceActivityAnswer,
  type DeviceStorage,
  type FleetItem,
  FleetList,
} from '@ooh/protocol';
import { openAlertsOf } from '../alerts/index.js';
import type { Db } from '../db/pool.js';
import { refusalsView } from './refusals.js';
import {
  FLEET_DEFAULT_LIMIT,
  FLEET_SORT_DEFAULT_ORDER,
  type FleetQuery,
  type FleetSort,
  type FleetState,
} from './schema.js';
import { deviceStorageOf } from './storage.js';

export { DeviceActivityAnswer, FleetList };

/** spec: "A player renews on its own when less than 30 days are left": the fleet's warning threshold. */
export const EXPIRY_WARNING_DAYS = 30;

interface FleetRow {
  n_devices: number;
  n_reporting: number;
  n_silent: number;
  n_never_reported: number;
  n_screen_off: number;
  n_expiring: number;
  n_refused: number;
  n_stuck: number;
  n_revoked: number;
  n_total: number;
  // The page's columns: null on the one row of an empty page.
  device_id: string | null;
  structure_id: string;
  structure_code: string;
  organisation_id: string;
  created_at: Date;
  revoked_at: Date | null;
  force_renewal_until: Date | null;
  certificate_not_after: Date | null;
  last_batch_at: Date | null;
  last_batch_seq: string | number | null;
  queue_lag_seconds: string | number | null;
  stuck_since: Date | null;
  stuck_count: number | null;
  stuck_last_at: Date | null;
  stuck_batch_seq: string | number | null;
  stuck_reason: string | null;
  handshake_refusals_24h: number;
  status: FleetItem['status'];
  screen_off: boolean;
  open_alerts: FleetItem['open_alerts'];
}

/**
 * Each device with what the fleet page shows and filters on: structure, current certificate expiry, newest batch and
 * its queue lag (apps/platform/console/README.md "Fleet": the receive time of the device's newest batch minus the
 * newest time a record in it carries, never below 0; null without a batch or without a timed record in it), stuck,
 * refusals of the last 24 hours, the newest reported screen mode. One index read per device for each of the newest
 * batch (migration 061; the batch row holds the newest record time, migration 063), the newest mode_change (migration
 * 076) and the current certificate (the unique index of migration 010).
 *
 * Stuck (migration 069): no batch of records of the device was stored since its last 5xx answer (a batch of no
 * records, the agent's probe, does not count: apps/agent/README.md "Nothing resent forever"). Refusals of its client
 * certificates in the 24 hours before now (migration 070), summed once for the fleet.
 *
 * $1: the caller's organisation (null for the authority: every device); $2: now; $3: the silence threshold in ms;
 * $4: one device or null.
 */
const FLEET_BASE_SQL = `
   SELECT d.id AS device_id, d.structure_id, s.code AS structure_code, s.organisation_id, d.created_at,
          d.revoked_at, c.not_after AS certificate_not_after,
          b.received_at AS last_batch_at, b.batch_seq AS last_batch_seq,
          -- greatest() skips nulls, hence the CASE: no timed record, no lag.
          CASE WHEN b.newest_record_at IS NOT NULL
               THEN greatest(0, floor(extract(epoch FROM b.received_at - b.newest_record_at)))::bigint
          END AS queue_lag_seconds,
          e.since AS stuck_since, e.answers AS stuck_count, e.last_at AS stuck_last_at,
          e.batch_seq AS stuck_batch_seq, e.code AS stuck_reason,
          coalesce(r.refusals, 0)::int AS handshake_refusals_24h,
          coalesce(m.mode = 'screen_off', false) AS mode_screen_off
     FROM devices d JOIN structures s ON s.id = d.structure_id
     -- The current certificate: not replaced by a renewal, nor ended by a re-enrolment (at most one: migration 010).
     LEFT JOIN device_certificates c ON c.device_id = d.id AND c.replaced_at IS NULL
     LEFT JOIN LATERAL (SELECT received_at, batch_seq, newest_record_at FROM pop_batches
                         WHERE owner = 'device:' || d.id
                         ORDER BY received_at DESC, id DESC LIMIT 1) b ON true
     -- The newest mode_change by the order it was sent in (receive day, batch, position), as the screen_off alert
     -- reads it (src/alerts/repository.ts).
     LEFT JOIN LATERAL (SELECT pr.detail ->> 'to' AS mode FROM pop_records pr
                         WHERE pr.player_key = 'device:' || d.id AND pr.kind = 'mode_change'
                         ORDER BY pr.receive_day DESC, pr.batch_id DESC, pr.record_index DESC LIMIT 1) m ON true
     LEFT JOIN device_server_errors e
            ON e.device_id = d.id
           AND NOT EXISTS (SELECT 1 FROM pop_batches rb
                            WHERE rb.owner = 'device:' || d.id AND rb.received_at >= e.last_at
                              AND (rb.answer->>'received')::int > 0)
     LEFT JOIN (SELECT rc.device_id, sum(rc.refusals) AS refusals FROM device_handshake_refusal_counts rc
                 WHERE rc.device_id IS NOT NULL AND rc.minute > $2::timestamptz - interval '24 hours'
                   AND rc.minute <= $2::timestamptz
                 GROUP BY rc.device_id) r ON r.device_id = d.id
    WHERE ($1::uuid IS NULL OR s.organisation_id = $1) AND ($4::uuid IS NULL OR d.id = $4)`;

/** Each state of the filter as a condition on a row of `states` (the summary counts the same conditions). */
const STATE_SQL: Record<FleetState, string> = {
  reporting: `status = 'reporting'`,
  silent: `status = 'silent'`,
  never_reported: `status = 'never_reported'`,
  screen_off: `screen_off`,
  expiring: `expiring`,
  refused: `handshake_refusals_24h > 0`,
  stuck: `stuck`,
  revoked: `status = 'revoked'`,
};

/** Sort keys; every order ends with the structure code and the device id, and devices without the figure go last. */
const SORT_SQL: Record<FleetSort, (order: 'ASC' | 'DESC') => string> = {
  structure: (o) => `structure_code ${o}, device_id ${o}`,
  last_batch: (o) => `last_batch_at ${o} NULLS LAST, structure_code, device_id`,
  queue_lag: (o) => `queue_lag_seconds ${o} NULLS LAST, structure_code, device_id`,
};

/** A text searched for inside a structure code (ILIKE ... ESCAPE '\'): its wildcards taken literally. */
const likeContaining = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export interface FleetListOptions {
  /** Null: the authority (every device). */
  organisationId: string | null;
  now: Date;
  /** The device_silent alert's threshold (src/alerts/settings.ts). */
  silentAfterMs: number;
  query: FleetQuery;
  /** Only this device (the device page): its row, whatever the query. */
  deviceId?: string;
}

/** The SQL of one fleet page and its parameters (exported for the EXPLAIN checks of the tests). */
export function fleetListStatement(options: FleetListOptions): { sql: string; values: unknown[] } {
  const q = options.query;
  const sort = q.sort ?? 'structure';
  const order = q.order ?? FLEET_SORT_DEFAULT_ORDER[sort];
  const limit = q.limit ?? FLEET_DEFAULT_LIMIT;
  const offset = q.offset ?? 0;
  const values: unknown[] = [
    options.organisationId,
    options.now,
    options.silentAfterMs,
    options.deviceId ?? null,
  ];
  const where: string[] = [];
  if (q.state) where.push(STATE_SQL[q.state]);
  const search = q.q?.trim();
  if (search) {
    values.push(likeContaining(search));
    const code = `structure_code ILIKE $${values.length} ESCAPE '\\'`;
    // A device id is searched by its beginning (the console shows the first 8 characters), in any case.
    if (/^[0-9a-f-]+$/i.test(search)) {
      values.push(`${search.toLowerCase()}%`);
      where.push(`(${code} OR device_id::text LIKE $${values.length})`);
    } else {
      where.push(code);
    }
  }
  values.push(limit, offset);
  const orderBy = SORT_SQL[sort](order === 'desc' ? 'DESC' : 'ASC');
  const sql = `
WITH base AS MATERIALIZED (${FLEET_BASE_SQL}),
watch AS (SELECT watching_since FROM alert_monitor),
states AS MATERIALIZED (
  SELECT base.*,
         CASE WHEN revoked_at IS NOT NULL THEN 'revoked'
              WHEN last_batch_at IS NULL THEN 'never_reported'
              WHEN greatest(last_batch_at, (SELECT watching_since FROM watch))
                   <= $2::timestamptz - $3 * interval '1 millisecond' THEN 'silent'
              ELSE 'reporting' END AS status,
         revoked_at IS NULL AND mode_screen_off AS screen_off,
         -- Days of 24 hours, as the agent and the console count them: interval 'N days' would be calendar days of the
         -- session's time zone (721 hours across 29 February 2024 in Asia/Almaty, 719 across a spring change).
         revoked_at IS NULL AND certificate_not_after < $2::timestamptz + interval '${EXPIRY_WARNING_DAYS * 24} hours'
           AS expiring,
         revoked_at IS NULL AND stuck_since IS NOT NULL AS stuck
    FROM base),
matched AS (SELECT * FROM states${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''}),
summary AS (
  SELECT count(*)::int AS n_devices,
         count(*) FILTER (WHERE ${STATE_SQL.reporting})::int AS n_reporting,
         count(*) FILTER (WHERE ${STATE_SQL.silent})::int AS n_silent,
         count(*) FILTER (WHERE ${STATE_SQL.never_reported})::int AS n_never_reported,
         count(*) FILTER (WHERE ${STATE_SQL.screen_off})::int AS n_screen_off,
         count(*) FILTER (WHERE ${STATE_SQL.expiring})::int AS n_expiring,
         count(*) FILTER (WHERE ${STATE_SQL.refused})::int AS n_refused,
         count(*) FILTER (WHERE ${STATE_SQL.stuck})::int AS n_stuck,
         count(*) FILTER (WHERE ${STATE_SQL.revoked})::int AS n_revoked,
         (SELECT count(*) FROM matched)::int AS n_total
    FROM states),
page AS (SELECT matched.*, row_number() OVER (ORDER BY ${orderBy}) AS ordinal
           FROM matched ORDER BY ${orderBy} LIMIT $${values.length - 1} OFFSET $${values.length})
SELECT summary.*, page.*,
       (SELECT max(g.valid_until) FROM device_force_renewal_grants g
         WHERE g.device_id = page.device_id AND g.valid_until > $2 AND g.used_at IS NULL) AS force_renewal_until,
       ARRAY(SELECT a.kind FROM alerts a
              WHERE a.kind = ANY ('{${ALERT_KINDS.join(',')}}'::text[]) AND a.subject_key = 'device:' || page.device_id
                AND a.resolved_at IS NULL ORDER BY a.kind) AS open_alerts
  FROM summary LEFT JOIN page ON true
 ORDER BY page.ordinal`;
  return { sql, values };
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);
const integer = (v: string | number | null): number | null => (v === null ? null : Number(v));

function itemOf(row: FleetRow, storage: Map<string, DeviceStorage>): FleetItem {
  return {
    device_id: row.device_id!,
    structure_id: row.structure_id,
    structure_code: row.structure_code,
    organisation_id: row.organisation_id,
    created_at: row.created_at.toISOString(),
    revoked_at: iso(row.revoked_at),
    force_renewal_until: iso(row.force_renewal_until),
    certificate_not_after: iso(row.certificate_not_after),
    last_batch_at: iso(row.last_batch_at),
    last_batch_seq: integer(row.last_batch_seq),
    queue_lag_seconds: integer(row.queue_lag_seconds),
    stuck:
      row.stuck_since && row.stuck_last_at
        ? {
            since: row.stuck_since.toISOString(),
            count: row.stuck_count ?? 1,
            last_at: row.stuck_last_at.toISOString(),
            batch_seq: integer(row.stuck_batch_seq),
            reason: row.stuck_reason ?? 'internal_error',
          }
        : null,
    handshake_refusals_24h: row.handshake_refusals_24h,
    storage: storage.get(row.device_id!) ?? null,
    status: row.status,
    screen_off: row.screen_off,
    open_alerts: row.open_alerts,
  };
}

async function fleetRows(db: Db, options: FleetListOptions) {
  const { sql, values } = fleetListStatement(options);
  const { rows } = await db.query<FleetRow>(sql, values);
  const page = rows.filter((r) => r.device_id !== null);
  const storage = await deviceStorageOf(
    db,
    options.organisationId,
    page.map((r) => r.device_id!),
  );
  return { rows, items: page.map((r) => itemOf(r, storage)) };
}

/**
 * One page of the fleet as `organisationId` sees it (null: the authority, every device) at `now`: the devices that
 * match the search and the filter, sorted, from `offset`; their total; the whole fleet counted by state; the refused
 * handshakes of the last 24 hours and the open alerts.
 */
export async function fleetList(db: Db, options: FleetListOptions): Promise<FleetList> {
  const q = options.query;
  const sort = q.sort ?? 'structure';
  const [{ rows, items }, handshakeRefusals, alerts] = await Promise.all([
    fleetRows(db, options),
    refusalsView(db, options.organisationId, options.now),
    openAlertsOf(db, options.organisationId),
  ]);
  const s = rows[0]!;
  return {
    items,
    total: s.n_total,
    offset: q.offset ?? 0,
    limit: q.limit ?? FLEET_DEFAULT_LIMIT,
    sort,
    order: q.order ?? FLEET_SORT_DEFAULT_ORDER[sort],
    summary: {
      devices: s.n_devices,
      reporting: s.n_reporting,
      silent: s.n_silent,
      never_reported: s.n_never_reported,
      screen_off: s.n_screen_off,
      expiring: s.n_expiring,
      refused: s.n_refused,
      stuck: s.n_stuck,
      revoked: s.n_revoked,
    },
    handshake_refusals: handshakeRefusals,
    alerts,
  };
}

/** One device's row of the fleet list (the device page). */
export async function fleetItem(
  db: Db,
  options: Omit<FleetListOptions, 'query' | 'deviceId'> & { deviceId: string },
): Promise<FleetItem | null> {
  const { items } = await fleetRows(db, { ...options, query: {} });
  return items[0] ?? null;
}

/** GET /api/v1/console/devices/{id}/activity: the device's fleet row and its activity. */

/** Batches and reject events the device page lists. */
export const DEVICE_ACTIVITY_BATCHES = 20;
export const DEVICE_ACTIVITY_REJECTS = 20;

interface BatchRow {
  batch_seq: string | number;
  channel: string;
  received_at: Date;
  record_count: number;
  newest_record_at: Date | null;
  answer: Record<string, unknown>;
  body: Buffer | null;
}

const counted = (v: unknown): number => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : 0);

/** The ts of a signed batch body as the platform took it (read when the batch arrived: readAgentBatch). */
function bodyTs(body: Buffer | null): Date | null {
  if (!body) return null;
  try {
    const ts = (JSON.parse(body.toString('utf8')) as { ts?: unknown }).ts;
    const at = typeof ts === 'string' ? new Date(ts) : null;
    return at && !Number.isNaN(at.getTime()) ? at : null;
  } catch {
    return null;
  }
}

/**
 * What the device page shows of one device (issue 22, item 2: "recent batches and their answers, rejects, clock
 * offset"): its newest batches with the answers they got, the agent's clock offset (the signed body's ts, which the
 * platform takes within 300 seconds of its own clock, minus the receive time), its reject events and its refused
 * handshakes. The caller checked the device is its own.
 */
export async function deviceActivity(db: Db, deviceId: string): Promise<DeviceActivity> {
  const owner = `device:${deviceId}`;
  const [batches, rejects, refusals] = await Promise.all([
    db.query<BatchRow>(
      `SELECT batch_seq, channel, received_at, record_count, newest_record_at, answer,
              CASE WHEN channel = 'agent' AND body_encoding = 'identity' THEN body END AS body
         FROM pop_batches WHERE owner = $1
        ORDER BY received_at DESC, id DESC LIMIT ${DEVICE_ACTIVITY_BATCHES}`,
      [owner],
    ),
    db.query<{
      at: Date | null;
      received_at: Date;
      seq: string | number | null;
      code: string | null;
      approval_number: string | null;
      media_sha256: string | null;
      file: string | null;
      reason: string | null;
    }>(
      // The agent names the refused file in the detail (apps/agent/src/media/library.ts): file, media_sha256,
      // reason and, when its sidecar was read, approval_number. The device's word: texts, cut to a length.
      `SELECT r.at, b.received_at, r.seq, left(r.code, 64) AS code,
              left(coalesce(r.approval_number, r.detail ->> 'approval_number'), 64) AS approval_number,
              left(coalesce(r.media_sha256, r.detail ->> 'media_sha256'), 64) AS media_sha256,
              left(r.detail ->> 'file', 300) AS file, left(r.detail ->> 'reason', 300) AS reason
         FROM pop_records r JOIN pop_batches b ON b.id = r.batch_id
        WHERE r.player_key = $1 AND r.kind <> 'play' AND r.kind = 'reject'
        ORDER BY r.receive_day DESC, r.batch_id DESC, r.record_index DESC LIMIT ${DEVICE_ACTIVITY_REJECTS}`,
      [owner],
    ),
    db.query<{ at: Date; reason: string; serial: string | null; address: string | null; refusals: string }>(
      `SELECT at, reason, serial, address, refusals FROM device_handshake_refusals_recent
        WHERE device_id = $1 ORDER BY at DESC, key_sha256 LIMIT 20`,
      [deviceId],
    ),
  ]);
  const items = batches.rows.map((b) => {
    const ts = bodyTs(b.body);
    const a = b.answer;
    const byReason = new Map<string, number>();
    for (const item of Array.isArray(a['items']) ? (a['items'] as Record<string, unknown>[]) : []) {
      if (item?.['status'] !== 'refused') continue;
      const reason = typeof item['reason'] === 'string' ? item['reason'] : 'refused';
      byReason.set(reason, (byReason.get(reason) ?? 0) + 1);
    }
    return {
      batch_seq: Number(b.batch_seq),
      channel: b.channel,
      received_at: b.received_at.toISOString(),
      record_count: b.record_count,
      queue_lag_seconds:
        b.newest_record_at === null
          ? null
          : Math.max(0, Math.floor((b.received_at.getTime() - b.newest_record_at.getTime()) / 1000)),
      clock_offset_ms: ts ? ts.getTime() - b.received_at.getTime() : null,
      answer: {
        received: counted(a['received']),
        accepted: counted(a['accepted']),
        duplicates: counted(a['duplicates']),
        refused: counted(a['refused']),
        flagged: counted(a['flagged']),
        duplicate: a['duplicate'] === true,
        refusals: [...byReason].map(([reason, records]) => ({ reason, records })),
      },
    };
  });
  const newestSigned = items.find((b) => b.clock_offset_ms !== null);
  return {
    batches: items,
    clock_offset: newestSigned ? { ms: newestSigned.clock_offset_ms!, at: newestSigned.received_at } : null,
    rejects: rejects.rows.map((r) => ({
      at: iso(r.at),
      received_at: r.received_at.toISOString(),
      seq: integer(r.seq),
      code: r.code,
      approval_number: r.approval_number,
      media_sha256: r.media_sha256,
      file: r.file,
      reason: r.reason,
    })),
    refusals: refusals.rows.map((r) => ({
      at: r.at.toISOString(),
      reason: r.reason,
      serial: r.serial,
      address: r.address,
      refusals: Number(r.refusals),
    })),
  };
}
