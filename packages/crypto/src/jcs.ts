import {
  type CanonicalizeOptions,
  canonicalBytes as verifyCanonicalBytes,
  canonicalize as verifyCanonicalize,
  isVerificationError,
} from '@ooh/verify';
import { CryptoError } from './errors.js';

// RFC 8785 (JSON Canonicalization Scheme): the rules live once, in @ooh/verify (DESIGN.md §4: "Canonical JSON:
// RFC 8785. Integers beyond 2^53 never appear in signed bodies."). Here they keep this package's error type, so
// signers catch a CryptoError('not_canonicalizable') as before; its cause is @ooh/verify's VerificationError.

export type { CanonicalizeOptions };

function asCryptoError<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (isVerificationError(error, 'not_canonicalizable'))
      throw new CryptoError('not_canonicalizable', error.message, { cause: error });
    throw error;
  }
}

/**
 * RFC 8785 canonical JSON text of a JSON value (@ooh/verify's canonicalize). Throws
 * CryptoError('not_canonicalizable') on NaN, ±Infinity, undefined, functions, symbols, bigint, lone
 * surrogates, cycles, array holes, non-plain objects and, unless `allowUnsafeIntegers`, integers beyond
 * 2^53 - 1.
 */
export function canonicalize(value: unknown, options: CanonicalizeOptions = {}): string {
  return asCryptoError(() => verifyCanonicalize(value, options));
}

/** UTF-8 bytes of canonicalize(value). */
export function canonicalBytes(value: unknown, options: CanonicalizeOptions = {}): Uint8Array {
  return asCryptoError(() => verifyCanonicalBytes(value, options));
}
