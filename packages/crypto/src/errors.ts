/**
 * Typed errors of @ooh/crypto. Callers branch on `code`, never on message text (STYLE.md §3).
 * Misuse and malformed input throw a CryptoError; a well-formed signature or proof that does not
 * verify is answered with `false` / `{ ok: false }` instead.
 */
export type CryptoErrorCode =
  | 'invalid_encoding'
  | 'invalid_length'
  | 'invalid_key'
  | 'unsupported_algorithm'
  | 'not_canonicalizable'
  | 'invalid_cms'
  | 'invalid_certificate'
  | 'invalid_csr'
  | 'invalid_argument';

export class CryptoError extends Error {
  readonly code: CryptoErrorCode;

  constructor(code: CryptoErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CryptoError';
    this.code = code;
  }
}

export function isCryptoError(error: unknown, code?: CryptoErrorCode): error is CryptoError {
  return error instanceof CryptoError && (code === undefined || error.code === code);
}
