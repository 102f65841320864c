-- The disk state of each player on the fleet list (issue "A player that runs for years on a small disk"; the agent's
-- apps/agent/README.md "Retention and disk space"). The agent reports it in the detail of a mode_change record, a kind
-- the spec's record table already lists ("detail: further facts of a reject, mode_change or tamper"), stored as sent:
-- {"from", "to", "storage": {"state": "ok" | "low" | "full", "free_bytes"}}. Only a change of that state, or a
-- record written while it is not ok, carries it, so this index holds a few rows per device: the fleet list finds a
-- device's newest in one step backwards, and a device that never reported one at once, however many other events it
-- sent. (A partial index on the partitioned table: every month partition, present and future, gets it.)
CREATE INDEX pop_records_storage ON pop_records (player_key, receive_day, batch_id, record_index)
  WHERE kind = 'mode_change' AND (detail -> 'storage') IS NOT NULL;
