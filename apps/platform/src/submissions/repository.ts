import { almatyDate, formatAlmaty } from '@ooh/protocol';
import type { Db, DbClient } from '../db/pool.js';
import { categories } from '../categories/catalogue.js';
import { nextSerial } from '../shared/numbers.js';
import type { ValidSubmission } from './validate.js';

export interface SubmissionRow {
  id: string;
  number: string;
  organisation_id: string;
  state: string;
  advertiser_name: string;
  advertiser_bin: string | null;
  period_from: string | null;
  period_to: string | null;
  category_id: number | null;
  channel: 'direct' | 'programmatic';
  fast_track: boolean;
  external_refs: Record<string, unknown> | null;
  declared_daily_plays: Record<string, number> | null;
  review_due_at: Date | null;
  created_at: Date;
}

export const SUBMISSION_COLUMNS = `id, number, organisation_id, state, advertiser_name, advertiser_bin,
  to_char(period_from, 'YYYY-MM-DD') AS period_from, to_char(period_to, 'YYYY-MM-DD') AS period_to,
  category_id, channel, fast_track, external_refs, declared_daily_plays, review_due_at, created_at`;

/**
 * The stored fields of a submission, in the column order of both writes: advertiser_name, advertiser_bin,
 * period_from, period_to, category_id, channel, fast_track, external_refs, declared_daily_plays.
 */
function fieldValues(value: ValidSubmission): unknown[] {
  return [
    value.advertiser_name,
    value.advertiser_bin,
    value.period_from,
    value.period_to,
    value.category_id,
    value.channel,
    value.fast_track,
    value.external_refs === null ? null : JSON.stringify(value.external_refs),
    value.declared_daily_plays === null ? null : JSON.stringify(value.declared_daily_plays),
  ];
}

/** Submission numbers: SUB-<Almaty year>-<serial, 6 digits>, gap-free per year. */
export function submissionNumber(year: number, serial: number): string {
  return `SUB-${year}-${String(serial).padStart(6, '0')}`;
}

export async function insertSubmission(
  client: DbClient,
  organisationId: string,
  value: ValidSubmission,
  now: Date,
): Promise<SubmissionRow> {
  const year = Number(almatyDate(now).slice(0, 4));
  const number = submissionNumber(year, await nextSerial(client, 'submission', year));
  const { rows } = await client.query<SubmissionRow>(
    `INSERT INTO submissions (number, organisation_id, state, advertiser_name, advertiser_bin, period_from, period_to,
       category_id, channel, fast_track, external_refs, declared_daily_plays, created_at, updated_at)
     VALUES ($1, $2, 'draft', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)
     RETURNING ${SUBMISSION_COLUMNS}`,
    [number, organisationId, ...fieldValues(value), now],
  );
  await insertStructures(client, rows[0]!.id, value.structure_ids);
  return rows[0]!;
}

/**
 * Writes the edited fields of a draft (PATCH /api/v1/submissions/{id}); the structure list is replaced only when
 * `replaceStructures` (spec: "sending either replaces the current structures").
 */
export async function updateDraft(
  client: DbClient,
  id: string,
  value: ValidSubmission,
  replaceStructures: boolean,
  now: Date,
): Promise<SubmissionRow> {
  const { rows } = await client.query<SubmissionRow>(
    `UPDATE submissions SET advertiser_name = $2, advertiser_bin = $3, period_from = $4, period_to = $5,
       category_id = $6, channel = $7, fast_track = $8, external_refs = $9, declared_daily_plays = $10,
       updated_at = $11
     WHERE id = $1 AND state = 'draft'
     RETURNING ${SUBMISSION_COLUMNS}`,
    [id, ...fieldValues(value), now],
  );
  if (replaceStructures) {
    await client.query('DELETE FROM submission_structures WHERE submission_id = $1', [id]);
    await insertStructures(client, id, value.structure_ids);
  }
  return rows[0]!;
}

async function insertStructures(
  client: DbClient,
  submissionId: string,
  structureIds: string[],
): Promise<void> {
  await client.query(
    `INSERT INTO submission_structures (submission_id, structure_id, position)
     SELECT $1, s.id, s.ord FROM unnest($2::uuid[]) WITH ORDINALITY AS s(id, ord)`,
    [submissionId, structureIds],
  );
}

