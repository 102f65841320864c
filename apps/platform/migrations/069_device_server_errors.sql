-- 5xx answers the platform gave to an authenticated device (issue "Trust under attack", item 4: "`agent status` and
-- the fleet page show a device that is stuck and why"). The agents and devices hosts write one row per device, once
-- per 5xx answer and never on a 2xx (src/devices/server-errors.ts), so the table holds at most one row per device.
--
-- A run of 5xx answers starts at `since` and counts `answers`; it ends when a batch of the device is stored after its
-- last 5xx (the next 5xx then starts a new run). The fleet list shows a device as stuck while its last 5xx is newer
-- than its newest stored batch.
CREATE TABLE device_server_errors (
  device_id  uuid PRIMARY KEY REFERENCES devices (id),
  since      timestamptz NOT NULL,
  last_at    timestamptz NOT NULL,
  answers    integer NOT NULL CHECK (answers > 0),
  -- batch_seq of the last 5xx when it answered a telemetry batch, else null.
  batch_seq  bigint CHECK (batch_seq >= 0),
  status     integer NOT NULL CHECK (status BETWEEN 500 AND 599),
  -- The problem code of the last 5xx (internal_error, service_unavailable, ...).
  code       text NOT NULL CHECK (length(code) BETWEEN 1 AND 64),
  -- Method and route of the last 5xx, e.g. 'POST /s/v1/telemetry'.
  route      text CHECK (length(route) <= 200),
  CHECK (since <= last_at)
);
