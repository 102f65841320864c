import type { Db, DbClient } from '../db/pool.js';
import type { AlertKind, AlertResolution } from './schema.js';

/** What a condition holds of one device or CMS player at the evaluation's instant. */
export interface Condition {
  kind: AlertKind;
  subjectKey: string;
  organisationId: string;
  deviceId: string | null;
  installationId: string | null;
  externalId: string | null;
  structureId: string;
  structureCode: string;
  since: Date;
  lastSeenAt: Date | null;
  /** queue_lag: the lag of the newest batch, seconds. */
  lagSeconds: number | null;
  /** screen_off: when the player reported its screen off. */
  screenOffAt: Date | null;
}

export interface ConditionParameters {
  now: Date;
  silentAfterMs: number;
  /** Silence and lag are counted from here at the earliest (the platform's watch began; evaluate.ts). */
  watchingSince: Date;
  queueLagMs: number;
  /** Whether `now` is inside the screens' operating hours, and when the window opened (null: round the clock). */
  operatingNow: boolean;
  operatingSince: Date | null;
  cmsQuietMs: number;
}

/*
 * Every condition that holds now, in one statement. Monitored: devices not revoked, CMS players mapped, on structures
 * not retired. Issue: "Never alert on a device that has not yet sent anything": a device takes part only from its
 * first stored batch (the inner join on its newest batch), a CMS player only from its first counted play (its
 * pop_players row's newest_play_start).
 *
 * - device_silent: the newest batch (of any channel, an empty probe too: the device spoke) is older than the
 *   threshold, counted from the start of the platform's watch at the earliest.
 * - queue_lag: the fleet list's queue lag of the newest batch (its receive time minus the newest time a record in it
 *   carries; docs/decisions.md "Queue lag") is over the threshold, and those records are from the platform's watch (a
 *   player that ships what it kept while the platform was down is not lagging by its own fault).
 *   The watch decides when these two may OPEN, never that an open one ended: a device silent (or lagging) before an
 *   outage and still silent (or still lagging) after it keeps its alert, instead of a "cleared" resolution and a
 *   second opening for one and the same silence (docs/alerts.md: "resolves when it ends").
 
 * - screen_off: the newest mode_change record of the device (the agent writes one at every change of what the screen
 *   shows, screen_off first of all: apps/agent/src/playback/mode.ts) went to screen_off, and it is operating hours.
 *   The newest by the order it was sent in (receive day, batch, position), not by the time it claims.
 * - cms_player_no_plays: the player's installation stored a batch later than the player's newest counted play by more
 *   than the quiet time: the CMS is sending, and nothing it sent for this player was counted since.
 */
