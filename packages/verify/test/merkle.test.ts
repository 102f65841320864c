import { describe, expect, test } from 'vitest';
import {
  allSideAssignments,
  hex,
  inclusionCases,
  leaf,
  referencePath,
  referenceRoot,
  rfc6962Roots,
  withSides,
} from '../../crypto/test/helpers/merkle.js';
import {
  expectedSides,
  MerkleRootBuilder,
  merkleRoot,
  proofSiblings,
  rootFromProof,
  verifyInclusion,
} from '../src/index.js';

// Third-party vectors (transparency-dev/merkle testdata) and the RFC 9162 reference (crypto's test helpers, shared
// with its tests), run against the WebCrypto implementation the browser uses.

describe('RFC 6962 roots for sizes 0..8 (rfc6962-roots.json)', () => {
  const { leaves, roots } = rfc6962Roots();

  test.each(roots)('size %i', async (size, root) => {
    expect(hex(await merkleRoot(leaves.slice(0, size)))).toBe(root);
  });
});

describe('inclusion vectors (transparency-dev/merkle testdata/inclusion)', () => {
  const cases = inclusionCases();

  test('the vector set is complete', () => {
    expect(cases.length).toBe(98);
    expect(cases.filter((item) => !item.wantErr).length).toBe(6);
  });

  test.each(cases)('$name', async ({ index, leafCount, leafHash, root, proof, wantErr }) => {
    if (!wantErr) {
      const sides = expectedSides(index, leafCount)!;
      expect(sides).toHaveLength(proof.length);
      expect(await verifyInclusion({ leafHash, index, leafCount, path: withSides(proof, sides), root })).toBe(
        true,
      );
      // The sides given are checked against index and leaf_count, never trusted.
      for (const other of allSideAssignments(proof.length)) {
        if (other.every((side, step) => side === sides[step])) continue;
        expect(await rootFromProof({ leafHash, index, leafCount, path: withSides(proof, other) })).toBeNull();
      }
      return;
    }
    for (const sides of allSideAssignments(proof.length)) {
      expect(await verifyInclusion({ leafHash, index, leafCount, path: withSides(proof, sides), root })).toBe(
        false,
      );
    }
  });
});

describe('against the RFC 9162 reference, every (index, size) with size <= 40', () => {
  const leaves = Array.from({ length: 40 }, (_, index) => leaf(index));

  test('the streamed root is the reference root for every size, and every reference proof verifies', async () => {
    const builder = new MerkleRootBuilder();
    expect(hex(await builder.root())).toBe(hex(referenceRoot([])));
    for (let size = 1; size <= leaves.length; size += 1) {
      await builder.add(leaves[size - 1]!);
      expect(builder.count).toBe(size);
      const root = referenceRoot(leaves.slice(0, size));
      expect(hex(await builder.root())).toBe(hex(root));
      for (let index = 0; index < size; index += 1) {
        const path = referencePath(index, leaves.slice(0, size));
        expect(path.map((s) => s.side)).toEqual(expectedSides(index, size));
        expect(await verifyInclusion({ leafHash: leaves[index]!, index, leafCount: size, path, root })).toBe(
          true,
        );
      }
    }
  });

  test('a flipped bit in a step, the leaf or the root, another index or a changed length is refused', async () => {
    const size = 13;
    const root = referenceRoot(leaves.slice(0, size));
    const path = referencePath(6, leaves.slice(0, size));
    const args = { leafHash: leaves[6]!, index: 6, leafCount: size, path, root };
    expect(await verifyInclusion(args)).toBe(true);
    const flippedStep = path.map((s, i) =>
      i === 1 ? { ...s, hash: `${s.hash.slice(0, 63)}${s.hash[63] === '0' ? '1' : '0'}` } : s,
    );
    expect(await verifyInclusion({ ...args, path: flippedStep })).toBe(false);
    const flippedLeaf = leaves[6]!.slice();
    flippedLeaf[0]! ^= 1;
    expect(await verifyInclusion({ ...args, leafHash: flippedLeaf })).toBe(false);
    const flippedRoot = root.slice();
    flippedRoot[31]! ^= 1;
    expect(await verifyInclusion({ ...args, root: flippedRoot })).toBe(false);
    expect(await verifyInclusion({ ...args, index: 7 })).toBe(false);
    expect(await verifyInclusion({ ...args, leafCount: 7 })).toBe(false);
    expect(await verifyInclusion({ ...args, path: path.slice(1) })).toBe(false);
  });

  test('malformed proofs are null, never a throw', () => {
    const base = {
      leafHash: leaves[0]!,
      index: 0,
      leafCount: 2,
      path: [{ side: 'right', hash: hex(leaves[1]!) }],
    };
    expect(proofSiblings(base)).not.toBeNull();
    for (const bad of [
      { ...base, index: 2 },
      { ...base, index: -1 },
      { ...base, index: 0.5 },
      { ...base, leafCount: Number.NaN },
      { ...base, leafHash: new Uint8Array(31) },
      { ...base, path: [{ side: 'right', hash: hex(leaves[1]!).toUpperCase() }] },
      { ...base, path: [{ side: 'right', hash: 'ab' }] },
      { ...base, path: [null] },
      { ...base, path: 'x' as unknown as unknown[] },
    ]) {
      expect(proofSiblings(bad)).toBeNull();
    }
    expect(expectedSides(3, 3)).toBeNull();
  });
});
