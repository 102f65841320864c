import type { KeyObject } from 'node:crypto';
import type { TlsIdentity } from '../net/http-client.js';

/**
 * What shipping and renewal need from the device's identity. The file-backed implementation
 * ({@link FileCredentials}) keeps the current pair and, during a renewal, the new pair beside it.
 */
export interface DeviceCredentials {
  /**
   * Key that signs `X-Service-Signature`: DESIGN.md §3, "the key of the device's newest certificate (or the
   * enrolment key before any certificate)".
   */
  signingKey(): KeyObject;
  /**
   * Client identity for the certificate channel at `now`, or null when the agent holds no certificate that is
   * valid then. `attempt` counts consecutive failures, so a freshly renewed pair that does not work yet can
   * alternate with the old one, which stays accepted for 24 hours.
   */
  tlsIdentity(now: Date, attempt?: number): TlsIdentity | null;
  /** A call made with `identity` succeeded (a renewed pair is promoted on its first success). */
  confirm(identity: TlsIdentity | null): void;
}
