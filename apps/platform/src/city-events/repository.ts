import { LIMITS } from '@ooh/protocol';
import { type Db, type DbClient, withTransaction } from '../db/pool.js';

/**
 * Event types the platform raises (spec Events: "A city event named declared_vs_actual ..."; fleet alerts, issue "A
 * newcomer's two commands ... and an operator's first day", item 5: docs/alerts.md; ad_audit_changed, the Ad
 * Management API webhook of an exchange partner's own programmatic submissions: src/ad-management/README.md).
 */
export const EVENT_TYPES = [
  'declared_vs_actual',
  'alert_opened',
  'alert_resolved',
  'ad_audit_changed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/**
 * The types an operator may subscribe to: events about its own devices and CMS players, delivered to it only. The
 * city-wide ones (declared_vs_actual, about submissions of advertisers) stay the authority's.
 */
export const OPERATOR_EVENT_TYPES: readonly EventType[] = ['alert_opened', 'alert_resolved'];

/**
 * The types an exchange partner (scope read:ads) subscribes to through /api/v1/ads/webhooks: the audit changes of
 * its own programmatic submissions, delivered to it only.
 */
export const PARTNER_EVENT_TYPES: readonly EventType[] = ['ad_audit_changed'];

// ---------------------------------------------------------------------------------------------------------
// Settings

/** The band in force: the stored override or the spec's default ("default band 30 %"). */
export async function readBandPct(db: Db | DbClient): Promise<{ bandPct: number; override: number | null }> {
  const { rows } = await db.query<{ declared_band_pct: number | null }>(
    'SELECT declared_band_pct FROM city_event_settings',
  );
  const override = rows[0]?.declared_band_pct ?? null;
  return { bandPct: override ?? LIMITS.declaredBandPct, override };
}

export async function setBandPct(db: Db, value: number | null, now: Date): Promise<void> {
  await db.query('UPDATE city_event_settings SET declared_band_pct = $1, updated_at = $2', [value, now]);
}

// ---------------------------------------------------------------------------------------------------------
// Declared against counted plays

export interface DeclaredFact {
  submissionId: string;
  submissionNumber: string;
  organisationId: string;
  advertiserName: string;
  approvalNumbers: string[];
  structureId: string;
  /** null when the declared key names no structure. */
  structureCode: string | null;
  declared: number;
  actual: number;
}

/**
 * For every approved submission live on `day` (an approval valid that day, issued before the day ended and not
 * revoked before it ended) with declared_daily_plays: per declared structure, the declared figure and the counted
 * plays of that Almaty day on that structure under any of the submission's approval numbers issued before the day
 * ended (play_counts: flagged plays and attested CMS plays are counted too; slot plays carry no approval number).
 *
 * Only what existed when the day ended is read of the approvals, so a day compared late (a platform back after a
 * stop catches up on a week) is compared as it would have been on time: an approval issued on the 12th with a period
 * from the 8th did not make the 8th to the 11th days of its campaign.
 */
export async function declaredFacts(client: DbClient, day: string, dayEnd: Date): Promise<DeclaredFact[]> {
  const { rows } = await client.query<{
    submission_id: string;
    number: string;
    organisation_id: string;
    advertiser_name: string;
    approval_numbers: string[];
    structure_id: string;
    structure_code: string | null;
    declared: number;
    actual: number;
  }>(
    `WITH live AS (
       SELECT s.id, s.number, s.organisation_id, s.advertiser_name, s.declared_daily_plays
         FROM submissions s
        WHERE s.declared_daily_plays IS NOT NULL AND jsonb_typeof(s.declared_daily_plays) = 'object'
          AND EXISTS (SELECT 1 FROM approvals a
                       WHERE a.submission_id = s.id AND a.valid_from <= $1::date AND a.valid_until >= $1::date
                         AND a.issued_at < $2 AND (a.revoked_at IS NULL OR a.revoked_at >= $2))
     ), numbers AS (
       SELECT a.submission_id, array_agg(a.number ORDER BY a.number) AS approval_numbers
         FROM approvals a JOIN live ON live.id = a.submission_id
        WHERE a.issued_at < $2
        GROUP BY a.submission_id
     ), declared AS MATERIALIZED (
       SELECT live.id, live.number, live.organisation_id, live.advertiser_name, lower(d.key) AS structure_key,
              d.value AS declared_value
         FROM live, jsonb_each(live.declared_daily_plays) AS d
        WHERE jsonb_typeof(d.value) = 'number'
          AND d.key ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
     )
     SELECT d.id AS submission_id, d.number, d.organisation_id, d.advertiser_name, n.approval_numbers,
            d.structure_key AS structure_id, st.code AS structure_code,
            (d.declared_value::text)::numeric::bigint AS declared,
            coalesce((SELECT sum(pc.plays) FROM play_counts pc
                       WHERE pc.day = $1::date AND pc.structure_id = d.structure_key::uuid
                         AND pc.approval_number = ANY (n.approval_numbers)), 0)::bigint AS actual
       FROM declared d
       JOIN numbers n ON n.submission_id = d.id
       LEFT JOIN structures st ON st.id = d.structure_key::uuid
      ORDER BY d.number, d.structure_key`,
    [day, dayEnd],
  );
  return rows.map((r) => ({
    submissionId: r.submission_id,
    submissionNumber: r.number,
    organisationId: r.organisation_id,
    advertiserName: r.advertiser_name,
    approvalNumbers: r.approval_numbers,
    structureId: r.structure_id,
    structureCode: r.structure_code,
    declared: Number(r.declared),
    actual: Number(r.actual),
  }));
}

export async function checkedDays(
  db: Db | DbClient,
  type: EventType,
  from: string,
  to: string,
): Promise<Set<string>> {
  const { rows } = await db.query<{ day: string }>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day FROM city_event_checks WHERE type = $1 AND day BETWEEN $2 AND $3`,
    [type, from, to],
  );
  return new Set(rows.map((r) => r.day));
}

export async function markChecked(client: DbClient, type: EventType, day: string, now: Date, events: number) {
  await client.query(
    'INSERT INTO city_event_checks (type, day, checked_at, events) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
    [type, day, now, events],
  );
}

// ---------------------------------------------------------------------------------------------------------
// Events

export interface NewEvent {
  id: string;
  type: EventType;
  subjectKey: string;
  day: string | null;
  payload: unknown;
  body: string;
  createdAt: Date;
  /** The organisation the event concerns (an alert's operator); null or absent: city-wide, the authority's only. */
  organisationId?: string | null;
}

/**
 * Stores an event unless one with the same type and subject exists; when stored, a delivery is queued for every
 * live subscription of its type that may receive it: the authority's (organisation_id null) always, an operator's
 * only for an event of its own organisation. Returns whether it was new.
 */
export async function insertEvent(client: DbClient, event: NewEvent): Promise<boolean> {
  return (await insertEvents(client, [event])).has(event.id);
}

/** Events stored by one statement of insertEvents: a fleet's alerts after an outage stay a few statements. */
const EVENTS_PER_STATEMENT = 2_000;

/**
 * insertEvent for many events, in their order, one statement for every EVENTS_PER_STATEMENT of them (the events and
 * their deliveries together, however many): an evaluation that opens the alerts of a whole fleet at once (after a
 * network outage, say) is not a statement per event and subscription. Returns the ids of the events that were new.
 */
export async function insertEvents(client: DbClient, events: readonly NewEvent[]): Promise<Set<string>> {
  const stored = new Set<string>();
  for (let from = 0; from < events.length; from += EVENTS_PER_STATEMENT) {
    const part = events.slice(from, from + EVENTS_PER_STATEMENT);
    const { rows } = await client.query<{ id: string }>(INSERT_EVENTS_SQL, [
      part.map((e) => e.id),
      part.map((e) => e.type),
      part.map((e) => e.subjectKey),
      part.map((e) => e.day),
      part.map((e) => JSON.stringify(e.payload)),
      part.map((e) => e.body),
      part.map((e) => e.createdAt),
      part.map((e) => e.organisationId ?? null),
    ]);
    for (const row of rows) stored.add(row.id);
  }
  return stored;
}

// The deliveries of the events stored by the same statement (their rows are visible to the foreign key checks, which
// run when the statement ends), in the events' order, so the delivery loop sends them as it did one by one.
const INSERT_EVENTS_SQL = `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::date[], $5::jsonb[], $6::text[], $7::timestamptz[],
                       $8::uuid[])
         WITH ORDINALITY AS e(id, type, subject_key, day, payload, body, created_at, organisation_id, o)
), stored AS (
  INSERT INTO city_events (id, type, subject_key, day, payload, body, created_at, organisation_id)
  SELECT e.id, e.type, e.subject_key, e.day, e.payload, e.body, e.created_at, e.organisation_id
    FROM input e ORDER BY e.o
  ON CONFLICT (type, subject_key) DO NOTHING
  RETURNING id
), queued AS (
  INSERT INTO webhook_deliveries (subscription_id, event_id, next_attempt_at, created_at)
  SELECT s.id, e.id, e.created_at, e.created_at
    FROM stored n
    JOIN input e ON e.id = n.id
    JOIN webhook_subscriptions s
      ON s.deleted_at IS NULL AND e.type = ANY (s.types)
     AND (s.organisation_id IS NULL OR s.organisation_id = e.organisation_id)
   ORDER BY e.o, s.id
  ON CONFLICT (subscription_id, event_id) DO NOTHING
)
SELECT id FROM stored`;

/**
 * Events, newest first; `organisationId` set: only the events of that organisation (an operator's view); `types` set:
 * only events of those types.
 */
export async function listEvents(
  db: Db,
  filter: {
    type: EventType | null;
    day: string | null;
    limit: number;
    offset: number;
    organisationId?: string | null;
    types?: readonly EventType[] | null;
  },
): Promise<string[]> {
  const { rows } = await db.query<{ body: string }>(
    `SELECT body FROM city_events
      WHERE ($1::text IS NULL OR type = $1) AND ($2::date IS NULL OR day = $2::date)
        AND ($5::uuid IS NULL OR organisation_id = $5::uuid)
        AND ($6::text[] IS NULL OR type = ANY ($6::text[]))
      ORDER BY created_at DESC, id
      LIMIT $3 OFFSET $4`,
    [
      filter.type,
      filter.day,
      filter.limit,
      filter.offset,
      filter.organisationId ?? null,
      filter.types ?? null,
    ],
  );
  return rows.map((r) => r.body);
}

// ---------------------------------------------------------------------------------------------------------
// Webhook subscriptions and deliveries

export interface SubscriptionRow {
  id: string;
  /** The operator that owns it; null: the authority's (every event of its types). */
  organisation_id: string | null;
  url: string;
  types: string[];
  created_at: Date;
  pending: number;
  delivered: number;
  failed: number;
}

export async function insertSubscription(
  db: Db,
  subscription: { url: string; secret: string; types: string[]; organisationId: string | null },
  now: Date,
): Promise<{ id: string; created_at: Date }> {
  const { rows } = await db.query<{ id: string; created_at: Date }>(
    `INSERT INTO webhook_subscriptions (url, secret, types, created_at, organisation_id) VALUES ($1, $2, $3, $4, $5)
     RETURNING id, created_at`,
    [subscription.url, subscription.secret, subscription.types, now, subscription.organisationId],
  );
  return rows[0]!;
}

/**
 * Inserts a subscription of an operator unless it already has `max` live ones (each one multiplies the deliveries
 * of every event). Serialised per organisation by an advisory lock, so two requests at once cannot pass the limit
 * together. Returns null when the limit is reached.
 */
/** How many live webhook subscriptions an operator holds. */
export async function liveOperatorSubscriptions(db: Db, organisationId: string): Promise<number> {
  const { rows } = await db.query<{ live: number }>(
    'SELECT count(*)::int AS live FROM webhook_subscriptions WHERE organisation_id = $1 AND deleted_at IS NULL',
    [organisationId],
  );
  return rows[0]?.live ?? 0;
}

export async function insertOperatorSubscription(
  db: Db,
  subscription: { url: string; secret: string; types: string[]; organisationId: string },
  now: Date,
  max: number,
): Promise<{ id: string; created_at: Date } | null> {
  return withTransaction(db, async (client) => {
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('ooh:webhooks:' || $1))`, [
      subscription.organisationId,
    ]);
    const { rows: counted } = await client.query<{ live: number }>(
      'SELECT count(*)::int AS live FROM webhook_subscriptions WHERE organisation_id = $1 AND deleted_at IS NULL',
      [subscription.organisationId],
    );
    if ((counted[0]?.live ?? 0) >= max) return null;
    const { rows } = await client.query<{ id: string; created_at: Date }>(
      `INSERT INTO webhook_subscriptions (url, secret, types, created_at, organisation_id) VALUES ($1, $2, $3, $4, $5)
       RETURNING id, created_at`,
      [subscription.url, subscription.secret, subscription.types, now, subscription.organisationId],
    );
    return rows[0]!;
  });
}

