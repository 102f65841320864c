import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import {
  expectedSides,
  MerkleRootBuilder,
  merkleRoot,
  type ProofSide,
  type ProofStep,
  proofSiblings,
  rootFromProof,
  verifyInclusion,
} from '../src/index.js';

// Third-party vectors (transparency-dev/merkle testdata), read in place (shared/vectors/README.md), run against the
// WebCrypto implementation the browser uses.
const MERKLE_VECTORS = fileURLToPath(new URL('../../../../shared/vectors/merkle/', import.meta.url));

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');
const fromHex = (text: string): Uint8Array => new Uint8Array(Buffer.from(text, 'hex'));
const leaf = (index: number) => new Uint8Array(createHash('sha256').update(`leaf ${index}`).digest());

// RFC 9162 §2.1.1 and §2.1.3.1 written down literally (recursive, with slices), with Node's hashing: the reference.
function largestPowerOfTwoBelow(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}
const referenceNode = (left: Uint8Array, right: Uint8Array) =>
  new Uint8Array(createHash('sha256').update(Uint8Array.of(0x01)).update(left).update(right).digest());
function referenceRoot(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return new Uint8Array(createHash('sha256').digest());
  if (leaves.length === 1) return leaves[0]!;
  const k = largestPowerOfTwoBelow(leaves.length);
  return referenceNode(referenceRoot(leaves.slice(0, k)), referenceRoot(leaves.slice(k)));
}
function referencePath(m: number, leaves: Uint8Array[]): ProofStep[] {
  if (leaves.length <= 1) return [];
  const k = largestPowerOfTwoBelow(leaves.length);
  if (m < k)
    return [
      ...referencePath(m, leaves.slice(0, k)),
      { side: 'right', hash: hex(referenceRoot(leaves.slice(k))) },
    ];
  return [
    ...referencePath(m - k, leaves.slice(k)),
    { side: 'left', hash: hex(referenceRoot(leaves.slice(0, k))) },
  ];
}

describe('RFC 6962 roots for sizes 0..8 (rfc6962-roots.json)', () => {
  const vector = JSON.parse(readFileSync(join(MERKLE_VECTORS, 'rfc6962-roots.json'), 'utf8')) as {
    leaf_hashes_hex: string[];
    roots_hex: string[];
  };
  const leaves = vector.leaf_hashes_hex.map(fromHex);

  test.each(vector.roots_hex.map((root, size) => [size, root] as const))('size %i', async (size, root) => {
    expect(hex(await merkleRoot(leaves.slice(0, size)))).toBe(root);
  });
});

function listJson(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return listJson(path);
    return entry.name.endsWith('.json') ? [path] : [];
  });
}

function allSideAssignments(length: number): ProofSide[][] {
  if (length === 0) return [[]];
  return allSideAssignments(length - 1).flatMap((rest) => [
    ['left', ...rest] as ProofSide[],
    ['right', ...rest] as ProofSide[],
  ]);
}

describe('inclusion vectors (transparency-dev/merkle testdata/inclusion)', () => {
  const folder = join(MERKLE_VECTORS, 'inclusion');
  const cases = listJson(folder).map((file) => ({
    name: relative(folder, file),
    vector: JSON.parse(readFileSync(file, 'utf8')) as {
      leafIdx: number;
      treeSize: number;
      root: string;
      leafHash: string;
      proof: string[] | null;
      wantErr: boolean;
    },
  }));

  test('the vector set is complete', () => {
    expect(cases.length).toBe(98);
    expect(cases.filter((item) => !item.vector.wantErr).length).toBe(6);
  });

  test.each(cases)('$name', async ({ vector }) => {
    const leafHash = new Uint8Array(Buffer.from(vector.leafHash, 'base64'));
    const root = new Uint8Array(Buffer.from(vector.root, 'base64'));
    const proof = (vector.proof ?? []).map((item) => Buffer.from(item, 'base64').toString('hex'));
    const { leafIdx: index, treeSize: leafCount } = vector;
    if (!vector.wantErr) {
      const sides = expectedSides(index, leafCount)!;
      expect(sides).toHaveLength(proof.length);
      const path = proof.map((hash, step) => ({ side: sides[step]!, hash }));
      expect(await verifyInclusion({ leafHash, index, leafCount, path, root })).toBe(true);
      // The sides given are checked against index and leaf_count, never trusted.
      for (const other of allSideAssignments(proof.length)) {
        if (other.every((side, step) => side === sides[step])) continue;
        const wrong = proof.map((hash, step) => ({ side: other[step]!, hash }));
        expect(await rootFromProof({ leafHash, index, leafCount, path: wrong })).toBeNull();
      }
      return;
    }
    for (const sides of allSideAssignments(proof.length)) {
      const path = proof.map((hash, step) => ({ side: sides[step]!, hash }));
      expect(await verifyInclusion({ leafHash, index, leafCount, path, root })).toBe(false);
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
