-- Every stored batch belongs to exactly one seal (issue "Trust under attack", item 1; docs/decisions.md "Seals: every
-- counted batch in exactly one seal").
--
-- spec: "a day is sealed once, after it is over, so a batch that arrives late belongs to the day it arrived".
-- Until now the receive day was fixed when a request arrived, and the sealer waited only for transactions already
-- writing (LOCK TABLE ... IN SHARE MODE): a batch whose transaction reached its INSERT after the seal was made (held
-- up on a lock, or stored by an instance whose clock runs behind) was stored under a day already sealed, and no seal
-- would ever cover it.
--
-- Now each Asia/Almaty receive day has an advisory lock. A transaction that stores batches takes the lock of each of
-- their days SHARED, first thing, and looks at stats_seals; the sealing of a day takes the same lock EXCLUSIVE
-- before its snapshot. So the seal waits until every transaction writing its day has committed (and covers it), and
-- a transaction that comes later waits for the seal, sees it, and stores its batches under the next day that is not
-- sealed: they arrived, as far as counting goes, after the day was closed. Writers never wait for each other.
--
-- Advisory locks of two int4 keys are a space of their own (the single-bigint locks of migrations, sealing and
-- bootstrap cannot meet them): classid 0x5EA1DA1, objid the day's number of days since 2000-01-01.

CREATE FUNCTION pop_receive_day_lock_class() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT x'5EA1DA1'::integer $$;

-- The first day from `wanted` on that has no seal, after taking the shared lock of every day looked at (the caller's
-- transaction holds them to its end). READ COMMITTED only: each statement of this volatile function then reads a
-- fresh snapshot, so a seal committed while the lock was awaited is seen.
CREATE FUNCTION pop_open_receive_day(wanted date) RETURNS date
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  open date := wanted;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pop_open_receive_day needs READ COMMITTED, not %', current_setting('transaction_isolation');
  END IF;
  LOOP
    PERFORM pg_advisory_xact_lock_shared(pop_receive_day_lock_class(), open - DATE '2000-01-01');
    EXIT WHEN NOT EXISTS (SELECT 1 FROM stats_seals s WHERE s.day = open);
    open := open + 1;
  END LOOP;
  IF open <> wanted THEN
    -- Rare (a batch held up across midnight): the next day may open a month without a partition yet.
    PERFORM pop_records_partition(open);
  END IF;
  RETURN open;
END
$$;

-- pop_open_receive_day for several days at once, locked in ascending order (every writer locks in that order).
CREATE FUNCTION pop_open_receive_days(wanted date[]) RETURNS TABLE (wanted_day date, open_day date)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  day date;
BEGIN
  FOR day IN SELECT DISTINCT d FROM unnest(wanted) AS d ORDER BY d LOOP
    wanted_day := day;
    open_day := pop_open_receive_day(day);
    RETURN NEXT;
  END LOOP;
END
$$;

-- The last line of defence, whatever path inserts a batch: a batch row is never written under, nor moved into or out
-- of, a sealed day, nor changed or deleted once its day is sealed (the seal's root covers its leaf). The shared lock
-- is taken here too, so a path that forgot pop_open_receive_day is still serialised with the sealer; for the
-- platform's own writers it is already held and costs a lookup in the transaction's own lock table.
CREATE FUNCTION pop_batches_unsealed_day() RETURNS trigger
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
  IF EXISTS (SELECT 1 FROM stats_seals s WHERE s.day = NEW.receive_day) THEN
    RAISE EXCEPTION 'receive day % is sealed', NEW.receive_day USING ERRCODE = 'PSEAL';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER pop_batches_unsealed_day_insert BEFORE INSERT ON pop_batches
  FOR EACH ROW EXECUTE FUNCTION pop_batches_unsealed_day();
-- What a seal covers: the leaf fields, the body and its count. The answer and newest_record_at are not sealed.
CREATE TRIGGER pop_batches_unsealed_day_change
  BEFORE UPDATE OF id, owner, batch_seq, body, body_sha256, body_encoding, body_size, received_at, receive_day,
                   record_count
  ON pop_batches FOR EACH ROW EXECUTE FUNCTION pop_batches_unsealed_day();
CREATE TRIGGER pop_batches_unsealed_day_delete BEFORE DELETE ON pop_batches
  FOR EACH ROW EXECUTE FUNCTION pop_batches_unsealed_day();

-- The sealing of `day`: the exclusive side of the lock, held by the session across the sealing transaction (taken
-- before its REPEATABLE READ snapshot, released after its COMMIT).
CREATE FUNCTION pop_seal_day_lock(day date) RETURNS void
LANGUAGE sql AS $$ SELECT pg_advisory_lock(pop_receive_day_lock_class(), day - DATE '2000-01-01') $$;

CREATE FUNCTION pop_seal_day_unlock(day date) RETURNS boolean
LANGUAGE sql AS $$ SELECT pg_advisory_unlock(pop_receive_day_lock_class(), day - DATE '2000-01-01') $$;
