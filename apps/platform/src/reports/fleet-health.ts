import {
  addDays,
  almatyDate,
  almatyDayEnd,
  almatyDayStart,
  type FleetHealth,
  formatAlmaty,
} from '@ooh/protocol';
import type { Db } from '../db/pool.js';
import { validationFailed } from '../http/problem.js';
import { scopeOf, type Viewer } from './access.js';

/*
 * Fleet health over time (GET /api/v1/console/reports/fleet-health): per Almaty day or hour, how many devices
 * reported, how far behind their queues were, how many reported their screen off. Devices of the agent and
 * certificate channels; a CMS reports for its players in batches of its own, whose players are not devices.
 *
 * Cost: one index probe per device and bucket (pop_batches_owner_received, migration 061) for the device's newest
 * batch in the bucket, and, only for a device that reported, one probe of its batches that carry flags (migration
 * 072: a partial index holding only batches with a flagged record) for a screen reported off. Never a scan of the
 * batches or records of the period: 2 000 devices over 31 days are 62 000 probes, whatever the batch rate.
 */

export type Bucket = FleetHealth['bucket'];
export const MAX_DAYS: Record<Bucket, number> = { day: 31, hour: 3 };
const DEFAULT_DAYS: Record<Bucket, number> = { day: 14, hour: 2 };

export interface FleetHealthQuery {
  bucket: Bucket;
  days: number;
}

export function parseFleetHealthQuery(query: Record<string, unknown>): FleetHealthQuery {
  const errors: { path: string; code: string; message: string }[] = [];
  for (const key of Object.keys(query)) {
    if (!['bucket', 'days'].includes(key))
      errors.push({ path: `querystring:/${key}`, code: 'unknown_key', message: `unknown parameter ${key}` });
  }
  const rawBucket = query['bucket'];
  let bucket: Bucket = 'day';
  if (rawBucket !== undefined) {
    if (rawBucket === 'day' || rawBucket === 'hour') bucket = rawBucket;
    else errors.push({ path: 'querystring:/bucket', code: 'not_allowed', message: 'day or hour' });
  }
  const rawDays = query['days'];
  let days = DEFAULT_DAYS[bucket];
  if (rawDays !== undefined) {
    const n = typeof rawDays === 'string' && /^\d{1,3}$/.test(rawDays) ? Number(rawDays) : Number.NaN;
    if (!Number.isInteger(n) || n < 1 || n > MAX_DAYS[bucket]) {
      errors.push({
        path: 'querystring:/days',
        code: 'not_allowed',
        message: `a whole number from 1 to ${MAX_DAYS[bucket]} with bucket ${bucket}`,
      });
    } else days = n;
  }
  if (errors.length > 0) throw validationFailed(errors);
  return { bucket, days };
}

/* The answer (FleetHealth, its FleetHealthBucket items) is @ooh/protocol's schemas/console.ts. */
export type { FleetHealth };

const HOUR_MS = 3_600_000;

/** The buckets ending with the one under way at `now`: Almaty days, or hours (Almaty's offset is whole hours). */
export function bucketsOf(q: FleetHealthQuery, now: Date): { start: Date; end: Date }[] {
  const out: { start: Date; end: Date }[] = [];
  if (q.bucket === 'day') {
    const today = almatyDate(now);
    for (let i = q.days - 1; i >= 0; i -= 1) {
      const day = addDays(today, -i);
      out.push({ start: almatyDayStart(day), end: almatyDayEnd(day) });
    }
  } else {
    const current = Math.floor(now.getTime() / HOUR_MS) * HOUR_MS;
    for (let i = q.days * 24 - 1; i >= 0; i -= 1) {
      const start = current - i * HOUR_MS;
      out.push({ start: new Date(start), end: new Date(start + HOUR_MS) });
    }
  }
  return out;
}

