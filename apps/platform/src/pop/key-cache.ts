import type { KeyObject } from 'node:crypto';
import { importPublicKey } from '@ooh/crypto';

/**
 * Imported public keys by their base64 SPKI text, least recently used dropped first. Parsing a key costs more
 * than verifying a signature with it, so a key is imported once; whether a key is still ACCEPTED is never
 * cached here (a revoked device or an expired rotation grace must be refused at once), only the KeyObject.
 */
export class KeyCache {
  private readonly keys = new Map<string, KeyObject>();

  constructor(private readonly capacity = 10_000) {}

  /** The KeyObject of `spki`; throws CryptoError when the stored text is not a P-256 SPKI. */
  get(spki: string): KeyObject {
    const cached = this.keys.get(spki);
    if (cached) {
      // Map keeps insertion order: re-inserting marks it as the most recently used.
      this.keys.delete(spki);
      this.keys.set(spki, cached);
      return cached;
    }
    const key = importPublicKey(spki);
    this.keys.set(spki, key);
    if (this.keys.size > this.capacity) {
      const oldest = this.keys.keys().next();
      if (!oldest.done) this.keys.delete(oldest.value);
    }
    return key;
  }

  get size(): number {
    return this.keys.size;
  }
}
