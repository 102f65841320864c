-- Devices a console user has signed in from (issue "Trust under attack", item 5: "never let strangers' failures
-- refuse a correct password"). After a successful sign-in the browser keeps a device cookie (ooh_device, a random
-- token; its SHA-256 is stored here). A sign-in from a browser with the user's device cookie is limited only by that
-- browser's own failures, so failures of strangers (from the same address, or against the same account from
-- anywhere) never refuse the owner's correct password there. apps/platform/console/README.md, "Sign-in limits".
CREATE TABLE console_devices (
  token_sha256  text PRIMARY KEY CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
  user_id       uuid NOT NULL REFERENCES console_users (id),
  created_at    timestamptz NOT NULL,
  last_used_at  timestamptz NOT NULL
);
CREATE INDEX console_devices_user ON console_devices (user_id, last_used_at);
