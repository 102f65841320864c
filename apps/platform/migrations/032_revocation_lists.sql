-- Signed revocation lists (DESIGN.md section 4): version 1 is published with the first revocation, each later
-- revocation publishes version n+1 holding every revoked approval. The newest is public at
-- {verify_url}/v1/revocations.json.

CREATE TABLE revocation_lists (
  version    integer PRIMARY KEY CHECK (version >= 1),
  issued_at  timestamptz NOT NULL,
  -- {"version", "issued_at", "revoked": [{"approval_number", "revoked_at"}]}; signed as its canonical JSON.
  body       jsonb NOT NULL,
  -- base64 of the CMS SignedData (DER) over the canonical JSON of body.
  signature  text NOT NULL
);
