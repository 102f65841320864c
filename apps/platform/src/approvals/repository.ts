import type { Db, DbClient } from '../db/pool.js';
import type { MediaFacts, MediaType } from '../media/index.js';

// ---------------------------------------------------------------------------------------------------------
// Submission media and review

export interface SubmissionMediaRow extends MediaFacts {
  submission_id: string;
  organisation_id: string;
  media_sha256: string;
  media_type: MediaType;
  size_bytes: number;
  uploaded_at: Date;
}

export async function findSubmissionMedia(
  db: Db | DbClient,
  submissionId: string,
): Promise<SubmissionMediaRow | null> {
  const { rows } = await db.query<SubmissionMediaRow>(
    `SELECT submission_id, organisation_id, media_sha256, media_type, size_bytes, width, height, duration_ms, uploaded_at
       FROM submission_media WHERE submission_id = $1`,
    [submissionId],
  );
  return rows[0] ?? null;
}

/** One media file per submission: a new upload to a draft replaces the previous one. */
export async function putSubmissionMedia(
  client: DbClient,
  media: Omit<SubmissionMediaRow, 'uploaded_at'>,
  now: Date,
): Promise<void> {
  await client.query(
    `INSERT INTO submission_media (submission_id, organisation_id, media_sha256, media_type, size_bytes, width, height,
       duration_ms, uploaded_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (submission_id) DO UPDATE SET media_sha256 = EXCLUDED.media_sha256, media_type = EXCLUDED.media_type,
       size_bytes = EXCLUDED.size_bytes, width = EXCLUDED.width, height = EXCLUDED.height,
       duration_ms = EXCLUDED.duration_ms, uploaded_at = EXCLUDED.uploaded_at`,
    [
      media.submission_id,
      media.organisation_id,
      media.media_sha256,
      media.media_type,
      media.size_bytes,
      media.width,
      media.height,
      media.duration_ms,
      now,
    ],
  );
  await client.query('UPDATE submissions SET updated_at = $2 WHERE id = $1', [media.submission_id, now]);
}

/** draft -> in_review. */
export async function markSent(
  client: DbClient,
  id: string,
  now: Date,
  reviewDueAt: Date | null,
): Promise<void> {
  await client.query(
    `UPDATE submissions SET state = 'in_review', sent_at = $2, review_due_at = $3, updated_at = $2 WHERE id = $1`,
    [id, now, reviewDueAt],
  );
}

/** in_review -> approved | rejected. */
export async function markDecided(
  client: DbClient,
  id: string,
  state: 'approved' | 'rejected',
  now: Date,
  rejectReason: string | null,
): Promise<void> {
  await client.query(
    `UPDATE submissions SET state = $2, decided_at = $3, reject_reason = $4, updated_at = $3 WHERE id = $1`,
    [id, state, now, rejectReason],
  );
}

export async function rejectReasonOf(db: Db | DbClient, id: string): Promise<string | null> {
  const { rows } = await db.query<{ reject_reason: string | null }>(
    'SELECT reject_reason FROM submissions WHERE id = $1',
    [id],
  );
  return rows[0]?.reject_reason ?? null;
}

export interface RequestedStructure {
  id: string;
  code: string;
  organisation_id: string;
  /** Set once the structure was retired (after the draft chose it): nothing may be sent or approved for it. */
  retired_at: Date | null;
}

/** The requested structures of a submission with their codes, owners and retirement, in the submission's order. */
export async function submissionStructures(
  db: Db | DbClient,
  submissionId: string,
): Promise<RequestedStructure[]> {
  const { rows } = await db.query<RequestedStructure>(
    `SELECT s.id, s.code, s.organisation_id, s.retired_at
       FROM submission_structures ss JOIN structures s ON s.id = ss.structure_id
      WHERE ss.submission_id = $1 ORDER BY ss.position`,
    [submissionId],
  );
  return rows;
}

// ---------------------------------------------------------------------------------------------------------
// Approvals

