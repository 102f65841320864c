-- Open data (issue "Open data with disclosure control"; DESIGN.md section 7; docs/open-data.md).

-- The one row of open-data settings. published: the publication switch (spec: "While publication is switched off
-- the answer is 404 with code not_published"); off until the city opts in. The disclosure values are overrides of
-- the spec's defaults (spec "Limits": min 3 operators and 3 advertisers per cell, at most 70 percent by one party,
-- release lag 1 full month); NULL means the default in force (LIMITS in @ooh/protocol).
CREATE TABLE open_data_settings (
  id                     boolean PRIMARY KEY DEFAULT true CHECK (id),
  published              boolean NOT NULL DEFAULT false,
  published_changed_at   timestamptz,
  min_operators          integer CHECK (min_operators BETWEEN 1 AND 1000),
  min_advertisers        integer CHECK (min_advertisers BETWEEN 1 AND 1000),
  max_party_share_pct    integer CHECK (max_party_share_pct BETWEEN 1 AND 100),
  lag_months             integer CHECK (lag_months BETWEEN 0 AND 24),
  updated_at             timestamptz
);
INSERT INTO open_data_settings (id) VALUES (true);

-- Monthly releases (DESIGN.md section 7: "A release is two files: plays-YYYY-MM.csv and dictionary.json"). Built
-- once, after lag_months full months past the month's end, and served byte for byte ever after: the trigger below
-- refuses any UPDATE or DELETE.
CREATE TABLE open_data_releases (
  month                text PRIMARY KEY CHECK (month ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
  csv                  bytea NOT NULL,
  csv_sha256           text NOT NULL CHECK (csv_sha256 ~ '^[0-9a-f]{64}$'),
  dictionary           bytea NOT NULL,
  dictionary_sha256    text NOT NULL CHECK (dictionary_sha256 ~ '^[0-9a-f]{64}$'),
  built_at             timestamptz NOT NULL,
  -- The disclosure values the release was built with (also in its dictionary.json).
  min_operators        integer NOT NULL,
  min_advertisers      integer NOT NULL,
  max_party_share_pct  integer NOT NULL,
  lag_months           integer NOT NULL
);

CREATE FUNCTION open_data_releases_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'open data release % is immutable', OLD.month USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER open_data_releases_immutable BEFORE UPDATE OR DELETE ON open_data_releases
  FOR EACH ROW EXECUTE FUNCTION open_data_releases_immutable();
