-- Blocks of the public ledger (DESIGN.md section 6): one per Asia/Almaty day, digested after the day ends. The
-- leaves themselves are ledger_leaves (migration 033).

CREATE TABLE ledger_blocks (
  day            date PRIMARY KEY,
  -- Blocks follow each other day by day; the first has no previous block.
  prev_day       date UNIQUE REFERENCES ledger_blocks (day),
  -- DESIGN.md section 6: "block_height counts from 1".
  block_height   integer NOT NULL UNIQUE CHECK (block_height >= 1),
  leaf_count     integer NOT NULL CHECK (leaf_count >= 0),
  -- Merkle root over the leaf hashes in block order (SHA-256 of nothing for an empty block).
  merkle_root    text NOT NULL CHECK (merkle_root ~ '^[0-9a-f]{64}$'),
  -- DESIGN.md section 6: "anchor_sha256 is the previous block's digest (64 zeros for the first)".
  anchor_sha256  text NOT NULL CHECK (anchor_sha256 ~ '^[0-9a-f]{64}$'),
  -- SHA-256 of the canonical JSON of {v:1, day, block_height, leaf_count, merkle_root, prev_digest}.
  digest         text NOT NULL UNIQUE CHECK (digest ~ '^[0-9a-f]{64}$'),
  -- DESIGN.md section 6: "Status values: digested, anchored".
  status         text NOT NULL DEFAULT 'digested' CHECK (status IN ('digested', 'anchored')),
  digested_at    timestamptz NOT NULL,
  CHECK (prev_day IS NULL OR prev_day = day - 1),
  CHECK ((prev_day IS NULL) = (block_height = 1)),
  CHECK ((block_height = 1) = (anchor_sha256 = repeat('0', 64)))
);
CREATE UNIQUE INDEX ledger_blocks_one_first ON ledger_blocks ((true)) WHERE prev_day IS NULL;

-- Which leaves a block holds, in order. Normally the leaves recorded on the block's day; a leaf that committed
-- after its day's block was digested (a transaction that straddled midnight) goes into the next block rather than
-- changing a digested one. A leaf is in at most one block.
CREATE TABLE ledger_block_leaves (
  leaf_id   bigint PRIMARY KEY REFERENCES ledger_leaves (id),
  day       date NOT NULL REFERENCES ledger_blocks (day),
  position  integer NOT NULL CHECK (position >= 0),
  UNIQUE (day, position)
);