export async function findSubmission(db: Db, id: string): Promise<SubmissionRow | null> {
  const { rows } = await db.query<SubmissionRow>(
    `SELECT ${SUBMISSION_COLUMNS} FROM submissions WHERE id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

export async function submissionStructureIds(db: Db | DbClient, id: string): Promise<string[]> {
  const { rows } = await db.query<{ structure_id: string }>(
    'SELECT structure_id FROM submission_structures WHERE submission_id = $1 ORDER BY position',
    [id],
  );
  return rows.map((r) => r.structure_id);
}

/**
 * What GET /api/v1/submissions/{id} adds for the console (docs/decisions.md "Submissions"): the uploaded media
 * file's facts, the approval issued for it (the newest, with whether it is revoked) and the reason of a rejection.
 */
export interface SubmissionReview {
  media: {
    sha256: string;
    media_type: string;
    size_bytes: number;
    width: number;
    height: number;
    duration_ms: number | null;
    uploaded_at: string;
  } | null;
  approval_number: string | null;
  approval_revoked_at: string | null;
  reject_reason: string | null;
}

export async function submissionReview(db: Db, id: string): Promise<SubmissionReview> {
  const { rows } = await db.query<{
    reject_reason: string | null;
    media_sha256: string | null;
    media_type: string;
    size_bytes: number;
    width: number;
    height: number;
    duration_ms: number | null;
    uploaded_at: Date;
    approval_number: string | null;
    approval_revoked_at: Date | null;
  }>(
    `SELECT s.reject_reason, m.media_sha256, m.media_type, m.size_bytes, m.width, m.height, m.duration_ms,
            m.uploaded_at, a.number AS approval_number, a.revoked_at AS approval_revoked_at
       FROM submissions s
       LEFT JOIN submission_media m ON m.submission_id = s.id
       LEFT JOIN LATERAL (SELECT number, revoked_at FROM approvals WHERE submission_id = s.id
                           ORDER BY issued_at DESC LIMIT 1) a ON true
      WHERE s.id = $1`,
    [id],
  );
  const row = rows[0];
  return {
    media:
      row?.media_sha256 != null
        ? {
            sha256: row.media_sha256,
            media_type: row.media_type,
            size_bytes: row.size_bytes,
            width: row.width,
            height: row.height,
            duration_ms: row.duration_ms,
            uploaded_at: formatAlmaty(row.uploaded_at),
          }
        : null,
    approval_number: row?.approval_number ?? null,
    approval_revoked_at: row?.approval_revoked_at ? formatAlmaty(row.approval_revoked_at) : null,
    reject_reason: row?.reject_reason ?? null,
  };
}

const holdsNothing = (value: object | null): boolean => value === null || Object.keys(value).length === 0;

/** The spec's Submission resource. */
export function submissionView(row: SubmissionRow) {
  const category = row.category_id === null ? null : (categories().get(row.category_id) ?? null);
  return {
    id: row.id,
    number: row.number,
    state: row.state,
    advertiser_name: row.advertiser_name,
    period_from: row.period_from,
    period_to: row.period_to,
    // Optional fields are left out when they hold nothing (null, or an empty object): the resource can be sent back
    // as a request (issue "The spec to the letter, second pass", item 4: "external_refs": {} is refused on input
    // without programmatic).
    ...(holdsNothing(row.declared_daily_plays) ? {} : { declared_daily_plays: row.declared_daily_plays }),
    category_id: row.category_id,
    category: category
      ? { id: category.id, parent_id: category.parent_id, tier: category.tier, name: category.name }
      : null,
    channel: row.channel,
    fast_track: row.fast_track,
    ...(holdsNothing(row.external_refs) ? {} : { external_refs: row.external_refs }),
    review_due_at: row.review_due_at ? formatAlmaty(row.review_due_at) : null,
  };
}

/** Locks a submission row for a state move; null when it does not exist. */
export async function lockSubmission(client: DbClient, id: string): Promise<SubmissionRow | null> {
  const { rows } = await client.query<SubmissionRow>(
    `SELECT ${SUBMISSION_COLUMNS} FROM submissions WHERE id = $1 FOR UPDATE`,
    [id],
  );
  return rows[0] ?? null;
}