const CONDITIONS_SQL = `
WITH seen AS MATERIALIZED (
  SELECT d.id AS device_id, s.id AS structure_id, s.code AS structure_code, s.organisation_id,
         b.received_at AS last_batch_at, b.newest_record_at
    FROM devices d
    JOIN structures s ON s.id = d.structure_id
    JOIN LATERAL (SELECT received_at, newest_record_at FROM pop_batches
                   WHERE owner = 'device:' || d.id
                   ORDER BY received_at DESC, id DESC LIMIT 1) b ON true
   WHERE d.revoked_at IS NULL AND (s.retired_at IS NULL OR s.retired_at > $1)
), already AS (
  SELECT subject_key, bool_or(kind = 'device_silent') AS silent, bool_or(kind = 'queue_lag') AS lagging
    FROM alerts WHERE resolved_at IS NULL AND kind IN ('device_silent', 'queue_lag')
   GROUP BY subject_key
)
SELECT 'device_silent' AS kind, v.device_id, NULL::uuid AS installation_id, NULL::text AS external_id,
       v.structure_id, v.structure_code, v.organisation_id, v.last_batch_at AS since,
       v.last_batch_at AS last_seen_at, NULL::bigint AS lag_seconds, NULL::timestamptz AS screen_off_at
  FROM seen v LEFT JOIN already o ON o.subject_key = 'device:' || v.device_id
 WHERE greatest(v.last_batch_at, CASE WHEN o.silent THEN '-infinity'::timestamptz ELSE $3::timestamptz END)
       <= $1::timestamptz - $2 * interval '1 millisecond'
UNION ALL
SELECT 'queue_lag', v.device_id, NULL, NULL, v.structure_id, v.structure_code, v.organisation_id,
       v.last_batch_at, v.last_batch_at,
       floor(extract(epoch FROM v.last_batch_at - v.newest_record_at))::bigint, NULL
  FROM seen v LEFT JOIN already o ON o.subject_key = 'device:' || v.device_id
 WHERE v.newest_record_at IS NOT NULL AND (o.lagging OR v.newest_record_at >= $3::timestamptz)
   AND v.last_batch_at - v.newest_record_at > $4 * interval '1 millisecond'
UNION ALL
SELECT 'screen_off', v.device_id, NULL, NULL, v.structure_id, v.structure_code, v.organisation_id,
       least(greatest(coalesce(m.at, v.last_batch_at), $6::timestamptz), $1::timestamptz), v.last_batch_at,
       NULL, coalesce(m.at, v.last_batch_at)
  FROM seen v
  JOIN LATERAL (SELECT r.at, r.detail ->> 'to' AS mode FROM pop_records r
                 WHERE r.player_key = 'device:' || v.device_id AND r.kind <> 'play' AND r.kind = 'mode_change'
                 ORDER BY r.receive_day DESC, r.batch_id DESC, r.record_index DESC LIMIT 1) m ON true
 WHERE $5::boolean AND m.mode = 'screen_off'
UNION ALL
SELECT 'cms_player_no_plays', NULL, p.installation_id, p.external_id, s.id, s.code, i.organisation_id,
       first.received_at, pp.newest_play_start, NULL, NULL
  FROM cms_players p
  JOIN cms_installations i ON i.id = p.installation_id
  JOIN structures s ON s.id = p.structure_id
  JOIN pop_players pp ON pp.player_key = 'cms:' || p.installation_id || ':' || p.external_id
  JOIN LATERAL (SELECT b.received_at FROM pop_batches b
                 WHERE b.owner = 'source:' || p.installation_id
                   AND b.received_at > pp.newest_play_start + $7 * interval '1 millisecond'
                 ORDER BY b.received_at, b.id LIMIT 1) first ON true
 WHERE p.removed_at IS NULL AND pp.newest_play_start IS NOT NULL
   AND (s.retired_at IS NULL OR s.retired_at > $1)`;

interface ConditionRow {
  kind: AlertKind;
  device_id: string | null;
  installation_id: string | null;
  external_id: string | null;
  structure_id: string;
  structure_code: string;
  organisation_id: string;
  since: Date;
  last_seen_at: Date | null;
  lag_seconds: string | number | null;
  screen_off_at: Date | null;
}

export const deviceSubject = (deviceId: string) => `device:${deviceId}`;
export const cmsSubject = (installationId: string, externalId: string) =>
  `cms:${installationId}:${externalId}`;

export async function currentConditions(client: DbClient, p: ConditionParameters): Promise<Condition[]> {
  const { rows } = await client.query<ConditionRow>(CONDITIONS_SQL, [
    p.now,
    p.silentAfterMs,
    p.watchingSince,
    p.queueLagMs,
    p.operatingNow,
    p.operatingSince,
    p.cmsQuietMs,
  ]);
  return rows.map((r) => ({
    kind: r.kind,
    subjectKey: r.device_id ? deviceSubject(r.device_id) : cmsSubject(r.installation_id!, r.external_id!),
    organisationId: r.organisation_id,
    deviceId: r.device_id,
    installationId: r.installation_id,
    externalId: r.external_id,
    structureId: r.structure_id,
    structureCode: r.structure_code,
    since: r.since,
    lastSeenAt: r.last_seen_at,
    lagSeconds: r.lag_seconds === null ? null : Number(r.lag_seconds),
    screenOffAt: r.screen_off_at,
  }));
}

