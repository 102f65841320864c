-- Identity: organisations, API keys, structures and saved sets (DESIGN.md section 3).

CREATE TABLE organisations (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 300),
  kind        text NOT NULL CHECK (kind IN ('authority', 'operator', 'agency', 'advertiser')),
  created_at  timestamptz NOT NULL
);

CREATE TABLE api_keys (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organisation_id  uuid NOT NULL REFERENCES organisations (id),
  name             text NOT NULL,
  -- SHA-256 of the whole key; the key itself is shown once and never stored.
  key_hash         bytea NOT NULL UNIQUE,
  scopes           text[] NOT NULL,
  -- NULL: every route its scopes allow; otherwise 'METHOD /route/pattern' entries.
  routes           text[],
  created_at       timestamptz NOT NULL,
  revoked_at       timestamptz
);
CREATE INDEX api_keys_organisation ON api_keys (organisation_id);

CREATE TABLE structures (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organisation_id  uuid NOT NULL REFERENCES organisations (id),
  code             text NOT NULL UNIQUE,
  district         text NOT NULL,
  format           text NOT NULL,
  address          text,
  lat              double precision,
  lon              double precision,
  created_at       timestamptz NOT NULL,
  retired_at       timestamptz
);
CREATE INDEX structures_organisation ON structures (organisation_id);

CREATE TABLE structure_sets (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organisation_id  uuid NOT NULL REFERENCES organisations (id),
  name             text NOT NULL,
  created_at       timestamptz NOT NULL
);

CREATE TABLE structure_set_members (
  set_id        uuid NOT NULL REFERENCES structure_sets (id) ON DELETE CASCADE,
  structure_id  uuid NOT NULL REFERENCES structures (id),
  position      integer NOT NULL,
  PRIMARY KEY (set_id, structure_id)
);

-- Gap-free yearly serials (submission numbers, approval numbers): the counter row
-- is updated inside the transaction that uses the number, so a rollback returns it.
CREATE TABLE number_counters (
  series  text NOT NULL,
  year    integer NOT NULL,
  last    integer NOT NULL,
  PRIMARY KEY (series, year)
);
