import type { DbClient } from '../db/pool.js';

/**
 * Next serial of a yearly series, gap-free: the counter row is locked and
 * bumped inside the caller's transaction, so concurrent callers queue and a
 * rolled-back transaction gives its number back.
 */
export async function nextSerial(client: DbClient, series: string, year: number): Promise<number> {
  const { rows } = await client.query<{ last: number }>(
    `INSERT INTO number_counters (series, year, last) VALUES ($1, $2, 1)
     ON CONFLICT (series, year) DO UPDATE SET last = number_counters.last + 1
     RETURNING last`,
    [series, year],
  );
  return rows[0]!.last;
}
