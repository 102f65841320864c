-- RFC 3161 timestamps of the ledger's daily blocks (issue 23, "Optional timestamps"; src/ledger/timestamp.ts). With
-- LEDGER_TSA_URL set, every digested block's digest is sent to that time-stamping authority (TSA); its token proves
-- that the digest, and so the whole chain of blocks up to it, existed at the token's genTime. A TSA that does not
-- answer only delays the token: a row here waits with a backoff, sealing and digesting never wait for it.

CREATE TABLE ledger_block_timestamps (
  day              date PRIMARY KEY REFERENCES ledger_blocks (day),
  -- The block digest sent as the messageImprint (SHA-256), as the block had it when the row was made.
  digest           text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
  -- The token (DER ContentInfo of the TSA's SignedData over a TSTInfo), checked before it is stored; NULL until then.
  token            bytea,
  -- TSTInfo genTime of the token.
  gen_time         timestamptz,
  tsa_url          text,
  tsa_subject      text,
  stamped_at       timestamptz,
  -- Requests made for this block, the next one not before next_attempt_at (backoff; also a lease while one runs).
  attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at  timestamptz NOT NULL,
  last_error       text,
  CHECK ((token IS NULL) = (gen_time IS NULL)),
  CHECK ((token IS NULL) = (stamped_at IS NULL))
);

-- The job's question: blocks without a token whose next attempt is due.
CREATE INDEX ledger_block_timestamps_due ON ledger_block_timestamps (next_attempt_at) WHERE token IS NULL;

-- A stored token is never changed or removed (it is published; a verifier may have kept it).
CREATE FUNCTION ledger_block_timestamps_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF OLD.token IS NOT NULL THEN
      RAISE EXCEPTION 'the timestamp of ledger block % is published and is kept', OLD.day
        USING ERRCODE = 'check_violation';
    END IF;
    RETURN OLD;
  END IF;
  IF OLD.token IS NOT NULL AND (NEW.token IS DISTINCT FROM OLD.token OR NEW.gen_time IS DISTINCT FROM OLD.gen_time
       OR NEW.digest IS DISTINCT FROM OLD.digest) THEN
    RAISE EXCEPTION 'the timestamp of ledger block % is published and is kept', OLD.day
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER ledger_block_timestamps_kept BEFORE UPDATE OR DELETE ON ledger_block_timestamps
  FOR EACH ROW EXECUTE FUNCTION ledger_block_timestamps_kept();