/**
 * The start of each device's present run of lagging batches: the oldest batch received after its newest batch whose
 * lag was within the threshold (batches without a timed record neither start nor end a run). One statement for all
 * the devices whose queue_lag alert opens now; a device with no such batch is left out.
 */
export async function queueLagRunStarts(
  client: DbClient,
  deviceIds: readonly string[],
  queueLagMs: number,
): Promise<Map<string, Date>> {
  const starts = new Map<string, Date>();
  if (deviceIds.length === 0) return starts;
  const { rows } = await client.query<{ device_id: string; since: Date | null }>(
    `SELECT x.device_id, run.since
       FROM unnest($1::uuid[]) AS x (device_id)
       CROSS JOIN LATERAL (
         SELECT min(b.received_at) AS since FROM pop_batches b
          WHERE b.owner = 'device:' || x.device_id AND b.newest_record_at IS NOT NULL
            AND b.received_at > coalesce(
                  (SELECT w.received_at FROM pop_batches w
                    WHERE w.owner = 'device:' || x.device_id AND w.newest_record_at IS NOT NULL
                      AND w.received_at - w.newest_record_at <= $2 * interval '1 millisecond'
                    ORDER BY w.received_at DESC, w.id DESC LIMIT 1),
                  '-infinity')) run`,
    [deviceIds, queueLagMs],
  );
  for (const r of rows) if (r.since !== null) starts.set(r.device_id, r.since);
  return starts;
}

/** What is known now of the subjects of open alerts whose condition ended: still monitored? newest sign of life? */
export interface SubjectState {
  monitored: boolean;
  lastSeenAt: Date | null;
}

export async function subjectStates(
  client: DbClient,
  subjects: { deviceIds: string[]; players: { installationId: string; externalId: string }[] },
  now: Date,
): Promise<Map<string, SubjectState>> {
  const states = new Map<string, SubjectState>();
  if (subjects.deviceIds.length > 0) {
    const { rows } = await client.query<{ id: string; monitored: boolean; last_batch_at: Date | null }>(
      `SELECT d.id, (d.revoked_at IS NULL AND (s.retired_at IS NULL OR s.retired_at > $2)) AS monitored,
              (SELECT b.received_at FROM pop_batches b WHERE b.owner = 'device:' || d.id
                ORDER BY b.received_at DESC, b.id DESC LIMIT 1) AS last_batch_at
         FROM devices d JOIN structures s ON s.id = d.structure_id
        WHERE d.id = ANY ($1::uuid[])`,
      [subjects.deviceIds, now],
    );
    for (const r of rows)
      states.set(deviceSubject(r.id), { monitored: r.monitored, lastSeenAt: r.last_batch_at });
  }
  if (subjects.players.length > 0) {
    const { rows } = await client.query<{
      installation_id: string;
      external_id: string;
      monitored: boolean;
      newest_play_start: Date | null;
    }>(
      `SELECT x.installation_id, x.external_id,
              coalesce(p.removed_at IS NULL AND (s.retired_at IS NULL OR s.retired_at > $3), false) AS monitored,
              pp.newest_play_start
         FROM unnest($1::uuid[], $2::text[]) AS x (installation_id, external_id)
         LEFT JOIN cms_players p ON p.installation_id = x.installation_id AND p.external_id = x.external_id
         LEFT JOIN structures s ON s.id = p.structure_id
         LEFT JOIN pop_players pp ON pp.player_key = 'cms:' || x.installation_id || ':' || x.external_id`,
      [subjects.players.map((p) => p.installationId), subjects.players.map((p) => p.externalId), now],
    );
    for (const r of rows) {
      states.set(cmsSubject(r.installation_id, r.external_id), {
        monitored: r.monitored,
        lastSeenAt: r.newest_play_start,
      });
    }
  }
  return states;
}

