import type { Db, DbClient } from '../db/pool.js';

// Reading what was stored (seals, open data, declared-vs-actual, reports, the console).

export interface PlayCountRow {
  playerKey: string;
  structureId: string;
  /** Almaty day of the play's start, or of receipt when there is no start. */
  day: string;
  approvalNumber: string | null;
  slot: string | null;
  attested: boolean;
  plays: number;
  flagged: number;
}

export interface PlayCountFilter {
  from?: string;
  to?: string;
  structureIds?: readonly string[];
  approvalNumber?: string;
  playerKey?: string;
}

/** Counted plays per player, structure, day and approval (billable) or slot (counted apart). */
export async function playCounts(db: Db | DbClient, filter: PlayCountFilter = {}): Promise<PlayCountRow[]> {
  const { rows } = await db.query<{
    player_key: string;
    structure_id: string;
    day: string;
    approval_number: string | null;
    slot: string | null;
    attested: boolean;
    plays: number;
    flagged: number;
  }>(
    `SELECT player_key, structure_id, day::text AS day, approval_number, slot, attested, plays, flagged
       FROM play_counts
      WHERE ($1::date IS NULL OR day >= $1::date)
        AND ($2::date IS NULL OR day <= $2::date)
        AND ($3::uuid[] IS NULL OR structure_id = ANY($3::uuid[]))
        AND ($4::text IS NULL OR approval_number = $4)
        AND ($5::text IS NULL OR player_key = $5)
      ORDER BY day, player_key, structure_id, approval_number NULLS LAST, slot NULLS LAST, attested`,
    [
      filter.from ?? null,
      filter.to ?? null,
      filter.structureIds ?? null,
      filter.approvalNumber ?? null,
      filter.playerKey ?? null,
    ],
  );
  return rows.map((r) => ({
    playerKey: r.player_key,
    structureId: r.structure_id,
    day: r.day,
    approvalNumber: r.approval_number,
    slot: r.slot,
    attested: r.attested,
    plays: r.plays,
    flagged: r.flagged,
  }));
}

export interface PopEvent {
  batchId: number;
  index: number;
  kind: 'reject' | 'mode_change' | 'tamper';
  seq: number | null;
  at: string | null;
  code: string | null;
  detail: unknown;
  receiveDay: string;
}

/** The reject, mode_change and tamper events a player sent, oldest batch first. */
export async function popEvents(
  db: Db | DbClient,
  playerKey: string,
  filter: { kinds?: readonly string[]; fromReceiveDay?: string; toReceiveDay?: string } = {},
): Promise<PopEvent[]> {
  const { rows } = await db.query<{
    batch_id: number;
    record_index: number;
    kind: PopEvent['kind'];
    seq: number | null;
    at: Date | null;
    code: string | null;
    detail: unknown;
    receive_day: string;
  }>(
    `SELECT batch_id, record_index, kind, seq, at, code, detail, receive_day::text AS receive_day
       FROM pop_records
      WHERE player_key = $1 AND kind <> 'play'
        AND ($2::text[] IS NULL OR kind = ANY($2::text[]))
        AND ($3::date IS NULL OR receive_day >= $3::date)
        AND ($4::date IS NULL OR receive_day <= $4::date)
      ORDER BY batch_id, record_index`,
    [playerKey, filter.kinds ?? null, filter.fromReceiveDay ?? null, filter.toReceiveDay ?? null],
  );
  return rows.map((r) => ({
    batchId: r.batch_id,
    index: r.record_index,
    kind: r.kind,
    seq: r.seq,
    at: r.at?.toISOString() ?? null,
    code: r.code,
    detail: r.detail,
    receiveDay: r.receive_day,
  }));
}

export interface PopQuality {
  flags: { flag: string; records: number }[];
  refusals: { reason: string; records: number }[];
}

/** Flagged records by flag and refused records by reason, over receive days `from` to `to` (the console). */
export async function popQuality(db: Db | DbClient, from: string, to: string): Promise<PopQuality> {
  const flags = await db.query<{ flag: string; records: number }>(
    `SELECT f AS flag, count(*)::int AS records FROM pop_records, unnest(flags) AS f
      WHERE receive_day BETWEEN $1 AND $2 GROUP BY f ORDER BY records DESC, flag`,
    [from, to],
  );
  const refusals = await db.query<{ reason: string; records: number }>(
    `SELECT i->>'reason' AS reason, count(*)::int AS records
       FROM pop_batches, jsonb_array_elements(answer->'items') AS i
      WHERE receive_day BETWEEN $1 AND $2 AND i->>'status' = 'refused' GROUP BY 1 ORDER BY records DESC, reason`,
    [from, to],
  );
  return { flags: flags.rows, refusals: refusals.rows };
}
