import type { CertificateRow } from './repository.js';

/**
 * State of a device certificate at `now` (console view and authentication):
 * - current: the device's newest certificate;
 * - previous-until: replaced by a renewal, still accepted until old_valid_until (spec "Certificate rule");
 * - superseded: replaced and past its old_valid_until (or ended at once by a re-enrolment);
 * - revoked: the device is revoked.
 */
export type CertificateState = 'current' | 'previous-until' | 'superseded' | 'revoked';

export function certificateState(
  certificate: Pick<CertificateRow, 'replaced_at' | 'old_valid_until'>,
  deviceRevokedAt: Date | null,
  now: Date,
): CertificateState {
  // A revocation is final whatever the clock says.
  if (deviceRevokedAt !== null) return 'revoked';
  if (certificate.replaced_at === null) return 'current';
  if (certificate.old_valid_until !== null && certificate.old_valid_until.getTime() > now.getTime()) {
    return 'previous-until';
  }
  return 'superseded';
}