/**
 * Live subscriptions (one when `id` is given). `organisationId` set: only that operator's (what an operator sees);
 * null: every subscription (the authority's view).
 */
export async function listSubscriptions(
  db: Db,
  id: string | null = null,
  organisationId: string | null = null,
): Promise<SubscriptionRow[]> {
  const { rows } = await db.query<SubscriptionRow>(
    `SELECT s.id, s.organisation_id, s.url, s.types, s.created_at,
            count(d.id) FILTER (WHERE d.delivered_at IS NULL AND d.failed_at IS NULL)::int AS pending,
            count(d.id) FILTER (WHERE d.delivered_at IS NOT NULL)::int AS delivered,
            count(d.id) FILTER (WHERE d.failed_at IS NOT NULL)::int AS failed
       FROM webhook_subscriptions s LEFT JOIN webhook_deliveries d ON d.subscription_id = s.id
      WHERE s.deleted_at IS NULL AND ($1::uuid IS NULL OR s.id = $1::uuid)
        AND ($2::uuid IS NULL OR s.organisation_id = $2::uuid)
      GROUP BY s.id ORDER BY s.created_at, s.id`,
    [id, organisationId],
  );
  return rows;
}

/**
 * Ends a live subscription; `organisationId` set: only one of that operator's. Its pending deliveries end with it
 * (given up, "subscription removed"): none is sent any more, and none stays in the due deliveries that every claim
 * walks, however many a receiver that never answered had piled up.
 */
