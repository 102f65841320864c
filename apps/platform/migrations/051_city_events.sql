-- City events and their delivery by webhook (issue "... and the declared-vs-actual city event";
-- docs/city-events.md). spec Events: "A city event named declared_vs_actual compares the plays of a full day with
-- declared_daily_plays (default band 30 %); its payload and delivery: not shown."

-- The one row of city-event settings; NULL means the default (LIMITS.declaredBandPct in @ooh/protocol).
CREATE TABLE city_event_settings (
  id                 boolean PRIMARY KEY DEFAULT true CHECK (id),
  declared_band_pct  integer CHECK (declared_band_pct BETWEEN 0 AND 1000),
  updated_at         timestamptz
);
INSERT INTO city_event_settings (id) VALUES (true);

-- One row per event. subject_key names what the event is about (for declared_vs_actual:
-- '<submission id>/<structure id>/<day>'), so a re-run never raises the same event twice. body is the exact JSON
-- text delivered to subscribers (every retry sends the same bytes); payload is its `data` for queries.
CREATE TABLE city_events (
  id           uuid PRIMARY KEY,
  type         text NOT NULL CHECK (type ~ '^[a-z][a-z_]*$'),
  subject_key  text NOT NULL,
  day          date,
  payload      jsonb NOT NULL,
  body         text NOT NULL,
  created_at   timestamptz NOT NULL,
  UNIQUE (type, subject_key)
);
CREATE INDEX city_events_listing ON city_events (type, created_at DESC, id);

-- Days already compared, per event type: a day is compared once, by whichever instance takes its lock.
CREATE TABLE city_event_checks (
  type        text NOT NULL,
  day         date NOT NULL,
  checked_at  timestamptz NOT NULL,
  events      integer NOT NULL CHECK (events >= 0),
  PRIMARY KEY (type, day)
);

-- Webhook subscriptions (console, authority administrators). secret: the HMAC-SHA256 key of X-Signature.
CREATE TABLE webhook_subscriptions (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  url         text NOT NULL CHECK (url ~ '^https?://'),
  secret      text NOT NULL CHECK (length(secret) BETWEEN 16 AND 256),
  types       text[] NOT NULL CHECK (cardinality(types) > 0),
  created_at  timestamptz NOT NULL,
  deleted_at  timestamptz
);

-- One delivery per subscription and event (at-least-once; receivers deduplicate by X-Event-Id). A claimed delivery
-- holds a lease so that two instances never send it at the same time; a lease that runs out (crash) is taken again.
CREATE TABLE webhook_deliveries (
  id               bigserial PRIMARY KEY,
  subscription_id  uuid NOT NULL REFERENCES webhook_subscriptions (id),
  event_id         uuid NOT NULL REFERENCES city_events (id),
  attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at  timestamptz NOT NULL,
  lease_until      timestamptz,
  delivered_at     timestamptz,
  failed_at        timestamptz,
  last_status      integer,
  last_error       text,
  created_at       timestamptz NOT NULL,
  UNIQUE (subscription_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id)
  WHERE delivered_at IS NULL AND failed_at IS NULL;
