import { bytesEqual, concatBytes, hexDecode, sha256 } from './bytes.js';

/*
 * Merkle trees as DESIGN.md §4 defines them, the one set of verification rules: the tree shape of RFC 9162 §2.1
 * (split at the largest power of two below n; bottom-up, neighbours hashed pairwise and an unpaired last node carried
 * up unchanged), node = SHA-256(0x01 ‖ left ‖ right), the empty tree's root SHA-256 of nothing, leaf hashes taken as
 * given (no RFC 6962 0x00 prefix). A verifier derives every side from index and leaf_count: the sides a proof carries
 * are checked against them, never trusted. @ooh/crypto's synchronous verifyInclusion uses expectedSides and
 * proofSiblings from here.
 */

/** Side of the SIBLING hash relative to the running hash. */
export type ProofSide = 'left' | 'right';

export interface ProofStep {
  side: ProofSide;
  /** Lowercase hex of the 32-byte sibling hash. */
  hash: string;
}

const HASH_LENGTH = 32;
const NODE_PREFIX = Uint8Array.of(0x01);
const LOWER_HEX_32 = /^[0-9a-f]{64}$/;

/**
 * Sides of the siblings on the path from leaf `index` to the root of a tree of `leafCount` leaves, leaf level first
 * (RFC 9162 §2.1.3 order); null when index is not a leaf of that tree.
 */
export function expectedSides(index: number, leafCount: number): ProofSide[] | null {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(leafCount) || index < 0 || index >= leafCount)
    return null;
  const sides: ProofSide[] = [];
  let position = index;
  let count = leafCount;
  while (count > 1) {
    if (position % 2 === 1) sides.push('left');
    else if (position + 1 < count) sides.push('right');
    // else: the node is unpaired at this level and moves up without a sibling.
    position = Math.floor(position / 2);
    count = Math.ceil(count / 2);
  }
  return sides;
}

/**
 * The siblings of an inclusion proof as bytes, leaf level first, after checking the proof's form against the tree:
 * the leaf hash is 32 bytes, the path has exactly the steps `expectedSides` derives, each step names that side and a
 * lowercase 64-digit hex hash. Null for anything else (never throws).
 */
export function proofSiblings(args: {
  leafHash: Uint8Array;
  index: number;
  leafCount: number;
  path: readonly unknown[];
}): { side: ProofSide; hash: Uint8Array }[] | null {
  if (typeof args !== 'object' || args === null) return null;
  const { leafHash, index, leafCount, path } = args;
  if (!(leafHash instanceof Uint8Array) || leafHash.byteLength !== HASH_LENGTH) return null;
  const sides = expectedSides(index, leafCount);
  if (!sides || !Array.isArray(path) || path.length !== sides.length) return null;
  const siblings: { side: ProofSide; hash: Uint8Array }[] = [];
  for (let step = 0; step < sides.length; step += 1) {
    const given: unknown = path[step];
    if (typeof given !== 'object' || given === null) return null;
    const { side, hash } = given as { side?: unknown; hash?: unknown };
    if (side !== sides[step] || typeof hash !== 'string' || !LOWER_HEX_32.test(hash)) return null;
    siblings.push({ side: sides[step]!, hash: hexDecode(hash)! });
  }
  return siblings;
}

/** SHA-256(0x01 ‖ left ‖ right). */
export function hashChildren(left: Uint8Array, right: Uint8Array): Promise<Uint8Array> {
  return sha256(concatBytes(NODE_PREFIX, left, right));
}

/** The root an inclusion proof leads to, or null when the proof is malformed (see proofSiblings). */
export async function rootFromProof(args: {
  leafHash: Uint8Array;
  index: number;
  leafCount: number;
  path: readonly unknown[];
}): Promise<Uint8Array | null> {
  const siblings = proofSiblings(args);
  if (!siblings) return null;
  let running = args.leafHash;
  for (const { side, hash } of siblings) {
    running = side === 'left' ? await hashChildren(hash, running) : await hashChildren(running, hash);
  }
  return running;
}

/**
 * Whether `leafHash` is leaf `index` of a tree of `leafCount` leaves whose root is `root`. False for every malformed
 * or wrong proof; never throws.
 */
export async function verifyInclusion(args: {
  leafHash: Uint8Array;
  index: number;
  leafCount: number;
  path: readonly unknown[];
  root: Uint8Array;
}): Promise<boolean> {
  if (typeof args !== 'object' || args === null || !(args.root instanceof Uint8Array)) return false;
  const reached = await rootFromProof(args);
  return reached !== null && bytesEqual(reached, args.root);
}

