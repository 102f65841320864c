import { almatyDate, type CreativeEntry, type CreativeLookupResponse } from '@ooh/protocol';
import type { Db } from '../db/pool.js';
import { envelopeUrl } from './envelope.js';

/** Who is looking: visibility and submission numbers depend on the organisation. */
export interface Viewer {
  organisationId: string;
  isAuthority: boolean;
}

interface EntryRow {
  revocation_list_version: number | null;
  sha256: string | null;
  status: CreativeEntry['status'];
  approval_number: string | null;
  submission_number: string | null;
  valid_from: string | null;
  valid_until: string | null;
  structures: string[];
  category_id: number | null;
  duration_ms: number | null;
  width: number | null;
  height: number | null;
}

/**
 * Every entry for every asked hash in ONE statement (issue "Approvals": one query per call, not one per
 * hash), with the newest revocation list version.
 *
 * Statuses on the Almaty date $2 (spec creative entry): revoked, not_yet_valid, expired, valid for issued
 * approvals; pending (in_review) and rejected for the viewer's own submissions without an approval, with
 * the requested period and structures.
 *
 * Visibility (docs/approvals.md): the authority sees every approval; an organisation sees approvals of
 * its own submissions and approvals covering at least one of its own structures; pending and rejected
 * entries are shown to the submitting organisation only. submission_number only on the viewer's own.
 */
const LOOKUP_SQL = `
WITH approved AS (
  -- Owner, submission number, structure codes and the structures' owners are copied onto the approval at
  -- issue (migration 031), so this part reads approvals alone (through the hash index on media_sha256);
  -- rows written without the copies fall back to the joins.
  SELECT a.id, a.media_sha256, a.issued_at, a.number, a.valid_from, a.valid_until, a.revoked_at, a.category_id,
         a.duration_ms, a.width, a.height,
         COALESCE(a.organisation_id, (SELECT s.organisation_id FROM submissions s WHERE s.id = a.submission_id))
           AS organisation_id,
         COALESCE(a.submission_number, (SELECT s.number FROM submissions s WHERE s.id = a.submission_id))
           AS submission_number,
         COALESCE(a.structure_codes, ARRAY(
           SELECT st.code FROM approval_structures aps JOIN structures st ON st.id = aps.structure_id
            WHERE aps.approval_id = a.id ORDER BY st.code)) AS structures,
         COALESCE(a.covered_organisation_ids, ARRAY(
           SELECT st.organisation_id FROM approval_structures aps JOIN structures st ON st.id = aps.structure_id
            WHERE aps.approval_id = a.id)) AS covered_organisation_ids
    FROM approvals a
   WHERE a.media_sha256 = ANY($1::text[])
),
hits AS (
  SELECT a.media_sha256 AS sha256, 0 AS part, a.issued_at AS sort_at, a.number AS sort_key,
         CASE WHEN a.revoked_at IS NOT NULL THEN 'revoked'
              WHEN $2::date < a.valid_from THEN 'not_yet_valid'
              WHEN $2::date > a.valid_until THEN 'expired'
              ELSE 'valid' END AS status,
         a.number AS approval_number,
         CASE WHEN a.organisation_id = $3::uuid THEN a.submission_number END AS submission_number,
         to_char(a.valid_from, 'YYYY-MM-DD') AS valid_from,
         to_char(a.valid_until, 'YYYY-MM-DD') AS valid_until,
         a.structures, a.category_id, a.duration_ms, a.width, a.height
    FROM approved a
   WHERE $4::boolean
      OR a.organisation_id = $3::uuid
      OR $3::uuid = ANY(a.covered_organisation_ids)
  UNION ALL
  SELECT m.media_sha256, 1, s.created_at, s.number,
         CASE s.state WHEN 'rejected' THEN 'rejected' ELSE 'pending' END,
         NULL,
         s.number,
         to_char(s.period_from, 'YYYY-MM-DD'),
         to_char(s.period_to, 'YYYY-MM-DD'),
         ARRAY(SELECT st.code FROM submission_structures ss JOIN structures st ON st.id = ss.structure_id
                WHERE ss.submission_id = s.id ORDER BY st.code),
         s.category_id, m.duration_ms, m.width, m.height
    FROM submission_media m
    JOIN submissions s ON s.id = m.submission_id
   WHERE m.media_sha256 = ANY($1::text[])
     AND m.organisation_id = $3::uuid
     AND s.state IN ('in_review', 'rejected')
     AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.submission_id = s.id)
)
SELECT (SELECT max(version) FROM revocation_lists) AS revocation_list_version,
       h.sha256, h.status, h.approval_number, h.submission_number, h.valid_from, h.valid_until, h.structures,
       h.category_id, h.duration_ms, h.height, h.width
  FROM (SELECT 1) AS one
  LEFT JOIN hits h ON true
 ORDER BY h.sha256, h.part, h.sort_at, h.sort_key`;

/**
 * spec POST /api/v1/creatives/lookup: "one item per requested hash, in the order given, without repeats;
 * each item is the same answer as the single lookup for that hash; a hash the caller may not see yields an
 * empty approvals list". `hashes` must already be valid lowercase hex.
 */
export async function lookupCreatives(
  db: Db,
  hashes: readonly string[],
  viewer: Viewer,
  now: Date,
  apiBaseUrl: string,
): Promise<CreativeLookupResponse> {
  const unique = [...new Set(hashes)];
  // A named statement: each connection parses and plans it once, not on every call.
  const { rows } = await db.query<EntryRow>({
    name: 'creative-lookup-v1',
    text: LOOKUP_SQL,
    values: [unique, almatyDate(now), viewer.organisationId, viewer.isAuthority],
  });
  const byHash = new Map<string, CreativeEntry[]>(unique.map((h) => [h, []]));
  for (const row of rows) {
    if (row.sha256 === null) continue;
    byHash.get(row.sha256)?.push({
      status: row.status,
      approval_number: row.approval_number,
      submission_number: row.submission_number,
      valid_from: row.valid_from,
      valid_until: row.valid_until,
      structures: row.structures,
      category_id: row.category_id,
      duration_ms: row.duration_ms,
      width: row.width,
      height: row.height,
      envelope_url: row.approval_number === null ? null : envelopeUrl(apiBaseUrl, row.approval_number),
    });
  }
  return {
    items: unique.map((sha256) => ({ sha256, approvals: byHash.get(sha256)! })),
    revocation_list_version: rows[0]?.revocation_list_version ?? null,
  };
}
