import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import {
  CryptoError,
  expectedSides,
  hashChildren,
  inclusionPath,
  merkleRoot,
  type ProofSide,
  type ProofStep,
  verifyInclusion,
} from '../src/index.js';
import {
  allSideAssignments,
  fromHex,
  hex,
  inclusionCases,
  leaf,
  referenceNode,
  referencePath,
  referenceRoot,
  rfc6962Roots,
  withSides,
} from './helpers/merkle.js';

// Third-party vectors (transparency-dev/merkle testdata) and the RFC 9162 reference: helpers/merkle.ts, shared
// with @ooh/verify's tests.

describe('RFC 6962 roots for sizes 0..8 (rfc6962-roots.json)', () => {
  const { leaves, roots } = rfc6962Roots();

  test.each(roots)('size %i', (size, root) => {
    expect(hex(merkleRoot(leaves.slice(0, size)))).toBe(root);
    expect(hex(referenceRoot(leaves.slice(0, size)))).toBe(root);
  });
});

describe('inclusion vectors (transparency-dev/merkle testdata/inclusion)', () => {
  const cases = inclusionCases();

  test('the vector set is complete', () => {
    expect(cases.length).toBe(98);
    expect(cases.filter((item) => !item.wantErr).length).toBe(6);
  });

  test.each(cases)('$name', ({ index, leafCount, leafHash, root, proof, wantErr }) => {
    if (!wantErr) {
      const sides = expectedSides(index, leafCount);
      expect(sides).toHaveLength(proof.length);
      expect(verifyInclusion({ leafHash, index, leafCount, path: withSides(proof, sides), root })).toBe(true);
      // The same proof with any other sides is refused.
      for (const other of allSideAssignments(proof.length)) {
        if (other.every((side, step) => side === sides[step])) continue;
        expect(verifyInclusion({ leafHash, index, leafCount, path: withSides(proof, other), root })).toBe(
          false,
        );
      }
      return;
    }
    // A broken case fails whatever sides are claimed for its steps.
    for (const sides of allSideAssignments(proof.length)) {
      expect(verifyInclusion({ leafHash, index, leafCount, path: withSides(proof, sides), root })).toBe(
        false,
      );
    }
  });
});

describe('exhaustive check against the RFC 9162 reference, every (index, size) with size <= 64', () => {
  const leaves = Array.from({ length: 64 }, (_, index) => leaf(index));

  test('roots, paths and sides agree with the reference; every proof verifies', () => {
    for (let size = 1; size <= 64; size += 1) {
      const tree = leaves.slice(0, size);
      const root = merkleRoot(tree);
      expect(hex(root)).toBe(hex(referenceRoot(tree)));
      for (let index = 0; index < size; index += 1) {
        const path = inclusionPath(tree, index);
        expect(path).toEqual(referencePath(index, tree));
        expect(expectedSides(index, size)).toEqual(path.map((step) => step.side));
        expect(verifyInclusion({ leafHash: tree[index]!, index, leafCount: size, path, root })).toBe(true);
      }
    }
  });

  test('a flipped bit in any step, leaf or root, a swapped side, another index or a changed length is refused', () => {
    // Failures are collected and asserted once: ~200 000 verifications, too many for one expect each.
    const accepted: string[] = [];
    for (let size = 1; size <= 64; size += 1) {
      const tree = leaves.slice(0, size);
      const root = merkleRoot(tree);
      for (let index = 0; index < size; index += 1) {
        const leafHash = tree[index]!;
        const path = inclusionPath(tree, index);
        const refuse = (
          what: string,
          changed: { leafHash?: Uint8Array; path?: ProofStep[]; root?: Uint8Array; index?: number },
        ): void => {
          const ok = verifyInclusion({
            leafHash: changed.leafHash ?? leafHash,
            index: changed.index ?? index,
            leafCount: size,
            path: changed.path ?? path,
            root: changed.root ?? root,
          });
          if (ok) accepted.push(`size ${size} index ${index}: ${what}`);
        };
        // One bit in each 32-bit stripe, at an offset that rotates with (size, index, step), so over
        // the run every one of the 256 bit positions is flipped in steps at every depth.
        const offset = (size * 31 + index * 7) % 32;
        for (let step = 0; step < path.length; step += 1) {
          const original = path[step]!;
          for (let stripe = 0; stripe < 8; stripe += 1) {
            const bit = stripe * 32 + ((offset + step * 5) % 32);
            const bytes = fromHex(original.hash);
            bytes[bit >> 3]! ^= 1 << (bit & 7);
            const changed = path.map((item, at) =>
              at === step ? { side: item.side, hash: hex(bytes) } : item,
            );
            refuse(`bit ${bit} of step ${step}`, { path: changed });
          }
          const swapped: ProofSide = original.side === 'left' ? 'right' : 'left';
          refuse(`side of step ${step}`, {
            path: path.map((item, at) => (at === step ? { side: swapped, hash: item.hash } : item)),
          });
        }
        for (let stripe = 0; stripe < 8; stripe += 1) {
          const bit = stripe * 32 + offset;
          const flippedLeaf = Uint8Array.from(leafHash);
          flippedLeaf[bit >> 3]! ^= 1 << (bit & 7);
          refuse(`bit ${bit} of the leaf`, { leafHash: flippedLeaf });
          const flippedRoot = Uint8Array.from(root);
          flippedRoot[bit >> 3]! ^= 1 << (bit & 7);
          refuse(`bit ${bit} of the root`, { root: flippedRoot });
        }
        // The path proves this index only.
        for (let other = 0; other < size; other += 1) {
          if (other !== index) refuse(`index ${other}`, { index: other });
        }
        if (path.length > 0) refuse('last step dropped', { path: path.slice(0, -1) });
        refuse('step added', { path: [...path, { side: 'right', hash: hex(leafHash) }] });
      }
    }
    expect(accepted).toEqual([]);
  });
});

