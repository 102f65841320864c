-- Submissions (spec: POST /api/v1/submissions). Media, review and approvals come in later migrations.

CREATE TABLE submissions (
  id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  number                text NOT NULL UNIQUE,
  organisation_id       uuid NOT NULL REFERENCES organisations (id),
  state                 text NOT NULL DEFAULT 'draft',
  advertiser_name       text NOT NULL,
  advertiser_bin        text,
  period_from           date,
  period_to             date,
  category_id           integer,
  channel               text NOT NULL DEFAULT 'direct' CHECK (channel IN ('direct', 'programmatic')),
  fast_track            boolean NOT NULL DEFAULT false,
  external_refs         jsonb,
  declared_daily_plays  jsonb,
  review_due_at         timestamptz,
  created_at            timestamptz NOT NULL,
  updated_at            timestamptz NOT NULL
);
CREATE INDEX submissions_organisation ON submissions (organisation_id, created_at DESC);

CREATE TABLE submission_structures (
  submission_id  uuid NOT NULL REFERENCES submissions (id) ON DELETE CASCADE,
  structure_id   uuid NOT NULL REFERENCES structures (id),
  position       integer NOT NULL,
  PRIMARY KEY (submission_id, structure_id)
);
CREATE INDEX submission_structures_structure ON submission_structures (structure_id);
