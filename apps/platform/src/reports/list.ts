import type { CampaignListItem } from '@ooh/protocol';
import type { Db } from '../db/pool.js';
import type { Viewer } from './access.js';

/** A campaign as the reports list shows it (GET /api/v1/console/reports/campaigns): @ooh/protocol's CampaignListItem. */
export type { CampaignListItem };

/** At most this many campaigns, the latest first. */
export const LIST_LIMIT = 500;

/**
 * The campaigns (submissions with at least one approval) the viewer may report on, newest last day first: the
 * authority every one; an organisation its own; an operator also those that use its structures (their plays on its
 * structures only).
 */
export async function listCampaigns(db: Db, viewer: Viewer): Promise<CampaignListItem[]> {
  const { rows } = await db.query<{
    submission_id: string;
    submission_number: string;
    advertiser_name: string;
    submitted_by: string;
    own: boolean;
    valid_from: string;
    valid_until: string;
    approvals: { approval_number: string; valid_from: string; valid_until: string; revoked: boolean }[];
    structure_ids: string[];
    declared_daily_plays: Record<string, unknown> | null;
    plays: string;
    flagged: string;
  }>(
    `WITH visible AS (
       SELECT s.id, s.number, s.advertiser_name, o.name AS submitted_by, s.declared_daily_plays,
              ($1::boolean OR s.organisation_id = $2) AS own
         FROM submissions s JOIN organisations o ON o.id = s.organisation_id
        WHERE EXISTS (SELECT 1 FROM approvals a WHERE a.submission_id = s.id)
          AND ($1::boolean OR s.organisation_id = $2
               OR ($3::boolean AND EXISTS (
                     SELECT 1 FROM approvals a JOIN approval_structures aps ON aps.approval_id = a.id
                       JOIN structures st ON st.id = aps.structure_id
                      WHERE a.submission_id = s.id AND st.organisation_id = $2)))
     ), shown AS (
       SELECT v.*,
              ARRAY(SELECT DISTINCT aps.structure_id::text FROM approvals a
                      JOIN approval_structures aps ON aps.approval_id = a.id
                      JOIN structures st ON st.id = aps.structure_id
                     WHERE a.submission_id = v.id AND (v.own OR st.organisation_id = $2)) AS structure_ids,
              (SELECT json_agg(json_build_object('approval_number', a.number,
                        'valid_from', to_char(a.valid_from, 'YYYY-MM-DD'),
                        'valid_until', to_char(a.valid_until, 'YYYY-MM-DD'),
                        'revoked', a.revoked_at IS NOT NULL) ORDER BY a.issued_at, a.number)
                 FROM approvals a WHERE a.submission_id = v.id) AS approvals,
              (SELECT to_char(min(a.valid_from), 'YYYY-MM-DD') FROM approvals a WHERE a.submission_id = v.id) AS valid_from,
              (SELECT to_char(max(a.valid_until), 'YYYY-MM-DD') FROM approvals a WHERE a.submission_id = v.id) AS valid_until
         FROM visible v
        ORDER BY valid_until DESC, v.number DESC
        LIMIT ${LIST_LIMIT}
     )
     SELECT sh.id AS submission_id, sh.number AS submission_number, sh.advertiser_name, sh.submitted_by, sh.own,
            sh.valid_from, sh.valid_until, sh.approvals, sh.structure_ids, sh.declared_daily_plays,
            coalesce(c.plays, 0)::bigint AS plays, coalesce(c.flagged, 0)::bigint AS flagged
       FROM shown sh
       LEFT JOIN LATERAL (
         SELECT sum(pc.plays) AS plays, sum(pc.flagged) AS flagged
           FROM play_counts pc
          WHERE pc.approval_number IN (SELECT a.number FROM approvals a WHERE a.submission_id = sh.id)
            AND (sh.own OR pc.structure_id IN (SELECT st.id FROM structures st WHERE st.organisation_id = $2))
       ) c ON true
      ORDER BY sh.valid_until DESC, sh.number DESC`,
    [viewer.authority, viewer.organisationId, viewer.operator],
  );
  return rows.map((r) => {
    const declared = r.declared_daily_plays ?? {};
    const lower = new Map(Object.entries(declared).map(([k, v]) => [k.toLowerCase(), v]));
    const sum = r.structure_ids.reduce((n, id) => {
      const v = lower.get(id);
      return n + (typeof v === 'number' && Number.isInteger(v) ? v : 0);
    }, 0);
    return {
      submission_id: r.submission_id,
      submission_number: r.submission_number,
      advertiser_name: r.advertiser_name,
      submitted_by: r.submitted_by,
      valid_from: r.valid_from,
      valid_until: r.valid_until,
      approvals: r.approvals,
      structures: r.structure_ids.length,
      declared_daily_plays: sum,
      plays: Number(r.plays),
      flagged: Number(r.flagged),
      scope: r.own ? 'full' : 'own_structures',
    };
  });
}