// ---------------------------------------------------------------------------------------------------------
// Alerts

export interface AlertRow {
  id: string;
  kind: AlertKind;
  subject_key: string;
  organisation_id: string;
  device_id: string | null;
  installation_id: string | null;
  external_id: string | null;
  structure_id: string;
  structure_code: string;
  since: Date;
  last_seen_at: Date | null;
  detail: Record<string, string | number | null>;
  opened_at: Date;
  resolved_at: Date | null;
  resolution: AlertResolution | null;
}

const ALERT_COLUMNS = `a.id, a.kind, a.subject_key, a.organisation_id, a.device_id, a.installation_id, a.external_id,
  a.structure_id, s.code AS structure_code, a.since, a.last_seen_at, a.detail, a.opened_at, a.resolved_at,
  a.resolution`;

export async function openAlerts(client: DbClient): Promise<AlertRow[]> {
  const { rows } = await client.query<AlertRow>(
    `SELECT ${ALERT_COLUMNS} FROM alerts a JOIN structures s ON s.id = a.structure_id
      WHERE a.resolved_at IS NULL ORDER BY a.opened_at, a.id`,
  );
  return rows;
}

/** Alerts written by one statement (insertAlerts, refreshAlerts, resolveAlerts). */
const ALERTS_PER_STATEMENT = 2_000;

function inParts<T>(items: readonly T[]): T[][] {
  const parts: T[][] = [];
  for (let from = 0; from < items.length; from += ALERTS_PER_STATEMENT) {
    parts.push(items.slice(from, from + ALERTS_PER_STATEMENT));
  }
  return parts;
}

export type NewAlert = Omit<AlertRow, 'structure_code' | 'resolved_at' | 'resolution'> & {
  opened_event_id: string;
};

/** Opens alerts, in their order: one statement for every ALERTS_PER_STATEMENT of them. */
export async function insertAlerts(client: DbClient, alerts: readonly NewAlert[]): Promise<void> {
  for (const part of inParts(alerts)) {
    await client.query(
      `INSERT INTO alerts (id, kind, subject_key, organisation_id, device_id, installation_id, external_id, structure_id,
                           since, last_seen_at, detail, opened_at, opened_event_id)
       SELECT a.id, a.kind, a.subject_key, a.organisation_id, a.device_id, a.installation_id, a.external_id,
              a.structure_id, a.since, a.last_seen_at, a.detail, a.opened_at, a.opened_event_id
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::uuid[], $6::uuid[], $7::text[], $8::uuid[],
                     $9::timestamptz[], $10::timestamptz[], $11::jsonb[], $12::timestamptz[], $13::uuid[])
              WITH ORDINALITY AS a(id, kind, subject_key, organisation_id, device_id, installation_id, external_id,
                                   structure_id, since, last_seen_at, detail, opened_at, opened_event_id, o)
        ORDER BY a.o`,
      [
        part.map((a) => a.id),
        part.map((a) => a.kind),
        part.map((a) => a.subject_key),
        part.map((a) => a.organisation_id),
        part.map((a) => a.device_id),
        part.map((a) => a.installation_id),
        part.map((a) => a.external_id),
        part.map((a) => a.structure_id),
        part.map((a) => a.since),
        part.map((a) => a.last_seen_at),
        part.map((a) => JSON.stringify(a.detail)),
        part.map((a) => a.opened_at),
        part.map((a) => a.opened_event_id),
      ],
    );
  }
}

