import { inclusionPath } from '@ooh/crypto';
import { addDays, almatyDate, almatyDayEnd, type LedgerInfo, type LedgerProof } from '@ooh/protocol';
import { blockDigest, hexEncode, leafHash, merkleRoot } from '@ooh/verify';
import type { PlatformContext } from '../context.js';
import { type Db, type DbClient, isUniqueViolation, withTransaction } from '../db/pool.js';
import { type LedgerLeafObject, type LedgerLeafRow, ledgerLeafObject } from './leaves.js';
import {
  type BlockRow,
  blockOfLeaf,
  earliestLedgerDay,
  findBlock,
  insertBlock,
  LEDGER_LOCK,
  lastBlock,
  leavesOfBlock,
  unblockedLeavesUpTo,
} from './repository.js';

/** DESIGN.md section 6: the anchor of the first block, and the prev_seal_sha256 of the first seal. */
export const ZERO_SHA256 = '0'.repeat(64);

export type LedgerErrorCode = 'day_not_ended' | 'before_first_day' | 'busy';

export class LedgerError extends Error {
  constructor(
    readonly code: LedgerErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'LedgerError';
  }
}

/*
 * The rules of a block (the leaf hash, the Merkle root over the leaves, the digest of {v:1, day, block_height,
 * leaf_count, merkle_root, prev_digest}: DESIGN.md section 6) are @ooh/verify's, the ones every verifier applies;
 * this file decides only which rows make a block, and when.
 */

/** Waits for transactions still recording leaves (see waitForBatchWriters in seals: same reason). */
async function waitForLeafWriters(db: Db): Promise<void> {
  await withTransaction(db, async (client) => {
    await client.query('LOCK TABLE ledger_leaves IN SHARE MODE');
  });
}

async function digestOne(
  client: DbClient,
  day: string,
  now: Date,
): Promise<{ block: BlockRow; created: boolean } | 'out_of_order'> {
  const existing = await findBlock(client, day);
  if (existing) return { block: existing, created: false };
  const previous = await lastBlock(client);
  if (previous && previous.day !== addDays(day, -1)) return 'out_of_order';
  const leaves = await unblockedLeavesUpTo(client, day);
  const hashes = await Promise.all(leaves.map((row) => leafHash(ledgerLeafObject(row))));
  const merkle = hexEncode(await merkleRoot(hashes));
  const blockHeight = previous ? previous.block_height + 1 : 1;
  const anchor = previous ? previous.digest : ZERO_SHA256;
  const block: Omit<BlockRow, 'status'> = {
    day,
    prev_day: previous ? previous.day : null,
    block_height: blockHeight,
    leaf_count: leaves.length,
    merkle_root: merkle,
    anchor_sha256: anchor,
    digest: await blockDigest({
      day,
      block_height: blockHeight,
      leaf_count: leaves.length,
      merkle_root: merkle,
      anchor_sha256: anchor,
    }),
    digested_at: now,
  };
  await insertBlock(
    client,
    block,
    leaves.map((row) => row.id),
  );
  return { block: { ...block, status: 'digested' }, created: true };
}

const MAX_RETRIES = 5;

