-- Review of submissions (issue "Approvals"): the uploaded media file, the review states and the facts of a
-- decision. States: draft -> in_review -> approved | rejected (an approval, not the submission, is revoked).

ALTER TABLE submissions
  ADD COLUMN sent_at        timestamptz,
  ADD COLUMN decided_at     timestamptz,
  ADD COLUMN reject_reason  text;

ALTER TABLE submissions
  ADD CONSTRAINT submissions_state CHECK (state IN ('draft', 'in_review', 'approved', 'rejected'));

-- The media file of a submission (one per submission; a new upload replaces it while the draft is open).
-- The file itself is kept by content at ${dataDir}/media/<media_sha256>.
CREATE TABLE submission_media (
  submission_id    uuid PRIMARY KEY REFERENCES submissions (id) ON DELETE CASCADE,
  -- The submitting organisation (submissions never change owner), so a lookup finds the caller's own
  -- pending and rejected files from the hash index alone.
  organisation_id  uuid NOT NULL REFERENCES organisations (id),
  media_sha256   text NOT NULL CHECK (media_sha256 ~ '^[0-9a-f]{64}$'),
  media_type     text NOT NULL CHECK (media_type IN ('image/png', 'image/jpeg', 'image/webp', 'video/mp4')),
  size_bytes     bigint NOT NULL CHECK (size_bytes > 0),
  width          integer NOT NULL CHECK (width > 0),
  height         integer NOT NULL CHECK (height > 0),
  -- null for images
  duration_ms    integer CHECK (duration_ms >= 0),
  uploaded_at    timestamptz NOT NULL
);
-- Lookups find the caller's own pending and rejected files: organisation first, so the probes of one call
-- stay within the caller's part of the index.
CREATE INDEX submission_media_organisation_sha256 ON submission_media (organisation_id, media_sha256);
