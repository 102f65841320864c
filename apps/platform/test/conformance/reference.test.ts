import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { canonical, inclusionPath, jsonFiles, merkleRoot, rootFromInclusion, VECTORS } from './reference.js';

describe("the conformance tests' reference implementations agree with the shared vectors", () => {
  test('RFC 8785: every jcs vector', () => {
    const names = readdirSync(`${VECTORS}/jcs/input`);
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) {
      const input = JSON.parse(readFileSync(`${VECTORS}/jcs/input/${name}`, 'utf8'));
      expect(canonical(input), name).toBe(readFileSync(`${VECTORS}/jcs/output/${name}`, 'utf8'));
    }
  });

  test('RFC 9162: roots of sizes 0 to 8; every inclusion vector; own paths lead to the roots', () => {
    const roots = JSON.parse(readFileSync(`${VECTORS}/merkle/rfc6962-roots.json`, 'utf8')) as {
      leaf_hashes_hex: string[];
      roots_hex: string[];
    };
    const leaves = roots.leaf_hashes_hex.map((h) => Buffer.from(h, 'hex'));
    roots.roots_hex.forEach((root, size) => {
      expect(merkleRoot(leaves.slice(0, size)).toString('hex'), `size ${size}`).toBe(root);
      for (let m = 0; m < size; m += 1) {
        const own = inclusionPath(leaves.slice(0, size), m);
        const walked = rootFromInclusion(
          m,
          size,
          leaves[m]!,
          own.map((s) => Buffer.from(s.hash, 'hex')),
        );
        expect(walked?.root.toString('hex'), `size ${size} index ${m}`).toBe(root);
        expect(walked?.sides).toEqual(own.map((s) => s.side));
      }
    });
    const files = jsonFiles(`${VECTORS}/merkle/inclusion`);
    expect(files.length).toBeGreaterThan(50);
    for (const file of files) {
      const v = JSON.parse(readFileSync(file, 'utf8')) as {
        leafIdx: number;
        treeSize: number;
        root: string | null;
        leafHash: string | null;
        proof: string[] | null;
        wantErr: boolean;
      };
      const leaf = Buffer.from(v.leafHash ?? '', 'base64');
      const result = rootFromInclusion(
        v.leafIdx,
        v.treeSize,
        leaf,
        (v.proof ?? []).map((p) => Buffer.from(p, 'base64')),
      );
      const ok =
        result !== null && leaf.length === 32 && result.root.equals(Buffer.from(v.root ?? '', 'base64'));
      expect(ok, file).toBe(!v.wantErr);
    }
  });
});
