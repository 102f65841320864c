-- Checkpoints of the public ledger and their witness cosignatures (issue 23, "An anchored ledger";
-- docs/ledger-witnesses.md). A checkpoint is a C2SP signed note (c2sp.org/tlog-checkpoint) of the ledger head after
-- a block is digested: origin, size (the block height), root hash (the block digest), signed by the ledger key.

CREATE TABLE ledger_checkpoints (
  -- One checkpoint per block, kept for good: the earlier ones stay published.
  size       integer PRIMARY KEY REFERENCES ledger_blocks (block_height),
  origin     text NOT NULL,
  -- The block digest at that height (hex); the note carries it in base64.
  root_hash  text NOT NULL CHECK (root_hash ~ '^[0-9a-f]{64}$'),
  -- The note text and the ledger key's signature line, exactly as published.
  note       text NOT NULL,
  made_at    timestamptz NOT NULL
);

-- Cosignatures (c2sp.org/tlog-cosignature v1) witnesses returned for a checkpoint, as the lines they sent.
CREATE TABLE ledger_cosignatures (
  size         integer NOT NULL REFERENCES ledger_checkpoints (size),
  witness      text NOT NULL,
  key_id       text NOT NULL CHECK (key_id ~ '^[0-9a-f]{8}$'),
  line         text NOT NULL,
  -- The cosignature's own timestamp (POSIX seconds, as the witness signed it).
  cosigned_at  timestamptz NOT NULL,
  received_at  timestamptz NOT NULL,
  PRIMARY KEY (size, witness, key_id)
);

-- What the platform knows of each configured witness: the size it last cosigned (tlog-witness "old size"), and the
-- backoff of a witness that does not answer. Keyed by the witness's vkey, so a new URL keeps the state.
CREATE TABLE ledger_witnesses (
  vkey              text PRIMARY KEY,
  name              text NOT NULL,
  url               text NOT NULL,
  cosigned_size     integer NOT NULL DEFAULT 0 CHECK (cosigned_size >= 0),
  last_cosigned_at  timestamptz,
  failures          integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
  next_attempt_at   timestamptz,
  last_error        text
);

-- DESIGN.md section 6: "anchored (the digest was also published outside the platform)": the size of the first
-- checkpoint at or above the block that a quorum of witnesses cosigned.
ALTER TABLE ledger_blocks ADD COLUMN anchored_by integer;
ALTER TABLE ledger_blocks ADD CONSTRAINT ledger_blocks_anchored
  CHECK ((status = 'anchored') = (anchored_by IS NOT NULL) AND (anchored_by IS NULL OR anchored_by >= block_height));