export interface NewApproval {
  number: string;
  submissionId: string;
  submissionNumber: string;
  organisationId: string;
  mediaSha256: string;
  validFrom: string;
  validUntil: string;
  categoryId: number | null;
  durationMs: number | null;
  width: number | null;
  height: number | null;
  issuedAt: Date;
  issuedBy: string;
  structureIds: string[];
  /** The codes of structureIds, sorted: the manifest's `structures`. */
  structureCodes: string[];
  /** Owners of structureIds (lookup visibility). */
  coveredOrganisationIds: string[];
}

export async function insertApproval(client: DbClient, a: NewApproval): Promise<string> {
  const { rows } = await client.query<{ id: string }>(
    `INSERT INTO approvals (number, submission_id, media_sha256, valid_from, valid_until, category_id, duration_ms,
       width, height, issued_at, issued_by, organisation_id, submission_number, structure_codes, covered_organisation_ids)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING id`,
    [
      a.number,
      a.submissionId,
      a.mediaSha256,
      a.validFrom,
      a.validUntil,
      a.categoryId,
      a.durationMs,
      a.width,
      a.height,
      a.issuedAt,
      a.issuedBy,
      a.organisationId,
      a.submissionNumber,
      a.structureCodes,
      a.coveredOrganisationIds,
    ],
  );
  const id = rows[0]!.id;
  await client.query(
    'INSERT INTO approval_structures (approval_id, structure_id) SELECT $1, unnest($2::uuid[])',
    [id, a.structureIds],
  );
  return id;
}

export async function storeEnvelope(
  client: DbClient,
  id: string,
  envelope: string,
  manifestSha256: string,
): Promise<void> {
  await client.query('UPDATE approvals SET envelope = $2, manifest_sha256 = $3 WHERE id = $1', [
    id,
    envelope,
    manifestSha256,
  ]);
}

export interface ApprovalRow {
  id: string;
  number: string;
  submission_id: string;
  organisation_id: string;
  media_sha256: string;
  valid_from: string;
  valid_until: string;
  issued_at: Date;
  revoked_at: Date | null;
  revoke_reason: string | null;
  manifest_sha256: string | null;
  envelope: string | null;
}

const APPROVAL_COLUMNS = `a.id, a.number, a.submission_id, s.organisation_id, a.media_sha256,
  to_char(a.valid_from, 'YYYY-MM-DD') AS valid_from, to_char(a.valid_until, 'YYYY-MM-DD') AS valid_until,
  a.issued_at, a.revoked_at, a.revoke_reason, a.manifest_sha256, a.envelope`;

export async function lockApprovalByNumber(client: DbClient, number: string): Promise<ApprovalRow | null> {
  const { rows } = await client.query<ApprovalRow>(
    `SELECT ${APPROVAL_COLUMNS} FROM approvals a JOIN submissions s ON s.id = a.submission_id
      WHERE a.number = $1 FOR UPDATE OF a`,
    [number],
  );
  return rows[0] ?? null;
}

export async function markRevoked(
  client: DbClient,
  id: string,
  now: Date,
  reason: string,
  revokedBy: string,
): Promise<void> {
  await client.query(
    'UPDATE approvals SET revoked_at = $2, revoke_reason = $3, revoked_by = $4 WHERE id = $1',
    [id, now, reason, revokedBy],
  );
}

/**
 * The envelope of an approval if the caller may see it: the authority sees every approval; an
 * organisation the approvals of its own submissions and those covering one of its structures.
 */
export async function visibleEnvelope(
  db: Db,
  number: string,
  viewer: { organisationId: string; isAuthority: boolean },
): Promise<string | null> {
  const { rows } = await db.query<{ envelope: string | null }>(
    `SELECT a.envelope FROM approvals a JOIN submissions s ON s.id = a.submission_id
      WHERE a.number = $1
        AND ($3::boolean OR s.organisation_id = $2 OR EXISTS (
              SELECT 1 FROM approval_structures aps JOIN structures st ON st.id = aps.structure_id
               WHERE aps.approval_id = a.id AND st.organisation_id = $2))`,
    [number, viewer.organisationId, viewer.isAuthority],
  );
  return rows[0]?.envelope ?? null;
}
