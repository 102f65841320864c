import { almatyDate } from '@ooh/protocol';
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../db/pool.js';

/**
 * GET {verify_url}/v1/approvals?media_sha256=<hex>: "is this file approved, where and until when?" for anyone,
 * without credentials (issue 22, item 1). The spec's lookup (POST {base_url}/api/v1/creatives/lookup) needs
 * read:creatives and shows an organisation its own entries only; this public answer holds only what the public
 * ledger and GET {verify_url}/v1/approvals/{number} already publish for every issued approval (its number, status,
 * dates and structure codes): never a pending or rejected submission (its file is answered as unknown), never an
 * organisation, a submission number or an envelope.
 */
export const PublicApprovalEntry = Type.Object({
  approval_number: Type.String(),
  status: Type.Union([
    Type.Literal('valid'),
    Type.Literal('not_yet_valid'),
    Type.Literal('expired'),
    Type.Literal('revoked'),
  ]),
  valid_from: Type.String({ format: 'date' }),
  valid_until: Type.String({ format: 'date' }),
  structures: Type.Array(Type.String()),
});
export type PublicApprovalEntry = Static<typeof PublicApprovalEntry>;

export const PublicApprovalsOfMedia = Type.Object({
  media_sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }),
  /** Newest issue first; at most PUBLIC_LOOKUP_MAX_ITEMS. */
  items: Type.Array(PublicApprovalEntry),
});
export type PublicApprovalsOfMedia = Static<typeof PublicApprovalsOfMedia>;

export const PUBLIC_LOOKUP_MAX_ITEMS = 50;

/**
 * The issued approvals of a media hash, on the Almaty date of `now`. Statuses as GET /v1/approvals/{number} gives
 * them (src/ledger/routes.ts): revoked once revoked_at has passed, else by the approval's Almaty days, inclusive.
 * Structure codes are the copies made at issue (migration 031), or the joins for rows without them.
 */
export async function approvalsOfMedia(
  db: Db,
  mediaSha256: string,
  now: Date,
): Promise<PublicApprovalEntry[]> {
  const { rows } = await db.query<PublicApprovalEntry>({
    name: 'public-approvals-of-media-v1',
    text: `SELECT a.number AS approval_number,
                  CASE WHEN a.revoked_at IS NOT NULL AND a.revoked_at <= $2 THEN 'revoked'
                       WHEN $3::date < a.valid_from THEN 'not_yet_valid'
                       WHEN $3::date > a.valid_until THEN 'expired'
                       ELSE 'valid' END AS status,
                  to_char(a.valid_from, 'YYYY-MM-DD') AS valid_from,
                  to_char(a.valid_until, 'YYYY-MM-DD') AS valid_until,
                  COALESCE(a.structure_codes, ARRAY(
                    SELECT st.code FROM approval_structures aps JOIN structures st ON st.id = aps.structure_id
                     WHERE aps.approval_id = a.id ORDER BY st.code)) AS structures
             FROM approvals a
            WHERE a.media_sha256 = $1
            ORDER BY a.issued_at DESC, a.number
            LIMIT $4`,
    values: [mediaSha256, now, almatyDate(now), PUBLIC_LOOKUP_MAX_ITEMS],
  });
  return rows;
}
