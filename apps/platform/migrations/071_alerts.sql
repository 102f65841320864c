-- Fleet alerts (issue "A newcomer's two commands on a bare machine, and an operator's first day", item 5: "A device
-- silent for a configurable time, a screen reported off during its operating hours, a queue lag over an hour, a
-- mapped CMS player that sends batches with no plays: shown on the fleet page and delivered through the existing
-- signed webhooks. Never alert on a device that has not yet sent anything."; apps/platform/docs/alerts.md).
--
-- An alert opens when its condition starts and resolves when it ends. Each transition is one city event
-- (alert_opened, alert_resolved) written in the same transaction, so each is delivered once per subscription by the
-- existing webhooks, however often and by however many instances the conditions are evaluated.

-- City events may concern one organisation: an alert is about an operator's device or CMS player. NULL: a city-wide
-- event (declared_vs_actual), for the authority only.
ALTER TABLE city_events ADD COLUMN organisation_id uuid REFERENCES organisations (id);
CREATE INDEX city_events_organisation ON city_events (organisation_id, created_at DESC, id)
  WHERE organisation_id IS NOT NULL;

-- A subscription of an operator (organisation_id set) receives that organisation's events only; NULL: a
-- subscription of the authority, which receives every event of its types (the subscriptions made before this
-- migration were all the authority's).
ALTER TABLE webhook_subscriptions ADD COLUMN organisation_id uuid REFERENCES organisations (id);
CREATE INDEX webhook_subscriptions_organisation ON webhook_subscriptions (organisation_id)
  WHERE deleted_at IS NULL;

CREATE TABLE alerts (
  id                 uuid PRIMARY KEY,
  kind               text NOT NULL
                     CHECK (kind IN ('device_silent', 'screen_off', 'queue_lag', 'cms_player_no_plays')),
  -- What the alert is about, as proof of play names players: 'device:<uuid>' or 'cms:<installation>:<external id>'.
  subject_key        text NOT NULL CHECK (subject_key ~ '^(device|cms):'),
  -- The operator whose device or installation it is: who may see it and whose subscriptions receive it.
  organisation_id    uuid NOT NULL REFERENCES organisations (id),
  device_id          uuid REFERENCES devices (id),
  installation_id    uuid REFERENCES cms_installations (id),
  external_id        text,
  structure_id       uuid NOT NULL REFERENCES structures (id),
  -- When the condition began (docs/alerts.md says it per kind); the newest sign of life when last evaluated.
  since              timestamptz NOT NULL,
  last_seen_at       timestamptz,
  -- The figures of the condition (thresholds in force, the lag measured, the operating hours).
  detail             jsonb NOT NULL DEFAULT '{}',
  opened_at          timestamptz NOT NULL,
  opened_event_id    uuid NOT NULL UNIQUE REFERENCES city_events (id),
  resolved_at        timestamptz,
  -- cleared: the condition ended; not_monitored: the device was revoked, its structure retired, the player unmapped.
  resolution         text CHECK (resolution IN ('cleared', 'not_monitored')),
  resolved_event_id  uuid UNIQUE REFERENCES city_events (id),
  CHECK ((device_id IS NULL) <> (installation_id IS NULL)),
  CHECK ((installation_id IS NULL) = (external_id IS NULL)),
  CHECK ((kind = 'cms_player_no_plays') = (installation_id IS NOT NULL)),
  CHECK ((resolved_at IS NULL) = (resolution IS NULL)),
  CHECK ((resolved_at IS NULL) = (resolved_event_id IS NULL)),
  CHECK (resolved_at IS NULL OR resolved_at >= opened_at)
);
-- At most one open alert of a kind per device or player: the evaluation runs under an advisory lock, and this index
-- is the last line of defence should two instances ever evaluate together.
CREATE UNIQUE INDEX alerts_open ON alerts (kind, subject_key) WHERE resolved_at IS NULL;
CREATE INDEX alerts_organisation ON alerts (organisation_id, opened_at DESC, id);
CREATE INDEX alerts_opened ON alerts (opened_at DESC, id);

-- The evaluation's memory, one row: when it last ran, and since when it has run without a gap. Silence and queue
-- lag are counted only over time the platform was watching, so a platform that was down does not greet its
-- operators with an alert for every device (docs/alerts.md "After the platform was down").
CREATE TABLE alert_monitor (
  id              boolean PRIMARY KEY DEFAULT true CHECK (id),
  evaluated_at    timestamptz,
  watching_since  timestamptz,
  CHECK ((evaluated_at IS NULL) = (watching_since IS NULL))
);
INSERT INTO alert_monitor (id) VALUES (true);
