import { bytesEqual, hexDecode, hexEncode, sha256, sha256Hex } from './bytes.js';
import { canonicalBytes } from './jcs.js';
import { merkleRoot, rootFromProof } from './merkle.js';

/*
 * Public ledger blocks and ledger proofs, checked in the browser from public data only (DESIGN.md section 6; the
 * the rules the `verify` CLI applies). Every hash is recomputed, none is taken as given. seal.ts checks a seal's
 * ledger position with verifyLedgerInfo.
 */

const ZERO = '0'.repeat(64);

/** A digested block without its leaves (GET {verify_url}/v1/ledger/head). */
export interface BlockHead {
  day: string;
  block_height: number;
  status: string;
  leaf_count: number;
  merkle_root: string;
  anchor_sha256: string;
  digest: string;
  digested_at: string;
}

export interface LedgerLeafObject {
  kind: string;
  approval_number: string | null;
  manifest_sha256: string;
  signed_at: string;
  revoked_at: string | null;
}

/** A digested block with its leaves (GET {verify_url}/v1/ledger/blocks/{day}). */
export interface Block extends BlockHead {
  leaves: { index: number; leaf: LedgerLeafObject; leaf_sha256: string }[];
}

/** The ledger position of a leaf, as a seal or an approval carries it (spec StatsSeal "ledger fields"). */
export interface LedgerInfo {
  day: string;
  status: string;
  block_height: number;
  digest: string;
  proof: {
    v: number;
    day: string;
    leaf: Record<string, unknown>;
    leaf_sha256: string;
    index: number;
    leaf_count: number;
    path: { side: string; hash: string }[];
    merkle_root: string;
    anchor_sha256: string;
    digest: string;
  };
}

export type BlockCheckName = 'leaves' | 'root' | 'digest' | 'link';
export type BlockCheckState = 'ok' | 'failed' | 'unknown';
export interface BlockCheck {
  name: BlockCheckName;
  state: BlockCheckState;
  /** A machine word the page translates. */
  reason: string;
  facts?: Record<string, string | number>;
}

/** The fields a block digest covers, as a block head, a ledger proof or the platform's ledger name them. */
export interface BlockDigestFields {
  day: string;
  block_height: number;
  leaf_count: number;
  merkle_root: string;
  /** The previous block's digest (64 zeros for the first block); `prev_digest` in the digest's input. */
  anchor_sha256: string;
}

/**
 * DESIGN.md section 6: a block's digest is the SHA-256 of the canonical JSON of this object. The one statement of the
 * rule: blockDigest hashes it here, and the platform's ledger (which needs it synchronously) hashes the same object.
 */
export function blockDigestInput(head: BlockDigestFields): {
  v: 1;
  day: string;
  block_height: number;
  leaf_count: number;
  merkle_root: string;
  prev_digest: string;
} {
  return {
    v: 1,
    day: head.day,
    block_height: head.block_height,
    leaf_count: head.leaf_count,
    merkle_root: head.merkle_root,
    prev_digest: head.anchor_sha256,
  };
}

/** DESIGN.md section 6: digest = SHA-256 of the canonical JSON of {v:1, day, block_height, leaf_count, merkle_root, prev_digest}. */
export function blockDigest(head: BlockDigestFields): Promise<string> {
  return sha256Hex(canonicalBytes(blockDigestInput(head)));
}

/** SHA-256 of a ledger leaf's canonical JSON (DESIGN.md section 6), as bytes. */
export function leafHash(leaf: unknown): Promise<Uint8Array> {
  return sha256(canonicalBytes(leaf));
}

/**
 * Checks a block: every leaf hash recomputed from its leaf, in order; the Merkle root recomputed from them; the
 * digest recomputed from the block's fields; and the link to the block before it (its digest is this block's
 * anchor_sha256, its height one less; the first block's anchor is 64 zeros). `previous` is the block before (its
 * head is enough), 'none' when this one says it is the first, null when it could not be fetched.
 */
