-- A CMS batch's body is kept as the gzip bytes that came over the wire when it came gzip'd (and they are smaller):
-- the decompressed bytes (the bytes signed, hashed into body_sha256 and sealed) are exactly what gunzip gives back
-- from them, and every reader of a body (the seal export) restores them. Storing the decompressed bytes instead
-- wrote several times as much to the table, its TOAST and the WAL for every batch (docs/decisions.md "Proof of play:
-- ingestion at speed"). body_size is the length of the decompressed bytes.
ALTER TABLE pop_batches
  ADD COLUMN body_encoding text NOT NULL DEFAULT 'identity' CHECK (body_encoding IN ('identity', 'gzip')),
  ADD COLUMN body_size integer CHECK (body_size >= 0),
  ADD CONSTRAINT pop_batches_body_size CHECK (body_encoding = 'identity' OR body_size IS NOT NULL);
