-- The first seal of a platform waits for every writer that looked before it was made (found in review, 29 November
-- 2026; completes migration 084).
--
-- Before any seal exists the chain's first day is the earliest activity the sealer can see. A writer storing under
-- an earlier day (an instance whose clock runs days behind) that had not committed yet was invisible to it and took
-- only its own day's lock, which the first seal does not take: the chain then began after that day, and the batch
-- was in no seal. Now, while no seal exists, a writer takes a lock of its own shared (before any day's lock: one order
-- for all), and the making of the first seal takes it exclusive before its snapshot. So the first seal sees every
-- batch of a writer that looked before it (and starts its chain early enough: the sealer checks), and a writer that
-- comes later waits for it, sees it, and stores under the day after it (migration 084).

-- The key of that lock in the receive days' lock space (no day is that far before 2000-01-01).
CREATE FUNCTION pop_first_seal_lock_key() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT -2147483648 $$;

CREATE OR REPLACE FUNCTION pop_open_receive_day(wanted date) RETURNS date
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  open date := wanted;
  newest date;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pop_open_receive_day needs READ COMMITTED, not %', current_setting('transaction_isolation');
  END IF;
  -- Before the first seal: wait for a first seal being made. Once a seal exists it always will, so this costs
  -- nothing after a platform's first day.
  IF NOT EXISTS (SELECT 1 FROM stats_seals) THEN
    PERFORM pg_advisory_xact_lock_shared(pop_receive_day_lock_class(), pop_first_seal_lock_key());
  END IF;
  LOOP
    PERFORM pg_advisory_xact_lock_shared(pop_receive_day_lock_class(), open - DATE '2000-01-01');
    SELECT max(s.day) INTO newest FROM stats_seals s;
    EXIT WHEN newest IS NULL OR newest < open;
    open := newest + 1;
  END LOOP;
  IF open <> wanted THEN
    -- Rare (a batch held up across midnight, a clock days behind): the day may open a month without a partition yet.
    PERFORM pop_records_partition(open);
  END IF;
  RETURN open;
END
$$;

CREATE OR REPLACE FUNCTION pop_batches_unsealed_day() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    IF EXISTS (SELECT 1 FROM stats_seals s WHERE s.day = OLD.receive_day) THEN
      RAISE EXCEPTION 'batch % belongs to the sealed day %', OLD.id, OLD.receive_day USING ERRCODE = 'PSEAL';
    END IF;
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM stats_seals) THEN
    PERFORM pg_advisory_xact_lock_shared(pop_receive_day_lock_class(), pop_first_seal_lock_key());
  END IF;
  PERFORM pg_advisory_xact_lock_shared(pop_receive_day_lock_class(), NEW.receive_day - DATE '2000-01-01');
  IF EXISTS (SELECT 1 FROM stats_seals s WHERE s.day >= NEW.receive_day) THEN
    RAISE EXCEPTION 'receive day % is sealed, or before the newest seal', NEW.receive_day USING ERRCODE = 'PSEAL';
  END IF;
  RETURN NEW;
END
$$;

-- The making of the first seal: the exclusive side, held by the session across the sealing transaction (taken before
-- the day's lock and the snapshot, released after COMMIT).
CREATE FUNCTION pop_first_seal_lock() RETURNS void
LANGUAGE sql AS $$ SELECT pg_advisory_lock(pop_receive_day_lock_class(), pop_first_seal_lock_key()) $$;

CREATE FUNCTION pop_first_seal_unlock() RETURNS boolean
LANGUAGE sql AS $$ SELECT pg_advisory_unlock(pop_receive_day_lock_class(), pop_first_seal_lock_key()) $$;
