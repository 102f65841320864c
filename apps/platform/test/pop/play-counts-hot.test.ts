import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { Db } from '../../src/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

// Migration 079: a batch's updates of its player's count rows stay HOT (no new index entries), however full the
// table is around them. The rows are laid out as batches write them: a player's rows of a day, one per approval
// played, inserted together, player after player; a batch then adds to all of its player's rows at once.
let t: TestDatabase;
const APPROVALS = 20;
const PLAYERS = 60;
const day = '2026-11-20';
const approval = (k: number) => `A-2026-${String(100_000 + k).padStart(6, '0')}`;

beforeAll(async () => {
  t = await createTestDatabase();
  // Pruning a page (what makes room for the next HOT version) is opportunistic: it is skipped while another backend
  // pins the page, and an autovacuum of the table, which the first 1,200 rows call for, does (9 of 20 updates were
  // HOT in one run of the suite). The test is of the layout, so autovacuum keeps off this database's table.
  await t.db.query('ALTER TABLE play_counts SET (autovacuum_enabled = false)');
});
afterAll(async () => {
  await t?.drop();
});

/** One batch's counts of a player, upserted as the group statement does (ON CONFLICT ... DO UPDATE). */
async function countBatch(
  db: Db,
  player: string,
  structure: string,
): Promise<{ updated: number; hot: number }> {
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    // This backend's counters not yet sent to the shared statistics (pg_stat_user_tables would see them only
    // after a flush): read before and after the statement.
    const counters = async () => {
      const { rows } = await client.query<{ updated: string; hot: string }>(
        `SELECT pg_stat_get_xact_tuples_updated('play_counts'::regclass) AS updated,
                pg_stat_get_xact_tuples_hot_updated('play_counts'::regclass) AS hot`,
      );
      return { updated: Number(rows[0]!.updated), hot: Number(rows[0]!.hot) };
    };
    const before = await counters();
    await client.query(
      `INSERT INTO play_counts (player_key, structure_id, day, approval_number, slot, attested, plays, flagged)
       SELECT $1, $2, $3, a, NULL, false, 3, 0 FROM unnest($4::text[]) AS a
       ON CONFLICT (player_key, day, structure_id, approval_number, slot, attested)
       DO UPDATE SET plays = play_counts.plays + EXCLUDED.plays, flagged = play_counts.flagged + EXCLUDED.flagged`,
      [player, structure, day, Array.from({ length: APPROVALS }, (_, k) => approval(k))],
    );
    const after = await counters();
    await client.query('COMMIT');
    return { updated: after.updated - before.updated, hot: after.hot - before.hot };
  } finally {
    client.release();
  }
}

test("079: every update of a batch's count rows is HOT, batch after batch, on full pages", async () => {
  const players = Array.from({ length: PLAYERS }, () => ({
    key: `device:${randomUUID()}`,
    structure: randomUUID(),
  }));
  // The day's first batch of every player: its rows inserted together.
  for (const p of players) expect(await countBatch(t.db, p.key, p.structure)).toEqual({ updated: 0, hot: 0 });
  // Then each player's next batches, in turn, as a fleet sends them.
  for (let round = 0; round < 3; round += 1) {
    for (const p of players.slice(10, 30)) {
      expect(await countBatch(t.db, p.key, p.structure)).toEqual({ updated: APPROVALS, hot: APPROVALS });
    }
  }
  const { rows } = await t.db.query<{ plays: string }>(
    'SELECT sum(plays) AS plays FROM play_counts WHERE player_key = $1',
    [players[20]!.key],
  );
  expect(Number(rows[0]!.plays)).toBe(4 * 3 * APPROVALS);
  const { rows: options } = await t.db.query<{ reloptions: string[] }>(
    "SELECT reloptions FROM pg_class WHERE relname = 'play_counts'",
  );
  expect(options[0]!.reloptions).toContain('fillfactor=50');
});
