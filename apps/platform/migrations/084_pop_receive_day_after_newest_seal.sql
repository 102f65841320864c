-- A batch is never stored under a day that will never be sealed (found in review, 29 November 2026).
--
-- pop_open_receive_day (migration 064) moved a batch forward only while its wanted day itself had a seal. Seals run
-- without gaps from the first one on, so a day BEFORE the first seal is never sealed, and a batch stored under it (by
-- an instance whose clock runs days behind: a dead RTC, NTP not yet synced; the CMS channel has no ts window) was
-- answered 200, counted, and in no seal: "every stored batch is in exactly one seal" broken.
--
-- Every day up to the newest seal is either sealed or can never be: a batch wanting such a day is stored under the
-- day after the newest seal, the first that will be. The lock protocol is unchanged: the shared lock of the day chosen
-- is taken first, then the seals are looked at (a day is sealed only in order, after its predecessor, and its sealing
-- takes its lock exclusive, so no seal at or after the day chosen can be made while this transaction holds it).

CREATE OR REPLACE FUNCTION pop_open_receive_day(wanted date) RETURNS date
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  open date := wanted;
  newest date;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pop_open_receive_day needs READ COMMITTED, not %', current_setting('transaction_isolation');
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

-- The last line of defence refuses a batch written under, or moved into, a day at or before the newest seal, not only
-- under a sealed day. (A change to a batch is still refused when its own day is sealed, as before.)
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
  PERFORM pg_advisory_xact_lock_shared(pop_receive_day_lock_class(), NEW.receive_day - DATE '2000-01-01');
  IF EXISTS (SELECT 1 FROM stats_seals s WHERE s.day >= NEW.receive_day) THEN
    RAISE EXCEPTION 'receive day % is sealed, or before the newest seal', NEW.receive_day USING ERRCODE = 'PSEAL';
  END IF;
  RETURN NEW;
END
$$;
