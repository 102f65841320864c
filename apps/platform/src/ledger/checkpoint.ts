import { canonicalize } from '@ooh/crypto';
import { type BlockDigestFields, blockDigestInput, type NoteSignature } from '@ooh/verify';
import type { PlatformContext } from '../context.js';
import type { Db, DbClient } from '../db/pool.js';
import { loadLedgerKey } from './key.js';
import { checkpointText, formatNote, signNote } from './note.js';
import { ledgerSettings } from './settings.js';

/*
 * Checkpoints of the ledger head (issue 23): after a block is digested, a C2SP checkpoint (c2sp.org/tlog-checkpoint)
 * of the chain up to it: origin line, size = the block height (the number of blocks), root hash = the block digest,
 * signed by the ledger key. One per block, kept for good (GET /v1/ledger/checkpoints/{size}).
 */

export interface CheckpointRow {
  size: number;
  origin: string;
  root_hash: string;
  /** The checkpoint text, a blank line and the ledger key's signature line. */
  note: string;
  made_at: Date;
}

export interface CosignatureRow {
  size: number;
  witness: string;
  key_id: string;
  line: string;
  cosigned_at: Date;
}

/**
 * A block's digest preimage: what the digest is the SHA-256 of (DESIGN.md section 6), one proof line each;
 * @ooh/verify's blockDigestInput, the one statement of it.
 */
export type BlockHeader = ReturnType<typeof blockDigestInput>;

/**
 * The "consistency proof" from old size m to size n in our chain (docs/ledger-witnesses.md, "Where our chain departs
 * from the C2SP tree"): the digest preimages of blocks m+1..n, oldest first, each the base64 of its canonical JSON.
 * Each line hashes to the next block's prev_digest; the last hashes to the checkpoint's root.
 */
export function proofLine(header: BlockHeader): string {
  return Buffer.from(canonicalize(header), 'utf8').toString('base64');
}

const CHECKPOINT_COLUMNS = 'size, origin, root_hash, note, made_at';

export async function findCheckpoint(db: Db | DbClient, size: number): Promise<CheckpointRow | null> {
  const { rows } = await db.query<CheckpointRow>(
    `SELECT ${CHECKPOINT_COLUMNS} FROM ledger_checkpoints WHERE size = $1`,
    [size],
  );
  return rows[0] ?? null;
}

export async function newestCheckpoint(db: Db | DbClient): Promise<CheckpointRow | null> {
  const { rows } = await db.query<CheckpointRow>(
    `SELECT ${CHECKPOINT_COLUMNS} FROM ledger_checkpoints ORDER BY size DESC LIMIT 1`,
  );
  return rows[0] ?? null;
}

export async function cosignaturesOf(db: Db | DbClient, size: number): Promise<CosignatureRow[]> {
  const { rows } = await db.query<CosignatureRow>(
    `SELECT size, witness, key_id, line, cosigned_at FROM ledger_cosignatures WHERE size = $1
      ORDER BY witness, key_id`,
    [size],
  );
  return rows;
}

/** The published checkpoint: the ledger's note with every cosignature collected for it appended. */
export function publishedNote(checkpoint: CheckpointRow, cosignatures: CosignatureRow[]): string {
  return checkpoint.note + cosignatures.map((c) => c.line).join('');
}

/** The digest preimages of blocks from+1..to, oldest first. */
export async function blockHeaders(db: Db | DbClient, from: number, to: number): Promise<BlockHeader[]> {
  const { rows } = await db.query<BlockDigestFields>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day, block_height, leaf_count, merkle_root, anchor_sha256
       FROM ledger_blocks WHERE block_height > $1 AND block_height <= $2 ORDER BY block_height`,
    [from, to],
  );
  return rows.map(blockDigestInput);
}

/**
 * Makes the checkpoint of every digested block that has none yet, oldest first, signed by the ledger key (made on
 * first need). Idempotent across instances: a checkpoint's text and Ed25519 signature are the same whoever makes them,
 * and the size is the key. Returns the sizes it made.
 */
export async function makeCheckpoints(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'config' | 'caches'>,
): Promise<number[]> {
  const { rows } = await ctx.db.query<{ block_height: number; digest: string }>(
    `SELECT b.block_height, b.digest FROM ledger_blocks b
      WHERE NOT EXISTS (SELECT 1 FROM ledger_checkpoints c WHERE c.size = b.block_height)
      ORDER BY b.block_height`,
  );
  if (rows.length === 0) return [];
  const { origin } = ledgerSettings(ctx.config);
  const key = await loadLedgerKey(ctx);
  const made: number[] = [];
  for (const block of rows) {
    const text = checkpointText({
      origin,
      size: block.block_height,
      rootHash: Buffer.from(block.digest, 'hex'),
    });
    // tlog-checkpoint: "The log's key name in its signature line SHOULD match the origin line."
    const note = formatNote({ text, signatures: [signNote(text, origin, key.key)] });
    const result = await ctx.db.query(
      `INSERT INTO ledger_checkpoints (size, origin, root_hash, note, made_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (size) DO NOTHING`,
      [block.block_height, origin, block.digest, note, ctx.clock.now()],
    );
    if (result.rowCount === 1) made.push(block.block_height);
  }
  return made;
}

/**
 * Keeps a cosignature a witness returned, as @ooh/verify read and verified it (acceptCosignature). The first one kept
 * for a size stays: a later answer of the same witness never replaces a line already published and counted.
 */
export async function storeCosignature(
  db: Db | DbClient,
  size: number,
  sig: Pick<NoteSignature, 'name' | 'id' | 'line'>,
  cosignedAt: Date,
  receivedAt: Date,
): Promise<void> {
  await db.query(
    `INSERT INTO ledger_cosignatures (size, witness, key_id, line, cosigned_at, received_at)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (size, witness, key_id) DO NOTHING`,
    [size, sig.name, sig.id, sig.line, cosignedAt, receivedAt],
  );
}

/**
 * DESIGN.md section 6: a block is `anchored` once a checkpoint at or above it carries cosignatures of at least
 * `quorum` of the configured witnesses (a cosignature of size n vouches for every block below n too: each block's
 * digest is in the next one's). `anchored_by` is the smallest such checkpoint. Returns the heights it anchored.
 */
export async function markAnchored(
  db: Db | DbClient,
  witnesses: { name: string; keyId: string }[],
  quorum: number,
): Promise<number[]> {
  if (quorum < 1 || witnesses.length === 0) return [];
  const { rows } = await db.query<{ block_height: number }>(
    `WITH good AS (
       SELECT c.size FROM ledger_cosignatures c
        WHERE (c.witness, c.key_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
        GROUP BY c.size HAVING count(DISTINCT c.witness) >= $3
     )
     UPDATE ledger_blocks b SET status = 'anchored',
            anchored_by = (SELECT min(g.size) FROM good g WHERE g.size >= b.block_height)
      WHERE b.status = 'digested' AND EXISTS (SELECT 1 FROM good g WHERE g.size >= b.block_height)
      RETURNING b.block_height`,
    [witnesses.map((w) => w.name), witnesses.map((w) => w.keyId), quorum],
  );
  return rows.map((r) => r.block_height).sort((a, b) => a - b);
}
