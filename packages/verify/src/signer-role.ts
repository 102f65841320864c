import type { Certificate } from './x509.js';

/*
 * The authority signs with two certificates so that the roles stay apart (DESIGN.md sections 2 and 4;
 * apps/platform/src/authority/pki.ts): "OOH Approval Envelope Signer" signs approval envelopes and revocation lists,
 * "OOH Stats Seal Signer" signs the daily stats seals. Both are issued by the same issuing CA with the same key usage
 * (digitalSignature, no extended key usage), so what tells them apart is the name the issuing CA put in each. A
 * verifier that asks for a role accepts only a signer whose common name ends in that role's name: the envelope
 * signer's certificate cannot pass as the seal signer's, nor the reverse, and only the issuing CA could name a new
 * one. An authority that mounts its own certificates names them the same way.
 */

/** What a signature must have been made for: a stats seal, or an approval envelope or revocation list. */
export type SignerRole = 'seal' | 'envelope';

/** The end of the signer certificate's common name for each role. */
export const SIGNER_ROLE_NAMES: { readonly [R in SignerRole]: string } = {
  seal: 'Seal Signer',
  envelope: 'Envelope Signer',
};

/** The role the certificate's subject common name gives it, or null when it names neither. */
export function signerRoleOf(certificate: Certificate): SignerRole | null {
  const name = certificate.subjectCommonName?.trim() ?? '';
  for (const role of Object.keys(SIGNER_ROLE_NAMES) as SignerRole[]) {
    const suffix = SIGNER_ROLE_NAMES[role];
    // "Seal Signer" itself, or a name ending in " Seal Signer": not "Resealsigner", not "Seal Signer 2".
    if (name === suffix || name.endsWith(` ${suffix}`)) return role;
  }
  return null;
}
