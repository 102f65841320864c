import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ProofSide, ProofStep } from '@ooh/verify';

/*
 * What the Merkle tests of @ooh/crypto (building trees and proofs) and of @ooh/verify (checking them) share: the
 * transparency-dev vectors, read in place (shared/vectors/README.md), and RFC 9162 written down literally as the
 * reference, hashed with node:crypto. Each test file asserts its own package's entry points against them.
 */

const MERKLE_VECTORS = fileURLToPath(new URL('../../../../../shared/vectors/merkle/', import.meta.url));

export const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');
export const fromHex = (text: string): Uint8Array => new Uint8Array(Buffer.from(text, 'hex'));

/** A leaf hash that differs by index: SHA-256("leaf <index>"). */
export const leaf = (index: number): Uint8Array =>
  new Uint8Array(createHash('sha256').update(`leaf ${index}`).digest());

// Reference: RFC 9162 §2.1.1 and §2.1.3.1 written down literally, recursive with array slices.

function largestPowerOfTwoBelow(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

export function referenceNode(left: Uint8Array, right: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(Uint8Array.of(0x01)).update(left).update(right).digest());
}

export function referenceRoot(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return new Uint8Array(createHash('sha256').digest());
  if (leaves.length === 1) return leaves[0]!;
  const k = largestPowerOfTwoBelow(leaves.length);
  return referenceNode(referenceRoot(leaves.slice(0, k)), referenceRoot(leaves.slice(k)));
}

export function referencePath(m: number, leaves: Uint8Array[]): ProofStep[] {
  if (leaves.length <= 1) return [];
  const k = largestPowerOfTwoBelow(leaves.length);
  if (m < k) {
    return [
      ...referencePath(m, leaves.slice(0, k)),
      { side: 'right', hash: hex(referenceRoot(leaves.slice(k))) },
    ];
  }
  return [
    ...referencePath(m - k, leaves.slice(k)),
    { side: 'left', hash: hex(referenceRoot(leaves.slice(0, k))) },
  ];
}

/** rfc6962-roots.json: the leaf hashes and the root of every size 0..8, as [size, root hex] pairs. */
export function rfc6962Roots(): { leaves: Uint8Array[]; roots: (readonly [number, string])[] } {
  const vector = JSON.parse(readFileSync(join(MERKLE_VECTORS, 'rfc6962-roots.json'), 'utf8')) as {
    leaf_hashes_hex: string[];
    roots_hex: string[];
  };
  return {
    leaves: vector.leaf_hashes_hex.map(fromHex),
    roots: vector.roots_hex.map((root, size) => [size, root] as const),
  };
}

export interface InclusionCase {
  /** The vector file, relative to testdata/inclusion. */
  name: string;
  index: number;
  leafCount: number;
  leafHash: Uint8Array;
  root: Uint8Array;
  /** The proof's hashes, hex; their sides are for the code under test to derive. */
  proof: string[];
  wantErr: boolean;
}

function listJson(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return listJson(path);
    return entry.name.endsWith('.json') ? [path] : [];
  });
}

/** transparency-dev/merkle testdata/inclusion: 98 cases, 6 of them valid proofs. */
export function inclusionCases(): InclusionCase[] {
  const folder = join(MERKLE_VECTORS, 'inclusion');
  return listJson(folder).map((file) => {
    const vector = JSON.parse(readFileSync(file, 'utf8')) as {
      leafIdx: number;
      treeSize: number;
      root: string;
      leafHash: string;
      proof: string[] | null;
      wantErr: boolean;
    };
    return {
      name: relative(folder, file),
      index: vector.leafIdx,
      leafCount: vector.treeSize,
      leafHash: new Uint8Array(Buffer.from(vector.leafHash, 'base64')),
      root: new Uint8Array(Buffer.from(vector.root, 'base64')),
      proof: (vector.proof ?? []).map((item) => Buffer.from(item, 'base64').toString('hex')),
      wantErr: vector.wantErr,
    };
  });
}

/** Every assignment of sides to `length` steps (at most 2^5 in the vectors). */
export function allSideAssignments(length: number): ProofSide[][] {
  if (length === 0) return [[]];
  return allSideAssignments(length - 1).flatMap((rest) => [
    ['left', ...rest] as ProofSide[],
    ['right', ...rest] as ProofSide[],
  ]);
}

/** The proof's hashes with the given sides, as a path. */
export const withSides = (proof: readonly string[], sides: readonly ProofSide[]): ProofStep[] =>
  proof.map((hash, step) => ({ side: sides[step]!, hash }));
