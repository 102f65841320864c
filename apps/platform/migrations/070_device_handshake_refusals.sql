-- Refused client certificates on the devices host (issue "Trust under attack", item 6: "A client certificate refused
-- during the TLS handshake leaves no trace: log every refused handshake (reason, certificate subject and serial, peer
-- address) and count it in the fleet view, so an operator can see why a player cannot connect").
--
-- Every refusal is counted; its details are kept only in a bounded list. A flood of bad handshakes must not fill the
-- disk: each platform process aggregates refusals in memory and writes them at most once a second
-- (src/devices/refusals.ts), as per-minute counts and as distinct recent refusals.

-- Refusals per minute, device (null: the certificate names no device of the platform, or there was none) and reason.
-- A device gets rows only for certificates the platform issued to it, so the rows of a minute are bounded by the
-- fleet. Rows older than 48 hours are removed by the writers; the fleet view reads the last 24 hours.
CREATE TABLE device_handshake_refusal_counts (
  minute     timestamptz NOT NULL CHECK (date_trunc('minute', minute) = minute),
  device_id  uuid REFERENCES devices (id),
  reason     text NOT NULL CHECK (reason ~ '^[a-z][a-z_]{0,63}$'),
  refusals   integer NOT NULL CHECK (refusals > 0),
  UNIQUE NULLS NOT DISTINCT (minute, device_id, reason)
);
CREATE INDEX device_handshake_refusal_counts_device ON device_handshake_refusal_counts (device_id, minute);
CREATE INDEX device_handshake_refusal_counts_minute ON device_handshake_refusal_counts (minute);

-- Distinct recent refusals: one row per reason, subject, serial, address and device, with the time of its latest
-- occurrence and how often it was seen. The writers keep the newest 200 rows naming no device and the newest 20 of
-- each device, so the table stays small whatever a caller sends. key_sha256: SHA-256 of those five fields.
CREATE TABLE device_handshake_refusals_recent (
  key_sha256  text PRIMARY KEY CHECK (key_sha256 ~ '^[0-9a-f]{64}$'),
  at          timestamptz NOT NULL,
  reason      text NOT NULL CHECK (reason ~ '^[a-z][a-z_]{0,63}$'),
  subject     text CHECK (length(subject) <= 512),
  serial      text CHECK (length(serial) <= 128),
  address     text CHECK (length(address) <= 64),
  device_id   uuid REFERENCES devices (id),
  refusals    bigint NOT NULL CHECK (refusals > 0)
);
CREATE INDEX device_handshake_refusals_recent_at ON device_handshake_refusals_recent (at DESC);
CREATE INDEX device_handshake_refusals_recent_device ON device_handshake_refusals_recent (device_id, at DESC);