export async function verifyBlock(block: Block, previous: BlockHead | null | 'none'): Promise<BlockCheck[]> {
  const checks: BlockCheck[] = [];
  const hashes: Uint8Array[] = [];
  let leavesOk = Array.isArray(block.leaves) && block.leaves.length === block.leaf_count;
  for (const [position, entry] of (block.leaves ?? []).entries()) {
    const hash = await leafHash(entry.leaf);
    hashes.push(hash);
    if (entry.index !== position || hexEncode(hash) !== entry.leaf_sha256) leavesOk = false;
  }
  checks.push(
    leavesOk
      ? { name: 'leaves', state: 'ok', reason: 'leaves_match', facts: { leaf_count: hashes.length } }
      : { name: 'leaves', state: 'failed', reason: 'leaf_hash_differs' },
  );
  const root = await merkleRoot(hashes);
  const given = hexDecode(block.merkle_root);
  checks.push(
    given && bytesEqual(root, given)
      ? { name: 'root', state: 'ok', reason: 'root_matches' }
      : { name: 'root', state: 'failed', reason: 'root_differs' },
  );
  checks.push(await digestCheck(block));
  checks.push(linkCheck(block, previous));
  return checks;
}

/** The head's own consistency: its digest recomputed from its fields, and its link to the block before it. */
export async function verifyHead(
  head: BlockHead,
  previous: BlockHead | null | 'none',
): Promise<BlockCheck[]> {
  return [await digestCheck(head), linkCheck(head, previous)];
}

async function digestCheck(head: BlockHead): Promise<BlockCheck> {
  const digest = await blockDigest(head);
  return digest === head.digest
    ? { name: 'digest', state: 'ok', reason: 'digest_matches', facts: { digest } }
    : { name: 'digest', state: 'failed', reason: 'digest_differs' };
}

function linkCheck(head: BlockHead, previous: BlockHead | null | 'none'): BlockCheck {
  if (head.block_height === 1) {
    return head.anchor_sha256 === ZERO
      ? { name: 'link', state: 'ok', reason: 'first_block' }
      : { name: 'link', state: 'failed', reason: 'anchor_differs' };
  }
  if (previous === 'none') return { name: 'link', state: 'failed', reason: 'anchor_differs' };
  if (previous === null) return { name: 'link', state: 'unknown', reason: 'previous_block_unavailable' };
  return previous.digest === head.anchor_sha256 && previous.block_height === head.block_height - 1
    ? { name: 'link', state: 'ok', reason: 'links_previous_block', facts: { previous_day: previous.day } }
    : { name: 'link', state: 'failed', reason: 'anchor_differs' };
}

/** What block checks add up to. */
export function blockVerdict(checks: BlockCheck[]): 'ok' | 'incomplete' | 'failed' {
  if (checks.some((c) => c.state === 'failed')) return 'failed';
  return checks.every((c) => c.state === 'ok') ? 'ok' : 'incomplete';
}

/**
 * Checks that a ledger position proves `expected` (the leaf's kind, approval number and manifest hash): the leaf
 * hash recomputed from the leaf, the inclusion path (sides derived from index and leaf_count) up to merkle_root, and
 * the block digest recomputed from its fields. Returns null when it holds, else the reason.
 */
export async function verifyLedgerInfo(
  info: LedgerInfo,
  expected: { kind: string; approval_number?: string | null; manifest_sha256: string },
): Promise<string | null> {
  const proof = info.proof;
  if (proof.leaf['kind'] !== expected.kind) return 'leaf_kind';
  if (expected.approval_number !== undefined && proof.leaf['approval_number'] !== expected.approval_number)
    return 'leaf_not_this_approval';
  if (proof.leaf['manifest_sha256'] !== expected.manifest_sha256) return 'leaf_not_this_manifest';
  const leafSha256 = await leafHash(proof.leaf);
  if (hexEncode(leafSha256) !== proof.leaf_sha256) return 'leaf_hash_differs';
  const root = await rootFromProof({
    leafHash: leafSha256,
    index: proof.index,
    leafCount: proof.leaf_count,
    path: proof.path,
  });
  const expectedRoot = hexDecode(proof.merkle_root);
  if (!root || !expectedRoot || !bytesEqual(root, expectedRoot)) return 'proof_does_not_reach_root';
  if (info.day !== proof.day) return 'digest_differs';
  const digest = await blockDigest({
    day: proof.day,
    block_height: info.block_height,
    leaf_count: proof.leaf_count,
    merkle_root: proof.merkle_root,
    anchor_sha256: proof.anchor_sha256,
  });
  if (digest !== proof.digest || digest !== info.digest) return 'digest_differs';
  return null;
}
