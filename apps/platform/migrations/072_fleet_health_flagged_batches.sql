-- Fleet health over time (issue 17 item 4; src/reports/fleet-health.ts): for each device and hour or day, did the
-- device report a play with the screen off (flag screen_off, listed in the batch answer's items)? Only batches with a
-- flagged record can say so, and they are few: this partial index holds those alone, so the question is a probe of a
-- device's flagged batches in the bucket instead of a read of all its batches. A clean batch pays one test of its
-- answer's "flagged" count on insert and adds no index entry.
CREATE INDEX pop_batches_flagged_owner_received ON pop_batches (owner, received_at)
  WHERE (answer->>'flagged')::int > 0;
