-- The agent channels' shared reading query (src/pop/batch-context.ts, findDevicesForTelemetry) as a function whose
-- query always runs on its generic plan, in one round trip. PostgreSQL plans a named statement anew at every
-- execution for as long as its custom plans look cheaper than its generic one, which they do when a lookup holds one
-- or two devices (batches arriving spread out: the usual case of a city's players), about 0.6 ms of planning a query
-- (docs/pop-ingestion.md, "Plans"). The statement used to get its generic plan from a read-only transaction of its
-- own (BEGIN READ ONLY; SET LOCAL plan_cache_mode), three round trips a lookup; a function's SET clause gives it
-- the setting for its own execution only, and PL/pgSQL keeps its plan for the session.
--
-- Per device: its row, its structure's code, the keys accepted at the batch's time, the batch stored under its
-- batch_seq, its mark, and whether it has ever sent a service.pop/1 batch; on the first row only, every approval of
-- `numbers` that was issued, as [number, cache_version, read], `read` only for those of `in_full` (media, first and
-- last day, revocation, whether the list is all its structures, the structures: all of them up to `kept`, beyond
-- only those of the lookup's devices). The platform keeps approvals' facts by cache_version (migration 080).
CREATE FUNCTION pop_devices_for_telemetry(
  device_ids uuid[], batch_seqs bigint[], nows timestamptz[], numbers text[], in_full text[], kept integer)
RETURNS TABLE (n bigint, id uuid, revoked_at timestamptz, structure_id uuid, structure_code text, keys text[],
               existing_sha256 text, existing_answer jsonb, high_water_seq bigint, newest_play_start timestamptz,
               had_pop_batch boolean, approvals json)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH q AS (
    SELECT * FROM unnest(device_ids, batch_seqs, nows) WITH ORDINALITY AS q(device_id, batch_seq, now, n)
  )
  SELECT q.n, d.id, d.revoked_at, d.structure_id, s.code,
         ARRAY(SELECT k.public_key_spki FROM device_keys k
                WHERE k.device_id = d.id AND (k.accepted_until IS NULL OR k.accepted_until > q.now)
                ORDER BY k.registered_at DESC),
         b.body_sha256, b.answer, p.high_water_seq, p.newest_play_start,
         -- OFFSET 0 keeps this a probe of the owner's index per device: without it the planner may hash the
         -- subquery, a scan of every agent batch stored for every lookup.
         EXISTS (SELECT 1 FROM pop_batches x
                  WHERE x.owner = 'device:' || d.id::text AND x.channel IN ('agent', 'cert')
                 OFFSET 0),
         -- Once, on one row (an uncorrelated subquery is computed once, when first asked for).
         CASE WHEN row_number() OVER () = 1 THEN (
           SELECT json_agg(json_build_array(
                    a.number, a.cache_version::text,
                    CASE WHEN a.number = ANY (in_full) THEN (
                      SELECT json_build_array(a.media_sha256, a.valid_from::text, a.valid_until::text, a.revoked_at,
                                              w.n <= kept,
                                              ARRAY(SELECT st.structure_id FROM approval_structures st
                                                     WHERE st.approval_id = a.id
                                                       AND (w.n <= kept OR st.structure_id = ANY (
                                                              ARRAY(SELECT d3.structure_id FROM devices d3
                                                                     WHERE d3.id = ANY (device_ids))))))
                        FROM (SELECT count(*) AS n
                                FROM (SELECT FROM approval_structures st
                                       WHERE st.approval_id = a.id LIMIT kept + 1) l) w)
                    END))
             FROM approvals a WHERE a.number = ANY (numbers))
         END
    FROM q
    JOIN devices d ON d.id = q.device_id
    JOIN structures s ON s.id = d.structure_id
    LEFT JOIN pop_batches b ON b.owner = 'device:' || d.id::text AND b.batch_seq = q.batch_seq
    LEFT JOIN pop_players p ON p.player_key = 'device:' || d.id::text;
END
$$;
