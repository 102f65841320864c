/**
 * The one error type of @ooh/verify (STYLE.md §3, as sigstore-js's `VerificationError`): callers branch on `code`,
 * never on message text; the original error, when there is one, is `cause`.
 *
 * Misuse (a wrong argument type) throws. A signature, chain, proof or document that does not verify is answered as a
 * value (`{ ok: false, error }` or `false`) carrying one of these codes.
 */
export type VerificationErrorCode =
  /** Bytes or text that cannot be read: DER, base64, hex, JSON, PEM. */
  | 'malformed'
  /** RFC 8785: a value JSON cannot carry (NaN, undefined, lone surrogate, integer beyond 2^53 - 1, ...). */
  | 'not_canonicalizable'
  /** A wrong argument (not bytes, not a Date, no roots given). */
  | 'invalid_argument'
  /** An algorithm or key type this package does not verify. */
  | 'unsupported_algorithm'
  // Certificate chains (RFC 5280 §6, as OpenSSL's X509_verify_cert checks our chains).
  /** No certificate of the pool or the roots names the certificate as issued by it. */
  | 'chain_no_issuer'
  /** An issuer names the certificate, but its signature does not verify with the issuer's key. */
  | 'chain_bad_signature'
  /** The issuer is not a CA (basicConstraints), or its keyUsage leaves out keyCertSign. */
  | 'chain_issuer_not_ca'
  /** A CA's pathLenConstraint is exceeded. */
  | 'chain_path_length'
  /** A certificate of the path is not valid yet at the time asked. */
  | 'chain_not_yet_valid'
  /** A certificate of the path has expired at the time asked. */
  | 'chain_expired'
  /** A certificate carries a critical extension this walk does not know. */
  | 'chain_unknown_critical_extension'
  /** More than eight certificates without reaching a root. */
  | 'chain_too_long'
  /** The path is not good for the purpose asked (extKeyUsage without it, or a leaf keyUsage that does not fit). */
  | 'chain_purpose'
  // CMS SignedData (RFC 5652).
  /** The signed content is not attached (detached signatures are not used here). */
  | 'cms_not_attached'
  /** Not exactly one SignerInfo. */
  | 'cms_signer_count'
  /** The digest or signature algorithm is not SHA-256 / ECDSA P-256 (or the signature's algorithms disagree). */
  | 'cms_algorithm'
  /** The signer's certificate is not among the SignedData's certificates. */
  | 'cms_signer_not_included'
  /** The signer's keyUsage allows neither digitalSignature nor nonRepudiation. */
  | 'cms_signer_key_usage'
  /** The contentType attribute is not id-data. */
  | 'cms_content_type'
  /** The messageDigest attribute is not the SHA-256 of the content: the content was changed. */
  | 'cms_message_digest'
  /** The signature over the signed attributes does not verify with the signer's key. */
  | 'cms_bad_signature'
  /**
   * The signer is the authority's, but not its signer of the role asked (signer-role.ts): a seal signed with the
   * envelope signer's certificate, or an envelope or revocation list with the seal signer's.
   */
  | 'signer_role'
  // Signed documents {body, signature} (envelopes, revocation lists; DESIGN.md §4).
  /** Not a JSON object with a `body` and a base64 `signature`. */
  | 'document_malformed'
  /** The document has no signature (an empty one, or none). */
  | 'document_unsigned'
  /** The signed content is not exactly the canonical JSON of `body`. */
  | 'document_content_differs'
  /** `body` is not what the caller's validator accepts. */
  | 'document_body_invalid'
  // Verifier keys of signed notes (c2sp.org/signed-note "Verifier keys"); a key that is not base64 is `malformed`,
  // one that is not Ed25519 `unsupported_algorithm`.
  /** Not `<key name>+<hex key ID>+<base64 key>`. */
  | 'vkey_malformed'
  /** The key name is empty or holds a space or a "+". */
  | 'vkey_name'
  /** The key ID is not 8 lowercase hex digits. */
  | 'vkey_key_id'
  /** The key ID is not SHA-256(name, type, key)[:4]: the name, the key or the ID was changed. */
  | 'vkey_key_id_differs';

export class VerificationError extends Error {
  readonly code: VerificationErrorCode;

  constructor(code: VerificationErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'VerificationError';
    this.code = code;
  }
}

export function isVerificationError(
  error: unknown,
  code?: VerificationErrorCode,
): error is VerificationError {
  return error instanceof VerificationError && (code === undefined || error.code === code);
}
