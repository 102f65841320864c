-- A play counted once per play_id (issue "Trust under attack", item 6; docs/decisions.md "A play is counted once per
-- play_id").
--
-- spec: play_id is the "Identifier of the play, unique for the player". Until now only seq decided what counts twice
-- ("records at or below the highest number already taken for their player are not counted again"): a CMS that
-- renumbers after a crash resent its plays under new, higher seq numbers and each was counted again. Now a play
-- whose play_id was already counted for its player is refused (play_id_counted).
--
-- An index entry per counted play (one per record on the hottest write path) cost PostgreSQL about as much again as
-- storing the record. Instead:
--  - each player's row keeps the newest start of its counted plays (newest_play_start), moved with its high-water
--    mark. A resent play carries the start it had, at or before that instant; a play that starts after it cannot
--    have been counted, and is looked for nowhere (players show one thing after another: nearly every play);
--  - a batch writes, per player and hour of play start, one row with the 64-bit hashes of the play_ids it counted
--    (pop_play_sets). A play that starts at or before its player's newest start is looked for there, in its hour
--    and the hours beside it. The sets are read after the marks: a play counted meanwhile moved its player's mark,
--    so the batch's compare-and-set fails and it is judged again.

ALTER TABLE pop_players ADD COLUMN newest_play_start timestamptz;

CREATE TABLE pop_play_sets (
  player_key  text NOT NULL,
  -- Hours since 1970-01-01T00:00Z of the plays' start.
  start_hour  integer NOT NULL,
  batch_id    bigint NOT NULL,
  -- hashtextextended(play_id, 0) of each play counted.
  play_keys   bigint[] NOT NULL
);
CREATE INDEX pop_play_sets_player_hour ON pop_play_sets (player_key, start_hour);

-- The plays counted before this migration: their sets and each player's newest start, so that a play counted before
-- the upgrade is not counted again after it.
INSERT INTO pop_play_sets (player_key, start_hour, batch_id, play_keys)
SELECT player_key, floor(extract(epoch FROM start_at) / 3600)::integer, batch_id,
       array_agg(hashtextextended(play_id, 0) ORDER BY record_index)
  FROM pop_records
 WHERE kind = 'play' AND play_id IS NOT NULL AND start_at IS NOT NULL
 GROUP BY player_key, floor(extract(epoch FROM start_at) / 3600)::integer, batch_id;

UPDATE pop_players p
   SET newest_play_start = r.newest
  FROM (SELECT player_key, max(start_at) AS newest FROM pop_records
         WHERE kind = 'play' AND play_id IS NOT NULL GROUP BY player_key) r
 WHERE p.player_key = r.player_key;
