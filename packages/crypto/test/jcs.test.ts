import { VerificationError } from '@ooh/verify';
import { describe, expect, test } from 'vitest';
import { CryptoError, canonicalBytes, canonicalize } from '../src/index.js';

// The RFC 8785 rules and their vectors are tested once, in packages/verify/test/jcs.test.ts. Here: @ooh/crypto's
// canonicalize is that one, with this package's error type kept for the signers.

describe('canonicalize and canonicalBytes of @ooh/crypto', () => {
  test('are @ooh/verify canonical JSON', () => {
    expect(canonicalize({ b: [1, 'é', null, true], a: -0 })).toBe('{"a":0,"b":[1,"é",null,true]}');
    expect(Buffer.from(canonicalBytes({ s: 'é' })).toString('hex')).toBe('7b2273223a22c3a9227d');
    expect(canonicalize(1e30, { allowUnsafeIntegers: true })).toBe('1e+30');
  });

  test.each([
    ['NaN', Number.NaN],
    ['undefined member', { a: undefined }],
    ['lone surrogate', '\ud800'],
    ['integer 2^53', 2 ** 53],
    ['Date', new Date(0)],
  ])('refuse %s with CryptoError(not_canonicalizable), caused by the VerificationError', (_name, value) => {
    for (const run of [() => canonicalize(value), () => canonicalBytes(value)]) {
      let caught: unknown;
      try {
        run();
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(CryptoError);
      expect((caught as CryptoError).code).toBe('not_canonicalizable');
      expect((caught as CryptoError).cause).toBeInstanceOf(VerificationError);
    }
  });
});