/** The first day of the ledger: the first block's, else the earliest activity, else `fallback`. */
async function ledgerStartDay(db: Db, fallback: string | null): Promise<string | null> {
  const { rows } = await db.query<{ day: string }>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day FROM ledger_blocks ORDER BY day LIMIT 1`,
  );
  if (rows[0]) return rows[0].day;
  return (await earliestLedgerDay(db)) ?? fallback;
}

/**
 * Digests the ledger block of every ended day from the first undigested one up to `day`, in order, each in its own
 * transaction under the ledger's advisory lock. `wait`: block on the lock (console, tests) or give up when another
 * instance holds it (scheduler). Returns the blocks it made.
 */
export async function digestLedgerUpTo(
  ctx: Pick<PlatformContext, 'db' | 'clock'>,
  day: string,
  options: { wait: boolean },
): Promise<BlockRow[]> {
  const made: BlockRow[] = [];
  let barrierPassed = false;
  let retries = 0;
  for (;;) {
    const last = await lastBlock(ctx.db);
    const next = last ? addDays(last.day, 1) : await ledgerStartDay(ctx.db, day);
    if (next === null || next > day) return made;
    const now = ctx.clock.now();
    if (now.getTime() < almatyDayEnd(next).getTime()) return made;
    if (!barrierPassed) {
      await waitForLeafWriters(ctx.db);
      barrierPassed = true;
    }
    const result = await withTransaction(ctx.db, async (client) => {
      if (options.wait) {
        await client.query('SELECT pg_advisory_xact_lock($1)', [LEDGER_LOCK]);
      } else {
        const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS ok', [
          LEDGER_LOCK,
        ]);
        if (!rows[0]?.ok) return 'busy' as const;
      }
      return digestOne(client, next, now);
    }).catch((error: unknown) => {
      // The keys of ledger_blocks are the last line of defence behind the lock.
      if (isUniqueViolation(error)) return 'out_of_order' as const;
      throw error;
    });
    if (result === 'busy') return made;
    // Another instance digested a day meanwhile: look again (a few times; more means something else is wrong).
    if (result === 'out_of_order') {
      retries += 1;
      if (retries > MAX_RETRIES)
        throw new LedgerError('busy', `ledger day ${next} could not be digested in order`);
      continue;
    }
    retries = 0;
    if (result.created) made.push(result.block);
  }
}

/**
 * Digests `day` (and any undigested day before it, in order) once `day` has ended (DESIGN.md section 6: "After the
 * day ends the block is digested"). Idempotent: returns the block, new or existing.
 */
export async function digestLedgerDay(
  ctx: Pick<PlatformContext, 'db' | 'clock'>,
  day: string,
): Promise<BlockRow> {
  if (ctx.clock.now().getTime() < almatyDayEnd(day).getTime()) {
    throw new LedgerError('day_not_ended', `ledger day ${day} has not ended yet`);
  }
  const existing = await findBlock(ctx.db, day);
  if (existing) return existing;
  const first = await ledgerStartDay(ctx.db, day);
  if (first !== null && day < first) {
    throw new LedgerError('before_first_day', `the ledger starts on ${first}; ${day} is before it`);
  }
  await digestLedgerUpTo(ctx, day, { wait: true });
  const block = await findBlock(ctx.db, day);
  if (!block) throw new LedgerError('busy', `ledger day ${day} could not be digested`);
  return block;
}

/** How long after a day ends the scheduler digests it. */
export const LEDGER_GRACE_MS = 30_000;

/** Digests every ended, undigested day up to yesterday (scheduler), once LEDGER_GRACE_MS have passed. */
export async function digestEndedLedgerDays(ctx: Pick<PlatformContext, 'db' | 'clock'>): Promise<BlockRow[]> {
  // The same grace as sealing: an instance whose clock is a little behind may still be recording leaves of it.
  const yesterday = addDays(almatyDate(new Date(ctx.clock.now().getTime() - LEDGER_GRACE_MS)), -1);
  return digestLedgerUpTo(ctx, yesterday, { wait: false });
}

/** A leaf with its hash, as a block carries it. */
export interface BlockLeaf {
  index: number;
  leaf: LedgerLeafObject;
  leaf_sha256: string;
}

/** The leaves of a digested block with their hashes, in block order. */
export async function blockLeaves(
  db: Db | DbClient,
  day: string,
): Promise<{ rows: LedgerLeafRow[]; leaves: BlockLeaf[] }> {
  const rows = await leavesOfBlock(db, day);
  const leaves = await Promise.all(
    rows.map(async (row, index) => {
      const leaf = ledgerLeafObject(row);
      return { index, leaf, leaf_sha256: hexEncode(await leafHash(leaf)) };
    }),
  );
  return { rows, leaves };
}

/**
 * The ledger position of a leaf (spec StatsSeal "ledger"): null until the block holding it is digested. The proof
 * is built from the leaves as stored now against the merkle root stored at digest time, so a leaf changed later
 * gives a proof that does not verify.
 */
export async function ledgerInfoOfLeaf(db: Db | DbClient, leafId: number): Promise<LedgerInfo | null> {
  const found = await blockOfLeaf(db, leafId);
  if (!found) return null;
  const { block, position } = found;
  const { leaves } = await blockLeaves(db, block.day);
  const own = leaves[position];
  if (!own) return null;
  const hashes = leaves.map((l) => Buffer.from(l.leaf_sha256, 'hex'));
  const proof: LedgerProof = {
    v: 1,
    day: block.day,
    leaf: own.leaf,
    leaf_sha256: own.leaf_sha256,
    index: position,
    leaf_count: block.leaf_count,
    path: inclusionPath(hashes, position),
    merkle_root: block.merkle_root,
    anchor_sha256: block.anchor_sha256,
    digest: block.digest,
  };
  return {
    day: block.day,
    status: block.status,
    block_height: block.block_height,
    digest: block.digest,
    proof,
  };
}
