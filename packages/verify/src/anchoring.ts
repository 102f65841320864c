import { addDays } from '@ooh/protocol';
import { blockDigest } from './block.js';
import { checkCosignedCheckpoint, rootIs, signedByLedgerKey, type Vkey } from './note.js';

/*
 * Issue 23, in the browser: is the block holding a seal anchored for this reader? Like `ooh-verify --witness ...
 * --require-anchored n`: a checkpoint at or above the block (the one that anchored it, its own, or the newest) must
 * carry cosignatures of at least `quorum` of the witnesses the reader pins, and its root must be the digest of the
 * block at its size, which must chain down to the seal's block through each block's anchor_sha256.
 */

/** The block of a seal, as its ledger proof and block document give it. */
export interface AnchorTarget {
  day: string;
  block_height: number;
  digest: string;
  /** GET /v1/ledger/blocks/{day} says which checkpoint anchored it; a hint only. */
  anchored_by?: number | null;
}

/** The fields of a block document the walk needs (GET /v1/ledger/blocks/{day}). */
export interface BlockFields {
  day: string;
  block_height: number;
  leaf_count: number;
  merkle_root: string;
  anchor_sha256: string;
  digest: string;
}

export interface AnchorSource {
  /** The text of a published checkpoint path (/v1/ledger/checkpoint, /v1/ledger/checkpoints/{size}); null on 404. */
  checkpoint(path: string): Promise<string | null>;
  /** A digested block by day; null when there is none. */
  block(day: string): Promise<BlockFields | null>;
}

export type AnchorState = 'ok' | 'failed' | 'unknown';

export interface AnchorCheck {
  state: AnchorState;
  /**
   * A machine word the page translates: anchored, not_anchored, no_witnesses, cosignature_invalid,
   * cosignature_future (a pinned witness's cosignature is dated ahead of the reader's clock), root_differs; with the
   * ledger key pinned: ledger_key_refused (a checkpoint it did not sign), ledger_signed (no witness pinned: the
   * checkpoint is the ledger's), no_checkpoint (no witness pinned and no checkpoint at or above the block).
   */
  reason: string;
  /** The checkpoint size that carries the quorum, and who cosigned it. */
  size?: number;
  witnesses?: string[];
}

/** The digest of the block at `size`, reached from `target` block by block; null when the chain breaks. */
async function digestAt(target: AnchorTarget, size: number, source: AnchorSource): Promise<string | null> {
  let digest = target.digest;
  let day = target.day;
  for (let height = target.block_height + 1; height <= size; height += 1) {
    day = addDays(day, 1);
    const block = await source.block(day);
    if (!block || block.block_height !== height || block.anchor_sha256 !== digest) return null;
    const recomputed = await blockDigest(block);
    if (recomputed !== block.digest) return null;
    digest = recomputed;
  }
  return digest;
}

export async function verifyAnchoring(
  target: AnchorTarget,
  witnesses: readonly Vkey[],
  quorum: number,
  source: AnchorSource,
  options: {
    /** The reader's clock (milliseconds): cosignatures dated beyond it (and a small skew) are refused. */
    now?: number;
    /** The ledger's checkpoint key the reader pins (type 0x01): a checkpoint it did not sign is refused. */
    ledgerKey?: Vkey | null;
  } = {},
): Promise<AnchorCheck> {
  const now = options.now ?? Date.now();
  const ledgerKey = options.ledgerKey ?? null;
  if (!ledgerKey && (witnesses.length === 0 || quorum < 1))
    return { state: 'unknown', reason: 'no_witnesses' };
  const paths = [
    ...(target.anchored_by ? [`/v1/ledger/checkpoints/${target.anchored_by}`] : []),
    `/v1/ledger/checkpoints/${target.block_height}`,
    '/v1/ledger/checkpoint',
  ];
  // As ooh-verify: a pinned witness's cosignature that does not verify or is dated ahead, or a cosigned root off the
  // chain, on any checkpoint read before a quorum is found, fails the check (the CLI records it as a failure).
  for (const path of new Set(paths)) {
    const text = await source.checkpoint(path);
    if (text === null) continue;
    if (ledgerKey && !(await signedByLedgerKey(text, ledgerKey))) {
      return { state: 'failed', reason: 'ledger_key_refused' };
    }
    const result = await checkCosignedCheckpoint(text, witnesses, now);
    if (!result) continue;
    if (result.invalid.length > 0) {
      return { state: 'failed', reason: 'cosignature_invalid', witnesses: result.invalid };
    }
    if (result.future) {
      return { state: 'failed', reason: 'cosignature_future', witnesses: result.future };
    }
    const { size } = result.checkpoint;
    const enough = witnesses.length === 0 || result.cosigned.length >= quorum;
    if (size < target.block_height || !enough) continue;
    const digest = size === target.block_height ? target.digest : await digestAt(target, size, source);
    if (digest === null || !rootIs(result.checkpoint, digest)) {
      return { state: 'failed', reason: 'root_differs', size };
    }
    if (witnesses.length === 0) return { state: 'ok', reason: 'ledger_signed', size };
    return { state: 'ok', reason: 'anchored', size, witnesses: result.cosigned.map((c) => c.name) };
  }
  return { state: 'failed', reason: witnesses.length === 0 ? 'no_checkpoint' : 'not_anchored' };
}
