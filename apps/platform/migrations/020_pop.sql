-- Proof of play (issue "Proof-of-play ingestion: agent channel, certificate channel, CMS channel";
-- DESIGN.md sections 2, 5 and 6).

-- One row per ACCEPTED batch. spec: "the body is kept as received" (on the CMS channel: the bytes after gzip
-- decompression, the bytes the signature covers). The id is the platform batch number of the seal leaves
-- (DESIGN.md section 6); owner is 'device:<uuid>' or 'source:<uuid>'.
CREATE TABLE pop_batches (
  id            bigserial PRIMARY KEY,
  owner         text NOT NULL CHECK (owner ~ '^(device|source):[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  -- spec: "batch_seq ... taken once" per device / per installation.
  batch_seq     bigint NOT NULL CHECK (batch_seq >= 0),
  channel       text NOT NULL CHECK (channel IN ('agent', 'cert', 'cms', 'legacy')),
  body          bytea NOT NULL,
  body_sha256   text NOT NULL CHECK (body_sha256 ~ '^[0-9a-f]{64}$'),
  -- Seals order leaves by received_at, then id (DESIGN.md section 6).
  received_at   timestamptz NOT NULL,
  -- Asia/Almaty calendar day of received_at (DESIGN.md section 8: never a fixed offset).
  receive_day   date NOT NULL,
  -- Elements of kind play in the body, whatever became of them (DESIGN.md section 6: "record_count counts the
  -- elements of kind play in the sealed bodies, so anyone holding the bodies can recompute it").
  record_count  integer NOT NULL CHECK (record_count >= 0),
  -- The batch answer (spec PopAnswer) as first given; a repeat gets it back with duplicate true.
  answer        jsonb NOT NULL,
  UNIQUE (owner, batch_seq)
);
CREATE INDEX pop_batches_receive_day ON pop_batches (receive_day, received_at, id);
-- The bodies are JSON of at most 16 MB; pglz would spend more time than it saves on the hot path.
ALTER TABLE pop_batches ALTER COLUMN body SET STORAGE EXTERNAL;

-- Per-player high-water mark. spec: "records at or below the highest number already taken for their player are
-- not counted again". player_key is 'device:<uuid>' (agent and certificate channels) or
-- 'cms:<installation uuid>:<external id>' (CMS channel). Rows are locked (in key order) by the transaction that
-- stores a batch, so the mark is exact across platform instances.
CREATE TABLE pop_players (
  player_key      text PRIMARY KEY,
  high_water_seq  bigint NOT NULL CHECK (high_water_seq >= 0),
  -- The mark before its last move. A batch moves a mark only from the value it judged against (compare-and-set
  -- in the statement that stores it): the value it expects travels in this column of the upsert.
  previous_seq    bigint NOT NULL CHECK (previous_seq >= 0 AND previous_seq < high_water_seq)
);

-- Records taken from accepted batches (plays counted, flagged ones included, and the reject, mode_change and
-- tamper events of the agent channel). Refused and duplicate records stay in the body and the answer only.
-- DESIGN.md section 2: "Play records go to a table partitioned by receive day": one partition per calendar month
-- of receive_day, created on demand by pop_records_partition().
CREATE TABLE pop_records (
  receive_day      date NOT NULL,
  batch_id         bigint NOT NULL,
  record_index     integer NOT NULL,
  player_key       text NOT NULL,
  structure_id     uuid NOT NULL,
  kind             text NOT NULL CHECK (kind IN ('play', 'reject', 'mode_change', 'tamper')),
  seq              bigint,
  -- Almaty day of the play's start (of `at` for other kinds), or of receipt when there is none; for plays this is
  -- the day of play_counts.
  day              date NOT NULL,
  approval_number  text,
  slot             text CHECK (slot IN ('gov', 'emergency')),
  media_sha256     text,
  start_at         timestamptz,
  end_at           timestamptz,
  duration_ms      bigint,
  at               timestamptz,
  -- spec CMS rule 3: "attested plays: reported by the operator's system and signed by its key".
  attested         boolean NOT NULL,
  flags            text[] NOT NULL DEFAULT '{}',
  screen_power     text,
  code             text,
  play_id          text,
  -- The attribution tag when well formed (spec: "A tag of another shape is ignored"). json, not jsonb: a string of
  -- the body may hold \u0000, which jsonb refuses.
  src              json,
  -- detail of a reject, mode_change or tamper.
  detail           json
) PARTITION BY RANGE (receive_day);
CREATE INDEX pop_records_events ON pop_records (player_key, receive_day) WHERE kind <> 'play';

-- Creates the month partition of pop_records that holds `day` unless it exists. Serialised by an advisory lock so
-- that instances meeting a new month together create it once.
CREATE FUNCTION pop_records_partition(day date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  first_day date := date_trunc('month', day)::date;
  partition_name text := format('pop_records_%s', to_char(first_day, 'YYYY_MM'));
BEGIN
  IF to_regclass(partition_name) IS NULL THEN
    PERFORM pg_advisory_xact_lock(hashtext('pop_records_partition'));
    IF to_regclass(partition_name) IS NULL THEN
      EXECUTE format('CREATE TABLE %I PARTITION OF pop_records FOR VALUES FROM (%L) TO (%L)',
        partition_name, first_day, (first_day + interval '1 month')::date);
    END IF;
  END IF;
  RETURN partition_name;
END
$$;

-- Counted plays per player, structure, day and approval (billable) or slot (gov, emergency: counted apart, never
-- billed), maintained in the transaction that stores the batch. day: the Almaty day of the play's start, or of
-- receipt when there is no start. attested: plays from a CMS (spec CMS rule 3).
CREATE TABLE play_counts (
  player_key       text NOT NULL,
  structure_id     uuid NOT NULL,
  day              date NOT NULL,
  approval_number  text,
  slot             text CHECK (slot IN ('gov', 'emergency')),
  attested         boolean NOT NULL,
  plays            bigint NOT NULL CHECK (plays >= 0),
  -- Of those, plays that carry a flag (DESIGN.md section 5: flagged plays are accepted and counted).
  flagged          bigint NOT NULL CHECK (flagged >= 0 AND flagged <= plays),
  CHECK ((approval_number IS NULL) <> (slot IS NULL)),
  UNIQUE NULLS NOT DISTINCT (player_key, day, structure_id, approval_number, slot, attested)
);
CREATE INDEX play_counts_day ON play_counts (day, structure_id);
CREATE INDEX play_counts_approval ON play_counts (approval_number, day) WHERE approval_number IS NOT NULL;

-- Aborts the statement that stores a batch when another instance moved a player's high-water mark after this one
-- read it (optimistic concurrency: the caller reads the marks again, judges again and retries).
CREATE FUNCTION pop_check_marks(expected integer, updated integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF expected <> updated THEN
    RAISE EXCEPTION 'a high-water mark moved while the batch was judged' USING ERRCODE = 'PHWM1';
  END IF;
  RETURN true;
END
$$;

-- Token buckets of the rate limits (spec "Limits"), shared by every platform instance (DESIGN.md section 2).
CREATE TABLE pop_rate_buckets (
  bucket_key  text PRIMARY KEY,
  tokens      double precision NOT NULL,
  updated_at  timestamptz NOT NULL
);

-- Takes `costs` tokens from every named bucket, or from none: returns 0 when granted, else the seconds until all
-- of them would hold enough. Buckets are locked in the order given (callers sort the keys). The time is a
-- parameter (never now(): tests move the clock).
CREATE FUNCTION pop_take_tokens(keys text[], capacities float8[], per_second float8[], costs float8[], at timestamptz)
RETURNS float8
LANGUAGE plpgsql AS $$
DECLARE
  n integer := coalesce(array_length(keys, 1), 0);
  available float8[] := '{}';
  wait float8 := 0;
  bucket record;
  have float8;
BEGIN
  FOR i IN 1..n LOOP
    INSERT INTO pop_rate_buckets (bucket_key, tokens, updated_at) VALUES (keys[i], capacities[i], at)
      ON CONFLICT (bucket_key) DO NOTHING;
    SELECT tokens, updated_at INTO bucket FROM pop_rate_buckets WHERE bucket_key = keys[i] FOR UPDATE;
    have := least(capacities[i],
      bucket.tokens + per_second[i] * greatest(0, extract(epoch FROM (at - bucket.updated_at))));
    available := available || have;
    -- A hair of tolerance: refills are sums of float fractions (10 / 60 s).
    IF have + 1e-9 < costs[i] THEN
      wait := greatest(wait, (costs[i] - have) / per_second[i]);
    END IF;
  END LOOP;
  IF wait > 0 THEN
    RETURN wait;
  END IF;
  FOR i IN 1..n LOOP
    UPDATE pop_rate_buckets SET tokens = available[i] - costs[i], updated_at = greatest(updated_at, at)
     WHERE bucket_key = keys[i];
  END LOOP;
  RETURN 0;
END
$$;
