-- Room on every page for updated row versions (HOT updates: no new index entries), for the rows that every batch
-- updates: a device's count rows of the day, its high-water mark and its rate bucket.
ALTER TABLE play_counts SET (fillfactor = 70);
ALTER TABLE pop_players SET (fillfactor = 70);
ALTER TABLE pop_rate_buckets SET (fillfactor = 50);
