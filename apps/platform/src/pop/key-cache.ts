import { createPublicKey, type KeyObject } from 'node:crypto';
import { CryptoError, importPublicKey } from '@ooh/crypto';

/*
 * A key cache miss is the price a large fleet pays on every batch: 300 000 devices sending in turn see each key once
 * per 300 000 batches, so a cache smaller than the fleet finds nothing (issue "Proof of play at national scale").
 * Measured under OpenSSL 3.0.19 (Node 20, 50 000 keys; docs/pop-ingestion.md "National scale"): createPublicKey of
 * SPKI DER costs about 320 us, more than twice the ES256 verification it is for (130 us over a 13 kB body), most of
 * it in OpenSSL's decoder framework; the same point given as a JWK costs about 95 us, plus about 35 us on its first
 * verification (the key is copied to OpenSSL's provider once). A key kept after use holds about 4.5 kB either way.
 */

/** DER of an SPKI holding an uncompressed P-256 point, up to the point's x: SEQUENCE { SEQUENCE { id-ecPublicKey,
 * prime256v1 }, BIT STRING { 00 04 x y } }. */
const P256_SPKI_HEAD = Buffer.from('3059301306072a8648ce3d020106082a8648ce3d03010703420004', 'hex');
const P256_SPKI_BYTES = P256_SPKI_HEAD.length + 64;
/** Padded base64 of those 91 bytes. */
const P256_SPKI_TEXT = 4 * Math.ceil(P256_SPKI_BYTES / 3);

/**
 * The KeyObject of a device or CMS key stored as base64 SPKI text (or PEM), as `importPublicKey` reads it, at
 * less than half its cost for the common form: an uncompressed P-256 point in canonical base64 is handed to
 * OpenSSL as a JWK (its x and y), which skips the DER decoders. Any other text (PEM, a compressed point, another
 * curve, non-canonical base64, garbage) goes to `importPublicKey`, so both accept and refuse the same texts; a point
 * that is not on the curve is refused by both. Throws CryptoError.
 */
export function importSpki(spki: string): KeyObject {
  if (spki.length === P256_SPKI_TEXT) {
    const der = Buffer.from(spki, 'base64');
    if (
      der.length === P256_SPKI_BYTES &&
      der.compare(P256_SPKI_HEAD, 0, P256_SPKI_HEAD.length, 0, P256_SPKI_HEAD.length) === 0 &&
      // Canonical text only, as base64Decode demands (Buffer.from ignores stray bits and characters).
      der.toString('base64') === spki
    ) {
      const x = P256_SPKI_HEAD.length;
      try {
        return createPublicKey({
          key: {
            kty: 'EC',
            crv: 'P-256',
            x: der.toString('base64url', x, x + 32),
            y: der.toString('base64url', x + 32, x + 64),
          },
          format: 'jwk',
        });
      } catch (cause) {
        throw new CryptoError('invalid_key', 'not a point of P-256', { cause });
      }
    }
  }
  return importPublicKey(spki);
}

/**
 * Imported public keys by their base64 SPKI text, least recently used dropped first. Parsing a key costs about as
 * much as verifying a signature with it, so a key is imported once while it is used; whether a key is still
 * ACCEPTED is never cached here (a revoked device or an expired rotation grace must be refused at once: the device
 * lookup reads the accepted keys' texts from the database for every batch), only the KeyObject.
 */
export class KeyCache {
  private readonly keys = new Map<string, KeyObject>();

  /** 10 000 keys hold about 45 MB (4.5 kB a key once used, measured with process.memoryUsage over 50 000 keys). */
  constructor(
    private readonly capacity = 10_000,
    private readonly importKey: (spki: string) => KeyObject = importSpki,
  ) {}

  /** The KeyObject of `spki`; throws CryptoError when the stored text is not a P-256 SPKI (nothing is kept). */
  get(spki: string): KeyObject {
    const cached = this.keys.get(spki);
    if (cached) {
      // Map keeps insertion order: re-inserting marks it as the most recently used.
      this.keys.delete(spki);
      this.keys.set(spki, cached);
      return cached;
    }
    const key = this.importKey(spki);
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
