import { hash as nodeHash } from 'node:crypto';
import { type ProofSide, type ProofStep, proofSiblings, expectedSides as sidesOf } from '@ooh/verify';
import { CryptoError } from './errors.js';

// The verification rules (sides derived from index and leaf_count, a proof's form) live in @ooh/verify; this
// module builds trees and proofs (the platform's side) and checks proofs synchronously with Node's hashing.
//
// DESIGN.md §4 "Merkle trees": tree shape and node hashing of RFC 9162 §2.1 (split at the largest power of
// two below n; node = SHA-256(0x01 ‖ left ‖ right); empty tree = SHA-256 of nothing). Leaf hashes are taken
// as given, without the RFC 6962 0x00 prefix. A verifier derives every side from index and leaf_count.
//
// Bottom-up, the RFC 9162 shape is: at every level hash neighbours pairwise and carry an unpaired last
// node up unchanged. All functions here use that iterative form over one working buffer, so a million
// leaves cost a million hashes and no per-node arrays.

export type { ProofSide, ProofStep };

const HASH_LENGTH = 32;
const NODE_PREFIX = 0x01;
const EMPTY_TREE_ROOT = nodeHash('sha256', new Uint8Array(0), 'buffer');

function toUint8Array(buffer: Buffer): Uint8Array {
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

function requireHash(value: unknown, what: string): asserts value is Uint8Array {
  if (!(value instanceof Uint8Array))
    throw new CryptoError('invalid_argument', `${what} must be a Uint8Array`);
  if (value.byteLength !== HASH_LENGTH) {
    throw new CryptoError('invalid_length', `${what} must be ${HASH_LENGTH} bytes, got ${value.byteLength}`);
  }
}

/** SHA-256(0x01 ‖ left ‖ right) of two 32-byte hashes. */
export function hashChildren(left: Uint8Array, right: Uint8Array): Uint8Array {
  requireHash(left, 'left');
  requireHash(right, 'right');
  const input = Buffer.allocUnsafe(1 + 2 * HASH_LENGTH);
  input[0] = NODE_PREFIX;
  input.set(left, 1);
  input.set(right, 1 + HASH_LENGTH);
  return toUint8Array(nodeHash('sha256', input, 'buffer'));
}

/** All leaf hashes, validated, packed into one buffer of n * 32 bytes. */
function packLeaves(leafHashes: readonly Uint8Array[]): Buffer {
  if (!Array.isArray(leafHashes)) throw new CryptoError('invalid_argument', 'leafHashes must be an array');
  const packed = Buffer.allocUnsafe(leafHashes.length * HASH_LENGTH);
  for (let index = 0; index < leafHashes.length; index += 1) {
    const leaf = leafHashes[index];
    requireHash(leaf, `leafHashes[${index}]`);
    packed.set(leaf, index * HASH_LENGTH);
  }
  return packed;
}

/**
 * Replaces level (count hashes at the start of `level`) by its parent level in place and returns the
 * parent count. `scratch` is a 65-byte buffer holding 0x01 at offset 0.
 */
function reduceLevel(level: Buffer, count: number, scratch: Buffer): number {
  const pairs = count >>> 1;
  for (let pair = 0; pair < pairs; pair += 1) {
    level.copy(scratch, 1, 2 * pair * HASH_LENGTH, (2 * pair + 2) * HASH_LENGTH);
    level.set(nodeHash('sha256', scratch, 'buffer'), pair * HASH_LENGTH);
  }
  if (count % 2 === 1) {
    // RFC 9162 shape: the unpaired last node moves up a level unchanged.
    level.copy(level, pairs * HASH_LENGTH, (count - 1) * HASH_LENGTH, count * HASH_LENGTH);
    return pairs + 1;
  }
  return pairs;
}

function newScratch(): Buffer {
  const scratch = Buffer.allocUnsafe(1 + 2 * HASH_LENGTH);
  scratch[0] = NODE_PREFIX;
  return scratch;
}

/** Merkle tree hash (RFC 9162 §2.1.1 shape) of leaf hashes taken as given; SHA-256('') for none. */
export function merkleRoot(leafHashes: readonly Uint8Array[]): Uint8Array {
  const level = packLeaves(leafHashes);
  let count = leafHashes.length;
  if (count === 0) return toUint8Array(Buffer.from(EMPTY_TREE_ROOT));
  const scratch = newScratch();
  while (count > 1) count = reduceLevel(level, count, scratch);
  return toUint8Array(Buffer.from(level.subarray(0, HASH_LENGTH)));
}

function requireIndex(index: number, leafCount: number): void {
  if (!Number.isSafeInteger(leafCount) || leafCount < 0) {
    throw new CryptoError('invalid_argument', 'leafCount must be a non-negative safe integer');
  }
  if (!Number.isSafeInteger(index) || index < 0 || index >= leafCount) {
    throw new CryptoError('invalid_argument', `index must be an integer in [0, ${leafCount})`);
  }
}

/**
 * Sides of the siblings on the path from leaf `index` to the root of a tree of `leafCount` leaves,
 * leaf level first (RFC 9162 §2.1.3 order; @ooh/verify's expectedSides). Throws
 * CryptoError('invalid_argument') if index >= leafCount.
 */
export function expectedSides(index: number, leafCount: number): ProofSide[] {
  requireIndex(index, leafCount);
  return sidesOf(index, leafCount)!;
}

/** Inclusion proof (RFC 9162 §2.1.3.1 audit path, leaf level first) for leaf `index`. */
export function inclusionPath(leafHashes: readonly Uint8Array[], index: number): ProofStep[] {
  requireIndex(index, Array.isArray(leafHashes) ? leafHashes.length : -1);
  const level = packLeaves(leafHashes);
  const scratch = newScratch();
  const path: ProofStep[] = [];
  let position = index;
  let count = leafHashes.length;
  while (count > 1) {
    const sibling = position % 2 === 1 ? position - 1 : position + 1;
    if (sibling < count) {
      path.push({
        side: sibling < position ? 'left' : 'right',
        hash: level.toString('hex', sibling * HASH_LENGTH, (sibling + 1) * HASH_LENGTH),
      });
    }
    count = reduceLevel(level, count, scratch);
    position = Math.floor(position / 2);
  }
  return path;
}

/**
 * Checks that `leafHash` is leaf `index` of a tree of `leafCount` leaves with root `root`, synchronously
 * (@ooh/verify's verifyInclusion is the same check on WebCrypto). Returns false for every malformed or
 * wrong proof and never throws: the proof's form is @ooh/verify's proofSiblings (index inside the tree,
 * 32-byte hashes, a path whose length and sides are those derived from index and leafCount, lowercase hex
 * steps). The sides given are checked, never trusted (DESIGN.md §4).
 */
export function verifyInclusion(args: {
  leafHash: Uint8Array;
  index: number;
  leafCount: number;
  path: readonly ProofStep[];
  root: Uint8Array;
}): boolean {
  if (typeof args !== 'object' || args === null) return false;
  if (!(args.root instanceof Uint8Array) || args.root.byteLength !== HASH_LENGTH) return false;
  const siblings = proofSiblings(args);
  if (!siblings) return false;
  let running: Uint8Array = args.leafHash;
  for (const { side, hash } of siblings) {
    running = side === 'left' ? hashChildren(hash, running) : hashChildren(running, hash);
  }
  return Buffer.from(running.buffer, running.byteOffset, running.byteLength).equals(args.root);
}
