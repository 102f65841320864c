import type { Db, DbClient } from '../db/pool.js';

/**
 * The programmatic submissions of one organisation as Ad Management API ads (docs in ./README.md). One row per sent
 * submission (a draft has not been submitted for audit: not shown) with its newest approval, its status of the
 * spec's creative entry on the Almaty date `today`, and `audit_lastmod`: the instant that status began.
 *
 *   pending        in review, no approval            since sent_at
 *   rejected       refused, no approval              since decided_at
 *   not_yet_valid  approved, before valid_from       since issued_at
 *   valid          approved, within the period       since issued_at (approved stays approved: no change at valid_from)
 *   expired        approved, after valid_until       since 00:00 Almaty of the day after valid_until
 *   revoked        revoked                           since revoked_at
 *
 * 00:00 Almaty of a day is local midnight read through PostgreSQL's tz database (DESIGN.md section 8: never a fixed
 * offset; Almaty was UTC+06:00 before 2024-03-01, UTC+05:00 since, and kept summer time until 2004), whatever the
 * session's TimeZone: `timestamp AT TIME ZONE 'Asia/Almaty'` names the zone itself.
 */
const ADS_SQL = `
WITH ads AS (
  SELECT s.id, s.number, s.state, s.advertiser_name, s.category_id, s.external_refs, s.fast_track,
         s.period_from, s.period_to, s.created_at, s.updated_at, s.sent_at, s.decided_at, s.reject_reason,
         s.review_due_at,
         a.number AS approval_number, a.valid_from, a.valid_until, a.issued_at, a.revoked_at, a.revoke_reason,
         m.media_sha256, m.media_type, m.width, m.height, m.duration_ms,
         CASE WHEN a.id IS NULL THEN (CASE s.state WHEN 'rejected' THEN 'rejected' ELSE 'pending' END)
              WHEN a.revoked_at IS NOT NULL THEN 'revoked'
              WHEN $2::date < a.valid_from THEN 'not_yet_valid'
              WHEN $2::date > a.valid_until THEN 'expired'
              ELSE 'valid' END AS status
    FROM submissions s
    LEFT JOIN submission_media m ON m.submission_id = s.id
    LEFT JOIN LATERAL (
      SELECT * FROM approvals x WHERE x.submission_id = s.id ORDER BY x.issued_at DESC, x.number DESC LIMIT 1
    ) a ON true
   WHERE s.organisation_id = $1::uuid AND s.channel = 'programmatic' AND s.state <> 'draft'
     AND ($3::uuid IS NULL OR s.id = $3::uuid)
), timed AS (
  SELECT ads.*,
         CASE status
           WHEN 'pending' THEN coalesce(sent_at, updated_at)
           WHEN 'rejected' THEN coalesce(decided_at, updated_at)
           WHEN 'revoked' THEN revoked_at
           WHEN 'expired' THEN greatest(issued_at, (valid_until + 1)::timestamp AT TIME ZONE 'Asia/Almaty')
           ELSE issued_at END AS audit_lastmod
    FROM ads
)
SELECT timed.*,
       to_char(period_from, 'YYYY-MM-DD') AS period_from_day, to_char(period_to, 'YYYY-MM-DD') AS period_to_day,
       to_char(valid_from, 'YYYY-MM-DD') AS valid_from_day, to_char(valid_until, 'YYYY-MM-DD') AS valid_until_day,
       ARRAY(SELECT st.code FROM submission_structures ss JOIN structures st ON st.id = ss.structure_id
              WHERE ss.submission_id = timed.id ORDER BY st.code) AS structures
  FROM timed
 WHERE ($4::timestamptz IS NULL
        OR date_trunc('milliseconds', audit_lastmod) > $4::timestamptz
        OR (date_trunc('milliseconds', audit_lastmod) = $4::timestamptz AND $5::uuid IS NOT NULL AND id > $5::uuid))
   AND date_trunc('milliseconds', audit_lastmod) <= $6::timestamptz
 ORDER BY date_trunc('milliseconds', audit_lastmod), id
 LIMIT $7`;

export type AdStatus = 'pending' | 'rejected' | 'not_yet_valid' | 'valid' | 'expired' | 'revoked';

export interface AdRow {
  id: string;
  number: string;
  state: string;
  advertiser_name: string;
  category_id: number | null;
  external_refs: { crid?: string; adomain?: string[]; dsp?: string; ssp?: string } | null;
  fast_track: boolean;
  period_from_day: string | null;
  period_to_day: string | null;
  created_at: Date;
  updated_at: Date;
  sent_at: Date | null;
  decided_at: Date | null;
  reject_reason: string | null;
  review_due_at: Date | null;
  approval_number: string | null;
  valid_from_day: string | null;
  valid_until_day: string | null;
  issued_at: Date | null;
  revoked_at: Date | null;
  revoke_reason: string | null;
  media_sha256: string | null;
  media_type: string | null;
  width: number | null;
  height: number | null;
  duration_ms: number | null;
  status: AdStatus;
  audit_lastmod: Date;
  structures: string[];
}

export interface AdQuery {
  organisationId: string;
  /** The Almaty date of the statuses, YYYY-MM-DD. */
  today: string;
  /** One submission only. */
  id?: string | null;
  /** Ads whose audit lastmod (whole milliseconds) is after this instant... */
  auditStart?: Date | null;
  /** ...or equal to it with an id greater than this one (Ad Management API Appendix C). */
  afterId?: string | null;
  /** ...and not after this instant. */
  auditEnd: Date;
  limit: number;
}

export async function queryAds(db: Db | DbClient, q: AdQuery): Promise<AdRow[]> {
  const { rows } = await db.query<AdRow>({
    name: 'ad-management-ads-v1',
    text: ADS_SQL,
    values: [
      q.organisationId,
      q.today,
      q.id ?? null,
      q.auditStart ?? null,
      q.afterId ?? null,
      q.auditEnd,
      q.limit,
    ],
  });
  return rows;
}

/**
 * The organisations whose ad changes someone receives: those with a live ad_audit_changed subscription of their own,
 * or every organisation with a sent programmatic submission when the authority subscribed to the type. Nobody
 * subscribed: none, and the look costs one small query.
 */
export async function subscribedOrganisations(db: Db | DbClient, type: string): Promise<string[]> {
  const { rows } = await db.query<{ organisation_id: string | null }>(
    `SELECT DISTINCT organisation_id FROM webhook_subscriptions WHERE deleted_at IS NULL AND $1 = ANY (types)`,
    [type],
  );
  if (rows.length === 0) return [];
  if (rows.some((r) => r.organisation_id === null)) {
    const all = await db.query<{ organisation_id: string }>(
      `SELECT DISTINCT organisation_id FROM submissions WHERE channel = 'programmatic' AND state <> 'draft'`,
    );
    return all.rows.map((r) => r.organisation_id);
  }
  return rows.map((r) => r.organisation_id!);
}