/** Keeps open alerts' newest sign of life and figures current (no event: nothing opened or ended). */
export async function refreshAlerts(
  client: DbClient,
  refreshed: readonly {
    id: string;
    lastSeenAt: Date | null;
    detail: Record<string, string | number | null>;
  }[],
): Promise<void> {
  for (const part of inParts(refreshed)) {
    await client.query(
      `UPDATE alerts a SET last_seen_at = r.last_seen_at, detail = r.detail
         FROM unnest($1::uuid[], $2::timestamptz[], $3::jsonb[]) AS r(id, last_seen_at, detail)
        WHERE a.id = r.id AND a.resolved_at IS NULL
          AND (a.last_seen_at IS DISTINCT FROM r.last_seen_at OR a.detail IS DISTINCT FROM r.detail)`,
      [part.map((r) => r.id), part.map((r) => r.lastSeenAt), part.map((r) => JSON.stringify(r.detail))],
    );
  }
}

export interface ResolvedAlert {
  id: string;
  at: Date;
  resolution: AlertResolution;
  lastSeenAt: Date | null;
  eventId: string;
}

/** Resolves open alerts (one already resolved is left as it is). */
export async function resolveAlerts(client: DbClient, resolved: readonly ResolvedAlert[]): Promise<void> {
  for (const part of inParts(resolved)) {
    await client.query(
      `UPDATE alerts a
          SET resolved_at = r.at, resolution = r.resolution, last_seen_at = r.last_seen_at,
              resolved_event_id = r.event_id
         FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::timestamptz[], $5::uuid[])
              AS r(id, at, resolution, last_seen_at, event_id)
        WHERE a.id = r.id AND a.resolved_at IS NULL`,
      [
        part.map((r) => r.id),
        part.map((r) => r.at),
        part.map((r) => r.resolution),
        part.map((r) => r.lastSeenAt),
        part.map((r) => r.eventId),
      ],
    );
  }
}

export interface AlertFilter {
  /** null: every organisation's (the authority). */
  organisationId: string | null;
  state: 'open' | 'resolved' | 'all';
  kind: AlertKind | null;
  deviceId?: string | null;
  limit: number;
  offset: number;
}

export async function listAlerts(db: Db, filter: AlertFilter): Promise<AlertRow[]> {
  const { rows } = await db.query<AlertRow>(
    `SELECT ${ALERT_COLUMNS} FROM alerts a JOIN structures s ON s.id = a.structure_id
      WHERE ($1::uuid IS NULL OR a.organisation_id = $1::uuid)
        AND ($2 = 'all' OR ($2 = 'open') = (a.resolved_at IS NULL))
        AND ($3::text IS NULL OR a.kind = $3)
        AND ($4::uuid IS NULL OR a.device_id = $4::uuid)
      ORDER BY a.opened_at DESC, a.id
      LIMIT $5 OFFSET $6`,
    [filter.organisationId, filter.state, filter.kind, filter.deviceId ?? null, filter.limit, filter.offset],
  );
  return rows;
}

export async function findAlert(db: Db, id: string, organisationId: string | null): Promise<AlertRow | null> {
  const { rows } = await db.query<AlertRow>(
    `SELECT ${ALERT_COLUMNS} FROM alerts a JOIN structures s ON s.id = a.structure_id
      WHERE a.id = $1 AND ($2::uuid IS NULL OR a.organisation_id = $2::uuid)`,
    [id, organisationId],
  );
  return rows[0] ?? null;
}

// ---------------------------------------------------------------------------------------------------------
// The evaluation's memory

/**
 * Records this evaluation and returns since when the platform has watched without a gap: `now` when the previous
 * evaluation is older than `gapMs` (or there was none), else the stored start. Under the evaluation's lock.
 */
export async function advanceWatch(client: DbClient, now: Date, gapMs: number): Promise<Date> {
  const { rows } = await client.query<{ watching_since: Date }>(
    `UPDATE alert_monitor
        SET watching_since = CASE WHEN evaluated_at IS NULL OR evaluated_at < $1::timestamptz - $2 * interval '1 millisecond'
                                  THEN $1::timestamptz ELSE least(watching_since, $1::timestamptz) END,
            evaluated_at = greatest(evaluated_at, $1::timestamptz)
      RETURNING watching_since`,
    [now, gapMs],
  );
  return rows[0]!.watching_since;
}
