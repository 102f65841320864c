import { base64Decode, bytesEqual } from './bytes.js';
import { verifyCms } from './cms.js';
import { VerificationError } from './errors.js';
import { canonicalBytes } from './jcs.js';
import type { SignerRole } from './signer-role.js';
import type { Certificate, ValidityWindow } from './x509.js';

/*
 * Signed documents of DESIGN.md §4: a JSON object `{ ..., body, signature }` whose `signature` is the base64 of a CMS
 * SignedData with attached content over the RFC 8785 canonical JSON of `body`, signed under the authority root. The
 * platform signs approval envelopes (the `<file>.envelope.json` sidecar) and revocation lists
 * (`{v:1, body:{version, issued_at, revoked}, signature}`) this way; agents, the verify host and browsers check them
 * here.
 */

/** Accepts a body (a TypeBox `Check`, a hand-written guard): the schema stays with the caller, not in the browser. */
export type BodyValidator<T> = (body: unknown) => body is T;

export type SignedDocumentResult<T> =
  | {
      ok: true;
      body: T;
      /** The DER SignedData. */
      signature: Uint8Array;
      signingTime: Date | null;
      signer: Certificate;
      /** From the signer up to the pinned root. */
      chain: Certificate[];
      /** When every certificate of the chain is valid; with `at` null the caller judges its own dates by it. */
      window: ValidityWindow;
    }
  | { ok: false; error: VerificationError };

const fail = (code: VerificationError['code'], message: string) => ({
  ok: false as const,
  error: new VerificationError(code, message),
});

/**
 * Verifies a signed document's text, in this order, the first failure naming the code:
 * 1. JSON object with a `body` → else document_malformed; a non-empty string `signature` → else document_unsigned
 *    (absent, null or empty) or document_malformed;
 * 2. the CMS (verifyCms) against `roots`, every certificate valid at `at` (not judged when null), and, with `role`,
 *    signed by the authority's signer of that role (an envelope or a revocation list: 'envelope') → its code;
 * 3. the signed content is exactly canonicalBytes(body) → else document_content_differs;
 * 4. `validate(body)`, when given → else document_body_invalid.
 * Never throws on bad input.
 */
export async function verifySignedDocument<T = unknown>(
  text: string,
  validate: BodyValidator<T> | null,
  roots: readonly Certificate[],
  at: Date | null,
  role?: SignerRole,
): Promise<SignedDocumentResult<T>> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return fail('document_malformed', 'the document is not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    return fail('document_malformed', 'the document is not a JSON object');
  const { body, signature } = parsed as { body?: unknown; signature?: unknown };
  if (signature === undefined || signature === null || signature === '')
    return fail('document_unsigned', 'the document carries no signature');
  if (typeof signature !== 'string') return fail('document_malformed', 'the signature is not a string');
  if (typeof body !== 'object' || body === null)
    return fail('document_malformed', 'the document has no body');
  const cms = await verifyCms(signature, { roots, at, ...(role === undefined ? {} : { role }) });
  if (!cms.ok) return cms;
  let expected: Uint8Array;
  try {
    expected = canonicalBytes(body);
  } catch (error) {
    return {
      ok: false,
      error: new VerificationError('document_content_differs', 'the body cannot be canonicalized', {
        cause: error,
      }),
    };
  }
  // DESIGN.md §4: the signature is "over canonical JSON of body": the signed content must be exactly that.
  if (!bytesEqual(cms.content, expected))
    return fail('document_content_differs', 'the signed content is not the canonical JSON of body');
  if (validate && !validate(body))
    return fail('document_body_invalid', 'the signed body is not of the kind expected');
  return {
    ok: true,
    body: body as T,
    signature: base64Decode(signature)!,
    signingTime: cms.signingTime,
    signer: cms.signer,
    chain: cms.chain,
    window: cms.window,
  };
}