/** A synchronous SHA-256 (e.g. node:crypto's), for a builder that folds millions of leaves; it must not keep its argument. */
export type SyncSha256 = (bytes: Uint8Array) => Uint8Array;

/**
 * The Merkle root over leaf hashes given one at a time, in order, holding only the roots of the complete subtrees
 * seen so far (at most log2(n) hashes): a day of a million batches is never held in memory at once. Add every leaf
 * (awaiting each add), then ask for the root. `sha256`: a synchronous SHA-256 to hash with instead of WebCrypto's
 * (the platform seals a day of a million batches with node:crypto's, where an await per node costs seconds); the
 * rule (shape, 0x01 prefix, empty root) stays here. With it, addSync and rootSync need no await.
 */
export class MerkleRootBuilder {
  /** Roots of complete subtrees, largest first, with their leaf counts (powers of two, strictly decreasing). */
  private readonly stack: { size: number; hash: Uint8Array }[] = [];
  private leaves = 0;
  private readonly syncSha256: SyncSha256 | null;
  /** 0x01 ‖ left ‖ right, reused by the synchronous path (one allocation per builder, not per node). */
  private readonly scratch = new Uint8Array(1 + 2 * HASH_LENGTH);

  constructor(options: { sha256?: SyncSha256 } = {}) {
    this.syncSha256 = options.sha256 ?? null;
    this.scratch[0] = NODE_PREFIX[0]!;
  }

  get count(): number {
    return this.leaves;
  }

  async add(leafHash: Uint8Array): Promise<void> {
    if (this.syncSha256) return this.addSync(leafHash);
    let node = this.leaf(leafHash);
    // Two complete subtrees of the same size are the two halves of the next one.
    for (let top = this.stack.at(-1); top && top.size === node.size; top = this.stack.at(-1)) {
      this.stack.pop();
      node = { size: 2 * node.size, hash: await hashChildren(top.hash, node.hash) };
    }
    this.stack.push(node);
    this.leaves += 1;
  }

  /** add, with the synchronous SHA-256 given to the constructor (throws without one). */
  addSync(leafHash: Uint8Array): void {
    const hash = this.requireSync();
    let node = this.leaf(leafHash);
    for (let top = this.stack.at(-1); top && top.size === node.size; top = this.stack.at(-1)) {
      this.stack.pop();
      node = { size: 2 * node.size, hash: this.node(hash, top.hash, node.hash) };
    }
    this.stack.push(node);
    this.leaves += 1;
  }

  /**
   * RFC 9162 §2.1.1: MTH(D[n]) = H(MTH(D[0:k]) ‖ MTH(D[k:n])) with k the largest power of two below n, so the
   * subtrees fold from the smallest (rightmost) up.
   */
  async root(): Promise<Uint8Array> {
    if (this.syncSha256) return this.rootSync();
    if (this.stack.length === 0) return sha256(new Uint8Array(0));
    let running = this.stack[this.stack.length - 1]!.hash;
    for (let i = this.stack.length - 2; i >= 0; i -= 1)
      running = await hashChildren(this.stack[i]!.hash, running);
    return running;
  }

  /** root, with the synchronous SHA-256 given to the constructor (throws without one). */
  rootSync(): Uint8Array {
    const hash = this.requireSync();
    if (this.stack.length === 0) return hash(new Uint8Array(0));
    let running = this.stack[this.stack.length - 1]!.hash;
    for (let i = this.stack.length - 2; i >= 0; i -= 1)
      running = this.node(hash, this.stack[i]!.hash, running);
    return running;
  }

  private node(hash: SyncSha256, left: Uint8Array, right: Uint8Array): Uint8Array {
    this.scratch.set(left, 1);
    this.scratch.set(right, 1 + HASH_LENGTH);
    return hash(this.scratch);
  }

  private leaf(leafHash: Uint8Array): { size: number; hash: Uint8Array } {
    if (!(leafHash instanceof Uint8Array) || leafHash.byteLength !== HASH_LENGTH) {
      throw new TypeError('a leaf hash is 32 bytes');
    }
    return { size: 1, hash: leafHash.slice() };
  }

  private requireSync(): SyncSha256 {
    if (!this.syncSha256) throw new TypeError('this builder hashes with WebCrypto: use add and root');
    return this.syncSha256;
  }
}

/** Merkle tree hash of leaf hashes taken as given; SHA-256('') for none. */
export async function merkleRoot(leafHashes: Iterable<Uint8Array>): Promise<Uint8Array> {
  const builder = new MerkleRootBuilder();
  for (const leaf of leafHashes) await builder.add(leaf);
  return builder.root();
}
