-- Daily stats seals (issue "Daily stats seals, the public ledger, and a verifier anyone can run"; spec StatsSeal,
-- GET {verify_url}/v1/stats-seals/{day}; DESIGN.md section 6).

-- The platform's first day (Asia/Almaty), written once by the first scheduler run of any instance. Seals start at
-- the earliest of this day, the first receive day of a batch and the first day of a ledger leaf, so that a platform
-- that has seen nothing yet still seals its (empty) days from its first one.
CREATE TABLE seal_epoch (
  singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  first_day    date NOT NULL,
  recorded_at  timestamptz NOT NULL
);

-- One row per sealed Asia/Almaty receive day. spec: "a day is sealed once, after it is over": the primary key is
-- the last line of defence behind the advisory lock of the sealing transaction.
CREATE TABLE stats_seals (
  day               date PRIMARY KEY,
  -- The seal chain (spec body.prev_seal_sha256): every seal but the first follows the seal of the day before, so
  -- a missed day can never be skipped or sealed out of order.
  prev_day          date UNIQUE REFERENCES stats_seals (day),
  -- When the seal was made (whole seconds: the CMS signingTime has no fraction).
  signed_at         timestamptz NOT NULL CHECK (date_trunc('second', signed_at) = signed_at),
  -- The canonical JSON (RFC 8785) of the body exactly as signed, and its SHA-256 (the next seal's
  -- prev_seal_sha256 and the ledger leaf's manifest_sha256).
  body              bytea NOT NULL,
  body_sha256       text NOT NULL CHECK (body_sha256 ~ '^[0-9a-f]{64}$'),
  -- spec: "CMS signature (PKCS#7, body attached)": the DER ContentInfo; served base64 in JSON, raw with ?format=p7s.
  signature         bytea NOT NULL,
  -- The 'stats_seal' leaf recorded in the ledger in the same transaction (DESIGN.md section 6).
  ledger_leaf_id    bigint NOT NULL UNIQUE REFERENCES ledger_leaves (id),
  CHECK (prev_day IS NULL OR prev_day = day - 1)
);
-- Only one seal starts the chain (its prev_seal_sha256 is 64 zeros).
CREATE UNIQUE INDEX stats_seals_one_first ON stats_seals ((true)) WHERE prev_day IS NULL;
