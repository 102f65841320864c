import { DateTime, Uuid } from '@ooh/protocol';
import { type Static, Type } from '@sinclair/typebox';

/** base64 SPKI DER of a P-256 key is 124 characters; PEM is accepted too. */
const PublicKey = Type.String({ minLength: 40, maxLength: 400 });
/** A P-256 CSR is some 400 bytes; generous room for PEM armour and extensions. */
export const CSR_MAX_CHARS = 8192;
const Csr = Type.String({ minLength: 1, maxLength: CSR_MAX_CHARS });
const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);

export const EnrolBody = Type.Object(
  { structure_id: Uuid, public_key: PublicKey, csr: Type.Optional(Csr) },
  { additionalProperties: false },
);
export type EnrolBody = Static<typeof EnrolBody>;

export const ReEnrolBody = Type.Object(
  { public_key: PublicKey, csr: Type.Optional(Csr) },
  { additionalProperties: false },
);
export type ReEnrolBody = Static<typeof ReEnrolBody>;

/** Answer of enrolment and re-enrolment; the certificate fields only when a CSR was given. */
export const EnrolAnswer = Type.Object({
  device_id: Uuid,
  structure_code: Type.String(),
  certificate_pem: Type.Optional(Type.String()),
  chain_pem: Type.Optional(Type.String()),
  not_after: Type.Optional(DateTime),
});
export type EnrolAnswer = Static<typeof EnrolAnswer>;

export const ForceGrantAnswer = Type.Object({ device_id: Uuid, until: DateTime });

export const CertificateView = Type.Object({
  serial: Type.String(),
  state: Type.Union([
    Type.Literal('current'),
    Type.Literal('previous-until'),
    Type.Literal('superseded'),
    Type.Literal('revoked'),
  ]),
  not_before: DateTime,
  not_after: DateTime,
  issued_at: DateTime,
  issued_by: Type.String(),
  first_used_at: Nullable(DateTime),
  replaced_at: Nullable(DateTime),
  old_valid_until: Nullable(DateTime),
  key_fingerprint: Type.String(),
  certificate_pem: Type.String(),
});

export const DeviceView = Type.Object({
  device_id: Uuid,
  structure_id: Uuid,
  structure_code: Type.String(),
  organisation_id: Uuid,
  created_at: DateTime,
  re_enrolled_at: Nullable(DateTime),
  revoked_at: Nullable(DateTime),
  /** End of the live force-renewal grant, or null. */
  force_renewal_until: Nullable(DateTime),
  keys: Type.Array(
    Type.Object({
      fingerprint: Type.String(),
      public_key: Type.String(),
      registered_at: DateTime,
      accepted_until: Nullable(DateTime),
    }),
  ),
  certificates: Type.Array(CertificateView),
});
export type DeviceView = Static<typeof DeviceView>;

/** GET {devices_url}/d/v1/whoami: what the client certificate proves (for agents and technicians). */
export const WhoAmIAnswer = Type.Object({
  device_id: Uuid,
  structure_code: Type.String(),
  certificate_serial: Type.String(),
  certificate_state: Type.String(),
  not_after: DateTime,
  old_valid_until: Nullable(DateTime),
});
