import { base64Encode, canonicalBytes, canonicalize, cmsSign, sha256Hex } from '@ooh/crypto';
import type { ApprovalManifest } from '@ooh/protocol';
import type { Authority } from '../authority/index.js';

/** A signed document of DESIGN.md section 4: `{"v":1, "body": ..., "signature": base64 CMS}`. */
export interface SignedDocument<T> {
  v: 1;
  body: T;
  signature: string;
}

/**
 * Signs `body` with the authority's envelope signer: CMS SignedData over the canonical JSON (RFC 8785) of
 * body, content attached, the issuing CA included so a verifier needs only the root
 * (`openssl cms -verify -binary -inform DER -CAfile authority-root.pem`).
 */
export async function signDocument<T>(body: T, authority: Authority, now: Date): Promise<SignedDocument<T>> {
  const der = await cmsSign({
    content: canonicalBytes(body),
    signerCertificatePem: authority.envelopeSigner.certPem,
    signerKey: authority.envelopeSigner.key,
    signingTime: now,
    extraCertificatesPem: authority.chainPem,
  });
  return { v: 1, body, signature: base64Encode(der) };
}

/** `manifest_sha256` of the ledger: SHA-256 of the canonical JSON of the body (DESIGN.md section 4). */
export function manifestSha256(body: ApprovalManifest): string {
  return sha256Hex(canonicalBytes(body));
}

/** Where an approval's envelope is served (spec creative entry envelope_url; same credentials as lookup). */
export function envelopeUrl(apiBaseUrl: string, approvalNumber: string): string {
  return `${apiBaseUrl}/api/v1/approvals/${encodeURIComponent(approvalNumber)}/envelope`;
}

/**
 * The text of a signed document, its body written in canonical key order: the body's bytes in the
 * document are exactly the bytes that were signed.
 */
export function documentText<T>(document: SignedDocument<T>): string {
  return `{"v":1,"body":${canonicalize(document.body)},"signature":${JSON.stringify(document.signature)}}`;
}
