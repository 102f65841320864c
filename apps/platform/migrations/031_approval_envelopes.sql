-- Signed approval envelopes (DESIGN.md section 4). The columns of migration 004 keep their meaning (proof of
-- play reads them); these add what was signed. Nullable: approvals written by other means (fixtures of other
-- features) have no envelope.

ALTER TABLE approvals
  -- The exact JSON document served at envelope_url: {"v":1,"body":{...manifest...},"signature":"..."}.
  ADD COLUMN envelope         text,
  -- SHA-256 of the canonical JSON of the manifest (the ledger leaf's manifest_sha256).
  ADD COLUMN manifest_sha256  text CHECK (manifest_sha256 ~ '^[0-9a-f]{64}$'),
  -- Who decided: 'api_key:<id>' or 'session:<id>'.
  ADD COLUMN issued_by        text,
  ADD COLUMN revoked_by       text,
  -- Copies taken at issue, so a lookup of 500 hashes reads approvals alone (docs/approvals.md): the
  -- submitting organisation, the submission number, the covered structure codes (the manifest's list) and
  -- the organisations owning those structures (lookup visibility). A lookup falls back to the joins for
  -- rows written without them. Structures never change owner today; code that ever moves one must refresh
  -- covered_organisation_ids.
  ADD COLUMN organisation_id           uuid REFERENCES organisations (id),
  ADD COLUMN submission_number         text,
  ADD COLUMN structure_codes           text[],
  ADD COLUMN covered_organisation_ids  uuid[];

UPDATE approvals a SET organisation_id = s.organisation_id, submission_number = s.number
  FROM submissions s WHERE s.id = a.submission_id;
UPDATE approvals a SET
  structure_codes = ARRAY(
    SELECT st.code FROM approval_structures aps JOIN structures st ON st.id = aps.structure_id
     WHERE aps.approval_id = a.id ORDER BY st.code),
  covered_organisation_ids = ARRAY(
    SELECT DISTINCT st.organisation_id FROM approval_structures aps JOIN structures st ON st.id = aps.structure_id
     WHERE aps.approval_id = a.id ORDER BY 1);

-- Lookups probe by hash only: a hash index is a third of the B-tree's size (approvals_media stays for
-- proof of play's other queries).
CREATE INDEX approvals_media_sha256_hash ON approvals USING hash (media_sha256);
