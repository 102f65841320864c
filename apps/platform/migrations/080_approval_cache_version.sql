-- The agent channels keep the facts of the approvals their batches name in each platform process
-- (src/pop/approval-cache.ts) and use them only while the approval's cache_version, read in the lookup's own snapshot,
-- is the one they were read with. So every change of an approval or of the structures it covers gives the approval a
-- new cache_version, whatever made it (the platform, an operator's SQL, a cascade): a number from a sequence, never
-- the same twice, so that a version seen once always stands for the same facts. The sequence belongs to no column:
-- TRUNCATE ... RESTART IDENTITY leaves it alone.
CREATE SEQUENCE approval_cache_version_seq;

ALTER TABLE approvals
  ADD COLUMN cache_version bigint NOT NULL DEFAULT nextval('approval_cache_version_seq');

CREATE FUNCTION approvals_next_cache_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.cache_version := nextval('approval_cache_version_seq');
  RETURN NEW;
END
$$;

CREATE TRIGGER approvals_cache_version BEFORE INSERT OR UPDATE ON approvals
  FOR EACH ROW EXECUTE FUNCTION approvals_next_cache_version();

-- A change of approval_structures touches the approvals whose rows changed, once a statement (an approval is issued
-- with all its structures in one INSERT).
CREATE FUNCTION approval_structures_touch_approvals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    UPDATE approvals SET cache_version = 0;
  ELSIF TG_OP = 'INSERT' THEN
    UPDATE approvals SET cache_version = 0 WHERE id IN (SELECT approval_id FROM new_rows);
  ELSIF TG_OP = 'DELETE' THEN
    UPDATE approvals SET cache_version = 0 WHERE id IN (SELECT approval_id FROM old_rows);
  ELSE
    UPDATE approvals SET cache_version = 0
     WHERE id IN (SELECT approval_id FROM old_rows UNION SELECT approval_id FROM new_rows);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER approval_structures_inserted AFTER INSERT ON approval_structures
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION approval_structures_touch_approvals();
CREATE TRIGGER approval_structures_updated AFTER UPDATE ON approval_structures
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION approval_structures_touch_approvals();
CREATE TRIGGER approval_structures_deleted AFTER DELETE ON approval_structures
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION approval_structures_touch_approvals();
CREATE TRIGGER approval_structures_truncated AFTER TRUNCATE ON approval_structures
  FOR EACH STATEMENT EXECUTE FUNCTION approval_structures_touch_approvals();
