import { createHash } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { hex, leaf } from '../../crypto/test/helpers/merkle.js';
import { MerkleRootBuilder } from '../src/index.js';

// The builder with a synchronous SHA-256 (the platform seals a day of a million batches with node:crypto's) must
// build the very tree the WebCrypto builder builds: the rule is the package's, only the hash call differs.
const nodeSha256 = (bytes: Uint8Array) => new Uint8Array(createHash('sha256').update(bytes).digest());

describe('MerkleRootBuilder with a synchronous SHA-256', () => {
  test('addSync and rootSync give the WebCrypto root for every size up to 70, the empty tree included', async () => {
    const webcrypto = new MerkleRootBuilder();
    const sync = new MerkleRootBuilder({ sha256: nodeSha256 });
    expect(hex(sync.rootSync())).toBe(hex(await webcrypto.root()));
    for (let size = 1; size <= 70; size += 1) {
      await webcrypto.add(leaf(size));
      sync.addSync(leaf(size));
      expect(sync.count).toBe(size);
      expect(hex(sync.rootSync())).toBe(hex(await webcrypto.root()));
      // add and root on a synchronous builder hash with the same function.
      expect(hex(await sync.root())).toBe(hex(sync.rootSync()));
    }
  });

  test('a leaf that is not 32 bytes is refused; the sync calls need the sync hash', () => {
    const sync = new MerkleRootBuilder({ sha256: nodeSha256 });
    expect(() => sync.addSync(new Uint8Array(31))).toThrow(TypeError);
    expect(sync.count).toBe(0);
    expect(() => new MerkleRootBuilder().addSync(leaf(1))).toThrow(/WebCrypto/);
    expect(() => new MerkleRootBuilder().rootSync()).toThrow(/WebCrypto/);
  });
});
