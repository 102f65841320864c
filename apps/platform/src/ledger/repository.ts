import type { LedgerStatus } from '@ooh/protocol';
import type { Db, DbClient } from '../db/pool.js';
import type { LedgerLeafRow } from './leaves.js';

/** Advisory lock of the digesting transaction: one instance digests at a time (DESIGN.md section 2). */
export const LEDGER_LOCK = 0x05ea1_0002;

export interface BlockRow {
  day: string;
  prev_day: string | null;
  block_height: number;
  leaf_count: number;
  merkle_root: string;
  anchor_sha256: string;
  digest: string;
  status: LedgerStatus;
  digested_at: Date;
  /** The checkpoint size whose quorum of cosignatures anchored the block (migration 077); null while digested. */
  anchored_by?: number | null;
}

const BLOCK_COLUMNS = `to_char(day, 'YYYY-MM-DD') AS day, to_char(prev_day, 'YYYY-MM-DD') AS prev_day,
  block_height, leaf_count, merkle_root, anchor_sha256, digest, status, digested_at, anchored_by`;

const LEAF_COLUMNS = `l.id, l.recorded_at, to_char(l.day, 'YYYY-MM-DD') AS day, l.kind, l.approval_number,
  l.manifest_sha256, l.signed_at, l.revoked_at`;

export async function findBlock(db: Db | DbClient, day: string): Promise<BlockRow | null> {
  const { rows } = await db.query<BlockRow>(`SELECT ${BLOCK_COLUMNS} FROM ledger_blocks WHERE day = $1`, [
    day,
  ]);
  return rows[0] ?? null;
}

export async function lastBlock(db: Db | DbClient): Promise<BlockRow | null> {
  const { rows } = await db.query<BlockRow>(
    `SELECT ${BLOCK_COLUMNS} FROM ledger_blocks ORDER BY day DESC LIMIT 1`,
  );
  return rows[0] ?? null;
}

/** The earliest day the ledger could start: the platform's first day or the day of the first leaf. */
export async function earliestLedgerDay(db: Db | DbClient): Promise<string | null> {
  const { rows } = await db.query<{ day: string | null }>(
    `SELECT to_char(least((SELECT first_day FROM seal_epoch), (SELECT min(day) FROM ledger_leaves)),
       'YYYY-MM-DD') AS day`,
  );
  return rows[0]?.day ?? null;
}

/**
 * Leaves for the block of `day`, in order of recording: the leaves of that day, and any leaf of an earlier day
 * that is in no block yet (it committed after its own day's block was digested).
 */
export async function unblockedLeavesUpTo(client: DbClient, day: string): Promise<LedgerLeafRow[]> {
  const { rows } = await client.query<LedgerLeafRow>(
    `SELECT ${LEAF_COLUMNS} FROM ledger_leaves l
      WHERE l.day <= $1 AND NOT EXISTS (SELECT 1 FROM ledger_block_leaves b WHERE b.leaf_id = l.id)
      ORDER BY l.id`,
    [day],
  );
  return rows;
}

export async function insertBlock(
  client: DbClient,
  block: Omit<BlockRow, 'status'>,
  leafIds: number[],
): Promise<void> {
  await client.query(
    `INSERT INTO ledger_blocks (day, prev_day, block_height, leaf_count, merkle_root, anchor_sha256, digest,
       status, digested_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'digested', $8)`,
    [
      block.day,
      block.prev_day,
      block.block_height,
      block.leaf_count,
      block.merkle_root,
      block.anchor_sha256,
      block.digest,
      block.digested_at,
    ],
  );
  if (leafIds.length > 0) {
    await client.query(
      `INSERT INTO ledger_block_leaves (leaf_id, day, position)
       SELECT leaf_id, $2, position - 1 FROM unnest($1::int8[]) WITH ORDINALITY AS t(leaf_id, position)`,
      [leafIds, block.day],
    );
  }
}

/** The leaves of a digested block in block order. */
export async function leavesOfBlock(db: Db | DbClient, day: string): Promise<LedgerLeafRow[]> {
  const { rows } = await db.query<LedgerLeafRow>(
    `SELECT ${LEAF_COLUMNS} FROM ledger_block_leaves b JOIN ledger_leaves l ON l.id = b.leaf_id
      WHERE b.day = $1 ORDER BY b.position`,
    [day],
  );
  return rows;
}

/** The block holding a leaf and the leaf's position in it; null while the leaf's block is not digested. */
export async function blockOfLeaf(
  db: Db | DbClient,
  leafId: number,
): Promise<{ block: BlockRow; position: number } | null> {
  const { rows } = await db.query<BlockRow & { position: number }>(
    `SELECT to_char(k.day, 'YYYY-MM-DD') AS day, to_char(k.prev_day, 'YYYY-MM-DD') AS prev_day, k.block_height,
            k.leaf_count, k.merkle_root, k.anchor_sha256, k.digest, k.status, k.digested_at, k.anchored_by,
            b.position
       FROM ledger_block_leaves b JOIN ledger_blocks k ON k.day = b.day WHERE b.leaf_id = $1`,
    [leafId],
  );
  const row = rows[0];
  if (!row) return null;
  const { position, ...block } = row;
  return { block, position };
}

/** Leaves of one kind naming an approval (its issue, its revocation). */
export async function leafIdsOfApproval(
  db: Db | DbClient,
  approvalNumber: string,
): Promise<{ id: number; kind: 'approval' | 'revocation' }[]> {
  const { rows } = await db.query<{ id: number; kind: 'approval' | 'revocation' }>(
    `SELECT id, kind FROM ledger_leaves WHERE approval_number = $1 AND kind IN ('approval', 'revocation') ORDER BY id`,
    [approvalNumber],
  );
  return rows;
}