export async function deleteSubscription(
  db: Db,
  id: string,
  now: Date,
  organisationId: string | null = null,
): Promise<boolean> {
  return withTransaction(db, async (client) => {
    const { rowCount } = await client.query(
      `UPDATE webhook_subscriptions SET deleted_at = $2
        WHERE id = $1 AND deleted_at IS NULL AND ($3::uuid IS NULL OR organisation_id = $3::uuid)`,
      [id, now, organisationId],
    );
    if (rowCount !== 1) return false;
    await client.query(
      `UPDATE webhook_deliveries SET failed_at = $2, lease_until = NULL, last_error = 'subscription removed'
        WHERE subscription_id = $1 AND delivered_at IS NULL AND failed_at IS NULL`,
      [id, now],
    );
    return true;
  });
}

export interface DeliveryRow {
  event_id: string;
  attempts: number;
  next_attempt_at: Date;
  delivered_at: Date | null;
  failed_at: Date | null;
  last_status: number | null;
  last_error: string | null;
}

export async function listDeliveries(db: Db, subscriptionId: string, limit: number): Promise<DeliveryRow[]> {
  const { rows } = await db.query<DeliveryRow>(
    `SELECT event_id, attempts, next_attempt_at, delivered_at, failed_at, last_status, last_error
       FROM webhook_deliveries WHERE subscription_id = $1 ORDER BY id DESC LIMIT $2`,
    [subscriptionId, limit],
  );
  return rows;
}

