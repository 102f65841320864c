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

/**
 * Whether the answer of the renewal that replaced `presented` may never have reached the device, so that the same CSR
 * sent again is answered with `successor`, the certificate that renewal issued (DESIGN.md §9: "A lost renewal answer is
 * recovered by sending the same CSR again: the platform answers it with the certificate it already issued"): the
 * successor has never authenticated a request and is still the device's newest (a re-enrolment ends it), and
 * `presented` was replaced by that renewal.
 */
export function answerMayBeLost(
  presented: Pick<CertificateRow, 'replaced_at' | 'old_valid_until'>,
  successor: Pick<CertificateRow, 'first_used_at' | 'replaced_at'>,
): boolean {
  return (
    presented.replaced_at !== null &&
    presented.old_valid_until !== null &&
    successor.first_used_at === null &&
    successor.replaced_at === null
  );
}
