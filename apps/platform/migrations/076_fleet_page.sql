-- The fleet page of a city's fleet (issue 22, item 2: "with 10,000 enrolled devices the page's first render and each
-- filter change stay under a second"; src/devices/fleet.ts). Counting the fleet by state and filtering on "screen off"
-- read the newest mode_change record of every device. Through pop_records_events (migration 020: every reject,
-- mode_change and tamper event of the device, by receive day) that read all of a device's events of its newest day
-- and sorted them: a player that refuses a creative on each loop sends hundreds a day. This partial index holds the
-- mode changes only (a few a day per device), in the order the fleet list reads them, so the newest is one step
-- backwards. A partial index on the partitioned table: every month partition, present and future, gets it.
CREATE INDEX pop_records_mode_change ON pop_records (player_key, receive_day, batch_id, record_index)
  WHERE kind = 'mode_change';
