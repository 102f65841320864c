-- Which files of the media folder a row still names (src/media/repository.ts): a replaced draft's file is removed
-- once no submission of any organisation names its hash, and the sweep asks the same of every old content file. The
-- index of migration 030 starts with the organisation, so "WHERE media_sha256 = $1" without one read every row; a
-- hash index, as approvals has (migration 031), answers the equality alone.
CREATE INDEX submission_media_sha256_hash ON submission_media USING hash (media_sha256);
