import { concatBytes, hexDecode, sha256 } from './bytes.js';

/**
 * Merkle inclusion proofs as in DESIGN.md section 4: RFC 9162 tree shape, node = SHA-256(0x01 ‖ left ‖ right), leaf
 * hashes taken as given. Every side is derived from index and leaf_count; the sides a proof carries are checked
 * against them, never trusted.
 */
export type Side = 'left' | 'right';

/** Sides of the siblings from the leaf up; null when index is not inside the tree. */
export function expectedSides(index: number, leafCount: number): Side[] | null {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(leafCount) || index < 0 || index >= leafCount)
    return null;
  const sides: Side[] = [];
  let position = index;
  let count = leafCount;
  while (count > 1) {
    if (position % 2 === 1) sides.push('left');
    else if (position + 1 < count) sides.push('right');
    position = Math.floor(position / 2);
    count = Math.ceil(count / 2);
  }
  return sides;
}

const NODE_PREFIX = Uint8Array.of(0x01);

/** The root a proof leads to, or null when the proof is malformed or its sides disagree with index and leafCount. */
export async function rootFromProof(args: {
  leafHash: Uint8Array;
  index: number;
  leafCount: number;
  path: readonly { side: unknown; hash: unknown }[];
}): Promise<Uint8Array | null> {
  const sides = expectedSides(args.index, args.leafCount);
  if (
    !sides ||
    !Array.isArray(args.path) ||
    args.path.length !== sides.length ||
    args.leafHash.length !== 32
  ) {
    return null;
  }
  let running = args.leafHash;
  for (let step = 0; step < sides.length; step += 1) {
    const given = args.path[step]!;
    const sibling = typeof given.hash === 'string' ? hexDecode(given.hash) : null;
    if (given.side !== sides[step] || !sibling || sibling.length !== 32) return null;
    running = await sha256(
      sides[step] === 'left'
        ? concatBytes(NODE_PREFIX, sibling, running)
        : concatBytes(NODE_PREFIX, running, sibling),
    );
  }
  return running;
}
