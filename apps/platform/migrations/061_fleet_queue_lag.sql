-- The console's fleet list (GET /api/v1/console/devices; apps/platform/console/README.md "Fleet"): the newest batch
-- of every device and its queue lag, read per device without scanning the device's whole history.

-- The newest batch of an owner: without this, the lookup read every batch of the device (UNIQUE (owner, batch_seq)
-- gives the rows but not their receive order) and sorted them, for each device of the list.
CREATE INDEX pop_batches_owner_received ON pop_batches (owner, received_at DESC, id DESC);

-- The records of one batch (queue lag = receive time of the device's newest batch minus the newest record time in
-- it). Only device records: queue lag is a device's figure, and the CMS channel's batches of up to 10 000 records do
-- not pay for this index. Batch ids grow with time, so inserts land on the rightmost leaf.
CREATE INDEX pop_records_device_batch ON pop_records (batch_id) WHERE player_key LIKE 'device:%';
