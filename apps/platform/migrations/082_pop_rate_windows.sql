-- spec Limits: "2 000 000 records an hour per organisation; ... beyond them 429 rate_limited with Retry-After".
-- A token bucket of 2 000 000 refilled at 2 000 000 an hour (migration 020) let an organisation that had been quiet
-- pass nearly 4 000 000 records in one hour: its full bucket, then the hour's refill. The spec gives the batch and
-- call limits a burst and this one none, so it is a window: at most the limit in any hour.
--
-- A window row keeps what was taken per minute, newest first: used[1] in newest_minute (minutes since 1970 UTC),
-- used[k] in newest_minute - k + 1, for span + 1 minutes. A take at minute m counts the minutes m - span .. m, so any
-- span minutes that end at a take are inside what it counted (the window is exact to the minute, and at most one
-- minute stricter). The time is a parameter, never now() (tests move the clock); an instance whose clock is behind
-- counts from the newest minute a take has written.
CREATE TABLE pop_rate_windows (
  window_key     text PRIMARY KEY,
  newest_minute  bigint NOT NULL,
  used           bigint[] NOT NULL
) WITH (fillfactor = 50);

-- The organisation buckets the windows replace (src/pop/rate-limits.ts, cmsLimits).
DELETE FROM pop_rate_buckets WHERE bucket_key LIKE 'cms-organisation:%';

-- Seconds from `at` until `cost` fits a window of `span` minutes and limit `lim` whose row holds `newest` and `used`
-- (NULL: no row yet); 0 when it fits now. Only minutes leaving the window make room, the oldest first.
CREATE FUNCTION pop_window_wait(newest bigint, used bigint[], span integer, lim float8, cost float8, at timestamptz)
RETURNS float8
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  m bigint := greatest(floor(extract(epoch FROM at) / 60)::bigint, coalesce(newest, 0));
  n integer := coalesce(array_length(used, 1), 0);
  total float8 := 0;
BEGIN
  FOR i IN 1..n LOOP
    IF newest - i + 1 >= m - span THEN
      total := total + used[i];
    END IF;
  END LOOP;
  IF total + cost <= lim THEN
    RETURN 0;
  END IF;
  -- The minute newest - i + 1 leaves the window at the start of minute newest - i + 1 + span + 1.
  FOR i IN REVERSE n..1 LOOP
    IF newest - i + 1 >= m - span THEN
      total := total - used[i];
      IF total + cost <= lim THEN
        RETURN greatest(((newest - i + 1 + span + 1) * 60)::float8 - extract(epoch FROM at)::float8, 0.001);
      END IF;
    END IF;
  END LOOP;
  -- More than the limit at once: never; a whole window is the honest answer (callers never ask it).
  RETURN span * 60;
END
$$;

-- Takes the rate tokens of the named buckets (the arithmetic of pop_take_tokens, migration 020) and `wcosts` from
-- every named window, or nothing at all: returns 0 when all were granted, else the seconds until all of them would
-- be. Rows are locked buckets first, then windows, each in the order given (callers sort the keys), so instances
-- meet without deadlocking.
CREATE FUNCTION pop_take_limits(keys text[], capacities float8[], per_second float8[], costs float8[],
                                wkeys text[], wspans integer[], wlimits float8[], wcosts float8[], at timestamptz)
RETURNS float8
LANGUAGE plpgsql AS $$
DECLARE
  n integer := coalesce(array_length(keys, 1), 0);
  wn integer := coalesce(array_length(wkeys, 1), 0);
  available float8[] := '{}';
  wait float8 := 0;
  bucket record;
  win record;
  have float8;
  m bigint := floor(extract(epoch FROM at) / 60)::bigint;
  now_m bigint;
  shift bigint;
  kept bigint[];
BEGIN
  FOR i IN 1..n LOOP
    INSERT INTO pop_rate_buckets (bucket_key, tokens, updated_at) VALUES (keys[i], capacities[i], at)
      ON CONFLICT (bucket_key) DO NOTHING;
    SELECT tokens, updated_at INTO bucket FROM pop_rate_buckets WHERE bucket_key = keys[i] FOR UPDATE;
    have := least(capacities[i],
      bucket.tokens + per_second[i] * greatest(0, extract(epoch FROM (at - bucket.updated_at))));
    available := available || have;
    IF have + 1e-9 < costs[i] THEN
      wait := greatest(wait, (costs[i] - have) / per_second[i]);
    END IF;
  END LOOP;
  FOR i IN 1..wn LOOP
    INSERT INTO pop_rate_windows (window_key, newest_minute, used) VALUES (wkeys[i], m, '{}')
      ON CONFLICT (window_key) DO NOTHING;
    SELECT newest_minute, used INTO win FROM pop_rate_windows WHERE window_key = wkeys[i] FOR UPDATE;
    wait := greatest(wait, pop_window_wait(win.newest_minute, win.used, wspans[i], wlimits[i], wcosts[i], at));
  END LOOP;
  IF wait > 0 THEN
    RETURN wait;
  END IF;
  FOR i IN 1..n LOOP
    UPDATE pop_rate_buckets SET tokens = available[i] - costs[i], updated_at = greatest(updated_at, at)
     WHERE bucket_key = keys[i];
  END LOOP;
  FOR i IN 1..wn LOOP
    SELECT newest_minute, used INTO win FROM pop_rate_windows WHERE window_key = wkeys[i];
    now_m := greatest(m, win.newest_minute);
    shift := least(now_m - win.newest_minute, wspans[i] + 1);
    -- Minutes since the newest one open as zeros in front; what falls out of span + 1 minutes goes.
    kept := array_fill(0::bigint, ARRAY[shift::integer]) || win.used[1:(wspans[i] + 1 - shift)::integer];
    kept[1] := coalesce(kept[1], 0) + wcosts[i]::bigint;
    UPDATE pop_rate_windows SET newest_minute = now_m, used = kept WHERE window_key = wkeys[i];
  END LOOP;
  RETURN 0;
END
$$;
