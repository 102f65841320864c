-- A batch updates every count row of its player it counts plays for: up to one per approval it played that day
-- (20 in the benchmark's batches), and a player's rows of a day were inserted together, so they share a page or
-- two. With fillfactor 70 such a page had room for about 16 new row versions: the rest of the batch's updates were
-- not HOT and each added an entry to the three indexes of play_counts (the benchmark measured 5.7 updates a batch
-- in 16 so, about 9 % of PostgreSQL's CPU a batch in index inserts and their clean-up). At 50 a page of about 28
-- rows keeps room for about as many new versions. The cost is disk: play_counts holds a row per player, day and
-- approval, one or two in a hundred of the bytes of pop_records, which holds a row per play.
-- Pages already written keep their layout; the room is kept on the pages written from now on.
ALTER TABLE play_counts SET (fillfactor = 50);
