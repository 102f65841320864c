-- Leaves of the public ledger (DESIGN.md section 6), in order of recording (id). Each Almaty day becomes one
-- block later (blocks and digests come in their own migrations). Leaf object:
-- {kind, approval_number, manifest_sha256, signed_at, revoked_at}.

CREATE TABLE ledger_leaves (
  id               bigserial PRIMARY KEY,
  recorded_at      timestamptz NOT NULL,
  -- Asia/Almaty day of recorded_at: the block the leaf belongs to.
  day              date NOT NULL,
  kind             text NOT NULL CHECK (kind IN ('approval', 'revocation', 'stats_seal')),
  approval_number  text,
  manifest_sha256  text NOT NULL CHECK (manifest_sha256 ~ '^[0-9a-f]{64}$'),
  signed_at        timestamptz NOT NULL,
  revoked_at       timestamptz,
  CHECK ((kind = 'stats_seal') = (approval_number IS NULL)),
  CHECK ((kind = 'revocation') = (revoked_at IS NOT NULL))
);
CREATE INDEX ledger_leaves_day ON ledger_leaves (day, id);
