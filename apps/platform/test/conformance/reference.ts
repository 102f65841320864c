import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * Reference implementations for the conformance tests, written from the RFCs (RFC 8785 canonical JSON, the RFC 9162
 * tree, its inclusion paths) and never from the platform's own code, so that a test using them checks the platform
 * against the standard rather than against itself. reference.test.ts checks them against the shared vectors, read in
 * place (shared/vectors/README.md).
 */

/** The shared Merkle and RFC 8785 vectors: ../shared/vectors beside the repository. */
export const VECTORS = fileURLToPath(new URL('../../../../../shared/vectors', import.meta.url));

export const sha256 = (bytes: Uint8Array | string): Buffer => createHash('sha256').update(bytes).digest();
export const sha256Hex = (bytes: Uint8Array | string): string => sha256(bytes).toString('hex');

/** RFC 8785 canonical JSON (keys sorted by UTF-16 code units; ECMAScript number and string serialisation). */
export function canonical(value: unknown): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'number' || typeof value === 'string')
    return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const object = value as Record<string, unknown>;
  return `{${Object.keys(object)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonical(object[key])}`)
    .join(',')}}`;
}

export const node = (left: Uint8Array, right: Uint8Array): Buffer =>
  sha256(Buffer.concat([Buffer.from([1]), left, right]));

/** Largest power of two smaller than n (n >= 2). */
export function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** RFC 9162 section 2.1.1 Merkle Tree Hash over leaf hashes taken as given (DESIGN.md section 4). */
export function merkleRoot(leaves: readonly Uint8Array[]): Buffer {
  if (leaves.length === 0) return sha256(new Uint8Array(0));
  if (leaves.length === 1) return Buffer.from(leaves[0]!);
  const k = split(leaves.length);
  return node(merkleRoot(leaves.slice(0, k)), merkleRoot(leaves.slice(k)));
}

/** RFC 9162 section 2.1.3.1 PATH(m, D[n]), leaf level first, with the side of each sibling. */
export function inclusionPath(
  leaves: readonly Uint8Array[],
  m: number,
): { side: 'left' | 'right'; hash: string }[] {
  if (leaves.length <= 1) return [];
  const k = split(leaves.length);
  return m < k
    ? [
        ...inclusionPath(leaves.slice(0, k), m),
        { side: 'right', hash: merkleRoot(leaves.slice(k)).toString('hex') },
      ]
    : [
        ...inclusionPath(leaves.slice(k), m - k),
        { side: 'left', hash: merkleRoot(leaves.slice(0, k)).toString('hex') },
      ];
}

/** RFC 9162 section 2.1.3.2: the root an inclusion path leads to, or null; also the side of each step. */
export function rootFromInclusion(
  index: number,
  size: number,
  leaf: Uint8Array,
  proof: readonly Uint8Array[],
): { root: Buffer; sides: ('left' | 'right')[] } | null {
  if (index >= size || index < 0) return null;
  let fn = index;
  let sn = size - 1;
  let r: Buffer = Buffer.from(leaf);
  const sides: ('left' | 'right')[] = [];
  for (const p of proof) {
    if (p.length !== 32 || sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = node(p, r);
      sides.push('left');
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = node(r, p);
      sides.push('right');
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? { root: r, sides } : null;
}

export function jsonFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? jsonFiles(path.join(dir, entry.name))
      : entry.name.endsWith('.json')
        ? [path.join(dir, entry.name)]
        : [],
  );
}
