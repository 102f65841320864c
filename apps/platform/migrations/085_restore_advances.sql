-- Numbers skipped after a restore (src/backup/advance.ts, docs/backup-restore.md). A restored database has forgotten
-- everything made after its backup, but not the world: players hold the revocation lists published since, envelopes
-- carry the approval numbers issued since. `platform restore` skips every yearly serial and the revocation list's
-- version past anything that lost interval could have used, in one transaction, and records here what it did: the
-- audit record of the restore, and the floor the next revocation list's version is taken above.

CREATE TABLE restore_advances (
  id                             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- When the restored database's backup was taken (pg_backup_stop): what was made after it was lost.
  backup_taken_at                timestamptz NOT NULL,
  restored_at                    timestamptz NOT NULL,
  -- The newest revocation list the backup held (0: none) and the version the next one is published above.
  revocation_list_version_before integer NOT NULL CHECK (revocation_list_version_before >= 0),
  revocation_list_version_floor  integer NOT NULL,
  -- [{"series": "approval", "year": 2026, "before": 3, "after": 1003}, ...]: number_counters' rows as advanced.
  serials                        jsonb NOT NULL,
  CHECK (revocation_list_version_floor > revocation_list_version_before)
);
