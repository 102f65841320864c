import { type Static, Type } from '@sinclair/typebox';
import { DateTime, Uuid } from './common.js';

/**
 * Body of POST {devices_url}/d/v1/renew: "csr (string, required; certificate request for the new key, PEM or base64
 * of DER; ECDSA P-256), force (boolean, optional; skips the 60-day rule ...)".
 */
export const RenewRequest = Type.Object({
  csr: Type.String({ minLength: 1 }),
  force: Type.Optional(Type.Boolean()),
});
export type RenewRequest = Static<typeof RenewRequest>;

/** spec "Renewed certificate answer". */
export const RenewAnswer = Type.Object({
  device_id: Uuid,
  certificate_pem: Type.String(),
  chain_pem: Type.String(),
  not_after: DateTime,
  // spec: "Until when the old certificate is still accepted"
  old_valid_until: DateTime,
});
export type RenewAnswer = Static<typeof RenewAnswer>;