describe('merkleRoot on larger trees', () => {
  test('matches the reference for 10 007 random leaves, with paths at the edges', () => {
    const leaves = Array.from({ length: 10_007 }, () => new Uint8Array(randomBytes(32)));
    const root = merkleRoot(leaves);
    expect(hex(root)).toBe(hex(referenceRoot(leaves)));
    for (const index of [0, 1, 4095, 8191, 8192, 10_005, 10_006]) {
      const path = inclusionPath(leaves, index);
      expect(path).toEqual(referencePath(index, leaves));
      expect(verifyInclusion({ leafHash: leaves[index]!, index, leafCount: leaves.length, path, root })).toBe(
        true,
      );
    }
  });

  test('does not modify its input', () => {
    const leaves = Array.from({ length: 9 }, (_, index) => leaf(index));
    const copies = leaves.map((item) => hex(item));
    merkleRoot(leaves);
    inclusionPath(leaves, 4);
    expect(leaves.map((item) => hex(item))).toEqual(copies);
  });
});

describe('edges and misuse', () => {
  const leaves = Array.from({ length: 5 }, (_, index) => leaf(index));
  const root = merkleRoot(leaves);
  const path = inclusionPath(leaves, 2);
  const base = { leafHash: leaves[2]!, index: 2, leafCount: 5, path, root };

  test('empty tree, single leaf, node hashing', () => {
    expect(hex(merkleRoot([]))).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hex(merkleRoot([leaves[0]!]))).toBe(hex(leaves[0]!));
    expect(inclusionPath([leaves[0]!], 0)).toEqual([]);
    expect(
      verifyInclusion({ leafHash: leaves[0]!, index: 0, leafCount: 1, path: [], root: leaves[0]! }),
    ).toBe(true);
    expect(hex(hashChildren(leaves[0]!, leaves[1]!))).toBe(hex(referenceNode(leaves[0]!, leaves[1]!)));
    expect(hex(merkleRoot(leaves.slice(0, 2)))).toBe(hex(hashChildren(leaves[0]!, leaves[1]!)));
  });

  test('derived sides follow index and size', () => {
    expect(expectedSides(0, 1)).toEqual([]);
    expect(expectedSides(0, 2)).toEqual(['right']);
    expect(expectedSides(1, 2)).toEqual(['left']);
    expect(expectedSides(4, 5)).toEqual(['left']);
    expect(expectedSides(2, 3)).toEqual(['left']);
    expect(expectedSides(5, 8)).toEqual(['left', 'right', 'left']);
  });

  test('expectedSides and inclusionPath throw invalid_argument for an index outside the tree', () => {
    for (const [index, size] of [
      [5, 5],
      [-1, 5],
      [0, 0],
      [1.5, 5],
      [Number.NaN, 5],
      [2 ** 64, 2 ** 64 + 1],
    ] as const) {
      expect(() => expectedSides(index, size)).toThrow(CryptoError);
    }
    expect(() => inclusionPath(leaves, 5)).toThrowError(
      expect.objectContaining({ code: 'invalid_argument' }),
    );
    expect(() => inclusionPath([], 0)).toThrowError(expect.objectContaining({ code: 'invalid_argument' }));
  });

  test('leaf hashes must be 32 bytes', () => {
    expect(() => merkleRoot([new Uint8Array(31)])).toThrowError(
      expect.objectContaining({ code: 'invalid_length' }),
    );
    expect(() => hashChildren(new Uint8Array(32), new Uint8Array(33))).toThrowError(
      expect.objectContaining({ code: 'invalid_length' }),
    );
    expect(() => merkleRoot(['ab' as unknown as Uint8Array])).toThrowError(
      expect.objectContaining({ code: 'invalid_argument' }),
    );
  });

  test('verifyInclusion refuses every malformed proof with false', () => {
    expect(verifyInclusion(base)).toBe(true);
    const step0 = path[0]!;
    const malformed: unknown[] = [
      { ...base, index: 5 },
      { ...base, index: -1 },
      { ...base, index: 2.5 },
      { ...base, leafCount: 2 ** 53 },
      { ...base, index: '2' },
      { ...base, leafHash: base.leafHash.subarray(0, 31) },
      { ...base, root: new Uint8Array(0) },
      { ...base, root: hex(root) },
      { ...base, path: 'nope' },
      { ...base, path: [{ ...step0, hash: step0.hash.toUpperCase() }, ...path.slice(1)] },
      { ...base, path: [{ ...step0, hash: step0.hash.slice(2) }, ...path.slice(1)] },
      { ...base, path: [{ ...step0, hash: `${step0.hash}00` }, ...path.slice(1)] },
      { ...base, path: [{ ...step0, hash: `0x${step0.hash.slice(2)}` }, ...path.slice(1)] },
      { ...base, path: [{ ...step0, side: 'LEFT' }, ...path.slice(1)] },
      { ...base, path: [null, ...path.slice(1)] },
      { ...base, path: [step0.hash, ...path.slice(1)] },
      null,
    ];
    for (const args of malformed) {
      expect(verifyInclusion(args as Parameters<typeof verifyInclusion>[0])).toBe(false);
    }
  });
});
