import { almatyDate, formatAlmaty, type LedgerLeafKind } from '@ooh/protocol';
import type { Db, DbClient } from '../db/pool.js';

/**
 * A leaf of the public ledger (DESIGN.md section 6): approvals issued (`approval`), approvals revoked
 * (`revocation`) and seals made (`stats_seal`), recorded in the transaction that does the thing.
 */
export type LedgerLeafInput =
  | { kind: 'approval'; approvalNumber: string; manifestSha256: string; signedAt: Date }
  | { kind: 'revocation'; approvalNumber: string; manifestSha256: string; signedAt: Date; revokedAt: Date }
  // manifest_sha256 of a seal = SHA-256 of the seal body's canonical JSON; signedAt = the seal's signed_at.
  | { kind: 'stats_seal'; manifestSha256: string; signedAt: Date };

export interface LedgerLeafRow {
  id: number;
  recorded_at: Date;
  /** Almaty day of recorded_at (YYYY-MM-DD): the block the leaf belongs to. */
  day: string;
  kind: LedgerLeafKind;
  approval_number: string | null;
  manifest_sha256: string;
  signed_at: Date;
  revoked_at: Date | null;
}

/** The leaf object whose canonical JSON is hashed into the day's block (DESIGN.md section 6). */
export interface LedgerLeafObject {
  kind: LedgerLeafKind;
  approval_number: string | null;
  manifest_sha256: string;
  signed_at: string;
  revoked_at: string | null;
}

/**
 * Timestamps of leaves are Asia/Almaty RFC 3339 with milliseconds (the precision of the injected clock),
 * the same text as issued_at in the approval's manifest, so a leaf is rebuilt exactly from the table.
 */
export function ledgerLeafObject(
  row: Pick<LedgerLeafRow, 'kind' | 'approval_number' | 'manifest_sha256' | 'signed_at' | 'revoked_at'>,
): LedgerLeafObject {
  return {
    kind: row.kind,
    approval_number: row.approval_number,
    manifest_sha256: row.manifest_sha256,
    signed_at: formatAlmaty(row.signed_at, { milliseconds: true }),
    revoked_at: row.revoked_at ? formatAlmaty(row.revoked_at, { milliseconds: true }) : null,
  };
}

const LEAF_COLUMNS = `id, recorded_at, to_char(day, 'YYYY-MM-DD') AS day, kind, approval_number, manifest_sha256,
  signed_at, revoked_at`;

/**
 * Records a leaf in the caller's transaction, so the leaf exists exactly when the approval, revocation
 * or seal does. Its day is the Almaty day of `now`; its place in the day is the order of recording (id).
 */
export async function recordLedgerLeaf(
  client: DbClient,
  leaf: LedgerLeafInput,
  now: Date,
): Promise<LedgerLeafRow> {
  if (!/^[0-9a-f]{64}$/.test(leaf.manifestSha256))
    throw new Error('manifestSha256 must be lowercase hex SHA-256');
  const { rows } = await client.query<LedgerLeafRow>(
    `INSERT INTO ledger_leaves (recorded_at, day, kind, approval_number, manifest_sha256, signed_at, revoked_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     RETURNING ${LEAF_COLUMNS}`,
    [
      now,
      almatyDate(now),
      leaf.kind,
      leaf.kind === 'stats_seal' ? null : leaf.approvalNumber,
      leaf.manifestSha256,
      leaf.signedAt,
      leaf.kind === 'revocation' ? leaf.revokedAt : null,
    ],
  );
  return rows[0]!;
}

/** The leaves of one Almaty day in order of recording. */
export async function ledgerLeavesOfDay(db: Db | DbClient, day: string): Promise<LedgerLeafRow[]> {
  const { rows } = await db.query<LedgerLeafRow>(
    `SELECT ${LEAF_COLUMNS} FROM ledger_leaves WHERE day = $1 ORDER BY id`,
    [day],
  );
  return rows;
}
