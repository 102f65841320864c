-- Base tables shared by several features: devices with their accepted keys
-- (device identity, proof of play) and issued approvals (approvals, lookups,
-- proof-of-play flags). Each feature extends them in its own migrations.

CREATE TABLE devices (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  structure_id  uuid NOT NULL REFERENCES structures (id),
  created_at    timestamptz NOT NULL,
  revoked_at    timestamptz
);
CREATE INDEX devices_structure ON devices (structure_id);

-- Keys a device may sign with (DESIGN.md section 3): the key of its newest
-- certificate, or the enrolment key before any certificate; a replaced key stays
-- accepted until accepted_until (old_valid_until, 24 hours after a renewal).
CREATE TABLE device_keys (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  device_id        uuid NOT NULL REFERENCES devices (id),
  public_key_spki  text NOT NULL,
  -- SHA-256 hex of the SPKI DER: a key is held by one device only.
  fingerprint      text NOT NULL UNIQUE,
  registered_at    timestamptz NOT NULL,
  accepted_until   timestamptz
);
CREATE INDEX device_keys_device ON device_keys (device_id, registered_at DESC);

CREATE TABLE approvals (
  id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  number         text NOT NULL UNIQUE,
  submission_id  uuid NOT NULL REFERENCES submissions (id),
  media_sha256   text NOT NULL CHECK (media_sha256 ~ '^[0-9a-f]{64}$'),
  valid_from     date NOT NULL,
  valid_until    date NOT NULL CHECK (valid_from <= valid_until),
  category_id    integer,
  duration_ms    integer,
  width          integer,
  height         integer,
  issued_at      timestamptz NOT NULL,
  revoked_at     timestamptz,
  revoke_reason  text
);
CREATE INDEX approvals_media ON approvals (media_sha256);
CREATE INDEX approvals_submission ON approvals (submission_id);

CREATE TABLE approval_structures (
  approval_id   uuid NOT NULL REFERENCES approvals (id) ON DELETE CASCADE,
  structure_id  uuid NOT NULL REFERENCES structures (id),
  PRIMARY KEY (approval_id, structure_id)
);
CREATE INDEX approval_structures_structure ON approval_structures (structure_id);
