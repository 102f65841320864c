-- Device identity (issue "Device identity: enrolment, the device CA, mutual TLS, certificate renewal").
-- Every client certificate the device CA issued, force-renewal grants, and re-enrolments. device_keys
-- (migration 004) stays the interface with proof of play: enrolment, renewal and re-enrolment keep it in step.

ALTER TABLE devices ADD COLUMN re_enrolled_at timestamptz;

CREATE TABLE device_certificates (
  -- Lowercase hex of the certificate serial number, without a leading 00 sign octet.
  serial             text PRIMARY KEY CHECK (serial ~ '^[0-9a-f]{2,40}$'),
  device_id          uuid NOT NULL REFERENCES devices (id),
  -- SHA-256 hex of the certificate DER: the TLS peer certificate must be this very one.
  certificate_sha256 text NOT NULL UNIQUE CHECK (certificate_sha256 ~ '^[0-9a-f]{64}$'),
  -- SHA-256 hex of the certified key's SPKI DER (device_keys.fingerprint).
  key_fingerprint    text NOT NULL CHECK (key_fingerprint ~ '^[0-9a-f]{64}$'),
  pem                text NOT NULL,
  not_before         timestamptz NOT NULL,
  not_after          timestamptz NOT NULL CHECK (not_before < not_after),
  issued_at          timestamptz NOT NULL,
  -- How it was issued: at enrolment, by a renewal, or at a re-enrolment.
  issued_by          text NOT NULL CHECK (issued_by IN ('enrolment', 'renewal', 're-enrolment')),
  -- Renewals only: the certificate that asked, and SHA-256 hex of the CSR DER. A lost answer is recovered by
  -- the same CSR from the same old certificate while this one has never been used.
  renewed_from       text REFERENCES device_certificates (serial),
  csr_sha256         text CHECK (csr_sha256 ~ '^[0-9a-f]{64}$'),
  first_used_at      timestamptz,
  -- Set when a newer certificate replaced this one. The spec: "after a successful renewal the old certificate
  -- stays accepted until old_valid_until (24 hours)"; a re-enrolment ends it at once (old_valid_until = replaced_at).
  replaced_at        timestamptz,
  old_valid_until    timestamptz,
  CHECK ((replaced_at IS NULL) = (old_valid_until IS NULL)),
  CHECK ((issued_by = 'renewal') = (renewed_from IS NOT NULL AND csr_sha256 IS NOT NULL))
);
-- One newest certificate per device.
CREATE UNIQUE INDEX device_certificates_newest ON device_certificates (device_id) WHERE replaced_at IS NULL;
CREATE INDEX device_certificates_device ON device_certificates (device_id, issued_at DESC);
CREATE UNIQUE INDEX device_certificates_renewed_from ON device_certificates (renewed_from);

-- spec renew: "force (boolean, optional; skips the 60-day rule, allowed only after an administrator has allowed
-- it for 24 hours)". Kept as a history; a grant is live while granted_at <= now < valid_until.
CREATE TABLE device_force_renewal_grants (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  device_id    uuid NOT NULL REFERENCES devices (id),
  granted_at   timestamptz NOT NULL,
  valid_until  timestamptz NOT NULL CHECK (granted_at < valid_until),
  -- API key or session id of the administrator.
  granted_by   text NOT NULL
);
CREATE INDEX device_force_renewal_grants_device ON device_force_renewal_grants (device_id, valid_until DESC);