export const HEALTH_SQL = `
  WITH dev AS MATERIALIZED (
    SELECT d.id, 'device:' || d.id AS owner, d.revoked_at,
           (SELECT b.received_at FROM pop_batches b WHERE b.owner = 'device:' || d.id
             ORDER BY b.received_at, b.id LIMIT 1) AS first_at
      FROM devices d JOIN structures s ON s.id = d.structure_id
     WHERE $1::uuid IS NULL OR s.organisation_id = $1
  ), bucket AS (
    SELECT u.i, u.b_start, u.b_end
      FROM unnest($2::timestamptz[], $3::timestamptz[]) WITH ORDINALITY AS u(b_start, b_end, i)
  ), cell AS (
    SELECT bucket.i, last.received_at,
           CASE WHEN last.newest_record_at IS NOT NULL
                THEN greatest(0, floor(extract(epoch FROM last.received_at - last.newest_record_at)))::bigint
           END AS lag,
           CASE WHEN last.received_at IS NOT NULL THEN EXISTS (
             SELECT 1 FROM pop_batches f
              WHERE f.owner = dev.owner AND f.received_at >= bucket.b_start AND f.received_at < bucket.b_end
                AND (f.answer->>'flagged')::int > 0
                AND f.answer->'items' @> '[{"flags": ["screen_off"]}]'::jsonb)
           END AS screen_off
      FROM bucket
      JOIN dev ON dev.first_at < bucket.b_end AND (dev.revoked_at IS NULL OR dev.revoked_at > bucket.b_start)
      LEFT JOIN LATERAL (
        SELECT b.received_at, b.newest_record_at FROM pop_batches b
         WHERE b.owner = dev.owner AND b.received_at >= bucket.b_start AND b.received_at < bucket.b_end
         ORDER BY b.received_at DESC, b.id DESC LIMIT 1) last ON true
  )
  SELECT bucket.i::int AS i, count(cell.i)::int AS expected, count(cell.received_at)::int AS reporting,
         percentile_disc(0.5) WITHIN GROUP (ORDER BY cell.lag) AS lag_p50,
         percentile_disc(0.95) WITHIN GROUP (ORDER BY cell.lag) AS lag_p95,
         max(cell.lag) AS lag_max,
         count(*) FILTER (WHERE cell.screen_off)::int AS screen_off
    FROM bucket LEFT JOIN cell ON cell.i = bucket.i
   GROUP BY bucket.i ORDER BY bucket.i`;

export async function fleetHealth(
  db: Db,
  viewer: Viewer,
  q: FleetHealthQuery,
  now: Date,
): Promise<FleetHealth> {
  // The query takes whole buckets (a batch stored at `now` is in the bucket under way); the answer ends it at now.
  const buckets = bucketsOf(q, now);
  const org = scopeOf(viewer);
  const [health, devices] = await Promise.all([
    db.query<{
      i: number;
      expected: number;
      reporting: number;
      lag_p50: string | null;
      lag_p95: string | null;
      lag_max: string | null;
      screen_off: number;
    }>(HEALTH_SQL, [org, buckets.map((b) => b.start), buckets.map((b) => b.end)]),
    db.query<{ devices: number; never: number }>(
      `SELECT count(*)::int AS devices,
              count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM pop_batches b WHERE b.owner = 'device:' || d.id))::int AS never
         FROM devices d JOIN structures s ON s.id = d.structure_id
        WHERE d.revoked_at IS NULL AND ($1::uuid IS NULL OR s.organisation_id = $1)`,
      [org],
    ),
  ]);
  const byIndex = new Map(health.rows.map((r) => [r.i, r]));
  const seconds = (v: string | null) => (v === null ? null : Number(v));
  return {
    bucket: q.bucket,
    time_zone: 'Asia/Almaty',
    generated_at: formatAlmaty(now),
    devices: devices.rows[0]?.devices ?? 0,
    devices_never_reported: devices.rows[0]?.never ?? 0,
    items: buckets.map((b, index) => {
      const r = byIndex.get(index + 1);
      const reporting = r?.reporting ?? 0;
      const expected = r?.expected ?? 0;
      const screenOff = r?.screen_off ?? 0;
      return {
        start: formatAlmaty(b.start),
        end: formatAlmaty(b.end > now ? now : b.end),
        partial: b.end > now,
        devices_expected: expected,
        devices_reporting: reporting,
        devices_silent: expected - reporting,
        queue_lag_p50_seconds: seconds(r?.lag_p50 ?? null),
        queue_lag_p95_seconds: seconds(r?.lag_p95 ?? null),
        queue_lag_max_seconds: seconds(r?.lag_max ?? null),
        screen_off_devices: screenOff,
        screen_off_share_pct: reporting === 0 ? null : Math.round((screenOff * 1000) / reporting) / 10,
      };
    }),
  };
}
