-- Queue lag (the console's fleet list; docs/decisions.md) needs the newest time the records of a device's newest
-- batch carry. Migration 061 read it from pop_records through a partial index on batch_id: 50 index entries for a
-- 50-event batch, on the hottest write path there is. The platform now writes that time on the batch row itself
-- (the newest end, start or at of the records taken from the batch; null when none has one), and the index goes.
ALTER TABLE pop_batches ADD COLUMN newest_record_at timestamptz;

UPDATE pop_batches b
   SET newest_record_at = r.newest
  FROM (SELECT receive_day, batch_id, max(greatest(end_at, start_at, at)) AS newest
          FROM pop_records
         WHERE player_key LIKE 'device:%'
         GROUP BY receive_day, batch_id) r
 WHERE b.owner LIKE 'device:%' AND b.receive_day = r.receive_day AND b.id = r.batch_id;

DROP INDEX pop_records_device_batch;
