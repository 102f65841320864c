import { hash as nodeHash } from 'node:crypto';

const HASH_LENGTH = 32;
/** Enough levels for 2^64 leaves. */
const MAX_LEVELS = 64;

/**
 * Merkle root (RFC 9162 section 2.1 shape, node = SHA-256(0x01 || left || right), empty = SHA-256('')) of leaf
 * hashes given one at a time, in constant memory: the roots of the complete subtrees seen so far are kept, largest
 * first, and merged as equal sizes meet; at the end they fold from the right, which is exactly the tree of
 * RFC 9162 (split at the largest power of two below n). The same root as @ooh/crypto merkleRoot (a test proves it),
 * computed while the leaves stream in rather than after they are all held.
 */
export class StreamingMerkleRoot {
  /** Subtree roots, bottom of the stack first. */
  private readonly roots = Buffer.alloc(MAX_LEVELS * HASH_LENGTH);
  /** Leaf count of each subtree on the stack (strictly decreasing powers of two). */
  private readonly sizes = new Float64Array(MAX_LEVELS);
  private depth = 0;
  private leaves = 0;
  private readonly scratch = Buffer.alloc(1 + 2 * HASH_LENGTH);

  constructor() {
    this.scratch[0] = 0x01;
  }

  get count(): number {
    return this.leaves;
  }

  /** Adds the next leaf hash (32 bytes, copied). */
  push(leafHash: Uint8Array): void {
    if (leafHash.length !== HASH_LENGTH) throw new RangeError('a leaf hash is 32 bytes');
    let size = 1;
    let node: Uint8Array = leafHash;
    while (this.depth > 0 && this.sizes[this.depth - 1] === size) {
      const top = (this.depth - 1) * HASH_LENGTH;
      this.roots.copy(this.scratch, 1, top, top + HASH_LENGTH);
      this.scratch.set(node, 1 + HASH_LENGTH);
      node = nodeHash('sha256', this.scratch, 'buffer');
      size *= 2;
      this.depth -= 1;
    }
    this.roots.set(node, this.depth * HASH_LENGTH);
    this.sizes[this.depth] = size;
    this.depth += 1;
    this.leaves += 1;
  }

  /** The root over every leaf pushed so far. */
  root(): Buffer {
    if (this.depth === 0) return nodeHash('sha256', Buffer.alloc(0), 'buffer');
    const top = (this.depth - 1) * HASH_LENGTH;
    let acc = Buffer.from(this.roots.subarray(top, top + HASH_LENGTH));
    for (let level = this.depth - 2; level >= 0; level -= 1) {
      this.roots.copy(this.scratch, 1, level * HASH_LENGTH, (level + 1) * HASH_LENGTH);
      acc.copy(this.scratch, 1 + HASH_LENGTH);
      acc = nodeHash('sha256', this.scratch, 'buffer');
    }
    return acc;
  }
}