export interface ClaimedDelivery {
  id: number;
  /** The attempt this claim makes (1, 2, ...): its outcome is recorded only while it is still the latest. */
  attempts: number;
  subscriptionId: string;
  url: string;
  secret: string;
  eventId: string;
  eventType: string;
  body: string;
}

/**
 * Claims due deliveries: not delivered, not given up, due, not leased (or the lease ran out), of a live
 * subscription. The claim counts the attempt and holds a lease until `leaseUntil`, so another instance does not send
 * the same delivery meanwhile; a crash before the result is stored leaves the lease to run out and the delivery is
 * sent again (at least once).
 *
 * At most `perSubscription` deliveries of one subscription are leased at a time (as this claim sees the leases: two
 * instances claiming at the same instant may each take that many), and the claim takes the oldest due deliveries of
 * the other subscriptions past those of a subscription at its limit: a receiver that never answers holds that many
 * sends for the send timeout, never the deliveries of the others queued behind its own.
 */
export async function claimDueDeliveries(
  db: Db,
  now: Date,
  leaseUntil: Date,
  limit: number,
  perSubscription: number = limit,
): Promise<ClaimedDelivery[]> {
  if (limit <= 0) return [];
  const { rows } = await db.query<{
    id: number;
    attempts: number;
    subscription_id: string;
    url: string;
    secret: string;
    event_id: string;
    type: string;
    body: string;
  }>(
    // A leased delivery was due when it was claimed, so the leases are found in the due index's range too.
    `WITH leased AS (
       SELECT d.subscription_id, count(*)::int AS n FROM webhook_deliveries d
        WHERE d.delivered_at IS NULL AND d.failed_at IS NULL AND d.next_attempt_at <= $1 AND d.lease_until > $1
        GROUP BY d.subscription_id
     ), candidates AS (
       SELECT d.id, d.subscription_id, d.next_attempt_at
         FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
        WHERE d.delivered_at IS NULL AND d.failed_at IS NULL AND d.next_attempt_at <= $1
          AND (d.lease_until IS NULL OR d.lease_until <= $1) AND s.deleted_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM leased l WHERE l.subscription_id = d.subscription_id AND l.n >= $4)
        ORDER BY d.next_attempt_at, d.id
        LIMIT $5
     ), ranked AS (
       SELECT c.id, c.next_attempt_at,
              row_number() OVER (PARTITION BY c.subscription_id ORDER BY c.next_attempt_at, c.id)
                + coalesce((SELECT l.n FROM leased l WHERE l.subscription_id = c.subscription_id), 0) AS place
         FROM candidates c
     ), due AS (
       SELECT d.id FROM webhook_deliveries d JOIN ranked r ON r.id = d.id
        WHERE r.place <= $4 AND d.delivered_at IS NULL AND d.failed_at IS NULL
          AND (d.lease_until IS NULL OR d.lease_until <= $1)
        ORDER BY r.next_attempt_at, r.id
        LIMIT $3
        FOR UPDATE OF d SKIP LOCKED
     )
     UPDATE webhook_deliveries w SET attempts = w.attempts + 1, lease_until = $2
       FROM due, webhook_subscriptions s, city_events e
      WHERE w.id = due.id AND s.id = w.subscription_id AND e.id = w.event_id
     RETURNING w.id, w.attempts, s.id AS subscription_id, s.url, s.secret, e.id AS event_id, e.type, e.body`,
    [now, leaseUntil, limit, Math.max(1, perSubscription), Math.max(limit * 10, 500)],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    attempts: r.attempts,
    subscriptionId: r.subscription_id,
    url: r.url,
    secret: r.secret,
    eventId: r.event_id,
    eventType: r.type,
    body: r.body,
  }));
}

/** A 2xx: delivered, whoever's lease it was (the receiver has it). */
export async function recordDelivered(db: Db, id: number, status: number, now: Date): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries
        SET delivered_at = $2, lease_until = NULL, last_status = $3, last_error = NULL, failed_at = NULL
      WHERE id = $1 AND delivered_at IS NULL`,
    [id, now, status],
  );
}

/**
 * A failed attempt: the next one is scheduled, or the delivery is given up (nextAttemptAt null). Recorded only by the
 * latest claim (`attempt`) of a delivery still pending: a sender whose lease ran out while another instance took the
 * delivery again does not cut that one's lease short, nor schedule or give up in its place.
 */
export async function recordFailure(
  db: Db,
  id: number,
  result: { attempt: number; status: number | null; error: string; nextAttemptAt: Date | null; now: Date },
): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries
        SET lease_until = NULL, last_status = $2, last_error = $3,
            next_attempt_at = coalesce($4, next_attempt_at),
            failed_at = CASE WHEN $4::timestamptz IS NULL THEN $5::timestamptz ELSE NULL END
      WHERE id = $1 AND attempts = $6 AND delivered_at IS NULL AND failed_at IS NULL`,
    [id, result.status, result.error.slice(0, 500), result.nextAttemptAt, result.now, result.attempt],
  );
}
