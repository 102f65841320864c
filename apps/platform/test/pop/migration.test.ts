import { afterAll, beforeAll, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

// Migration 020 (proof of play) on a database that already holds devices and CMS players (migrate to 019, seed,
// migrate the rest).
let t: TestDatabase;
const at = new Date('2026-11-20T06:00:00Z');

beforeAll(async () => {
  t = await createTestDatabase({ upTo: 19 });
});
afterAll(async () => {
  await t?.drop();
});

test('020_pop adds the proof-of-play tables beside existing devices and CMS players', async () => {
  const db = t.db;
  const { rows: orgs } = await db.query<{ id: string }>(
    "INSERT INTO organisations (name, kind, created_at) VALUES ('Op', 'operator', $1) RETURNING id",
    [at],
  );
  const org = orgs[0]!.id;
  const { rows: structures } = await db.query<{ id: string }>(
    "INSERT INTO structures (organisation_id, code, district, format, created_at) VALUES ($1, 'S-1', 'almaly', 'billboard', $2) RETURNING id",
    [org, at],
  );
  const structure = structures[0]!.id;
  const { rows: devices } = await db.query<{ id: string }>(
    'INSERT INTO devices (structure_id, created_at) VALUES ($1, $2) RETURNING id',
    [structure, at],
  );
  const { rows: installations } = await db.query<{ id: string }>(
    "INSERT INTO cms_installations (organisation_id, name, kind, created_at) VALUES ($1, 'CMS', 'x', $2) RETURNING id",
    [org, at],
  );
  await db.query(
    "INSERT INTO cms_players (installation_id, external_id, structure_id, mapped_at) VALUES ($1, 'screen-1', $2, $3)",
    [installations[0]!.id, structure, at],
  );

  await migrate(db);

  const { rows: applied } = await db.query('SELECT version FROM schema_migrations WHERE version = 20');
  expect(applied).toHaveLength(1);
  // The seeded rows are untouched.
  expect((await db.query('SELECT id FROM devices')).rows).toEqual([{ id: devices[0]!.id }]);
  expect((await db.query('SELECT external_id FROM cms_players')).rows).toEqual([{ external_id: 'screen-1' }]);

  const owner = `device:${devices[0]!.id}`;
  const insertBatch = (seq: number) =>
    db.query(
      `INSERT INTO pop_batches (owner, batch_seq, channel, body, body_sha256, received_at, receive_day, record_count, answer)
       VALUES ($1, $2, 'agent', '\\x7b7d', $3, $4, '2026-11-20', 0, '{}') RETURNING id`,
      [owner, seq, 'f'.repeat(64), at],
    );
  const first = (await insertBatch(0)).rows[0].id;
  // (owner, batch_seq) is taken once.
  await expect(insertBatch(0)).rejects.toMatchObject({ code: '23505' });
  expect((await insertBatch(1)).rows[0].id).toBeGreaterThan(first);
  // Owners are device:<uuid> or source:<uuid>.
  await expect(
    db.query(
      `INSERT INTO pop_batches (owner, batch_seq, channel, body, body_sha256, received_at, receive_day, record_count, answer)
       VALUES ('someone', 0, 'agent', '\\x', $1, $2, '2026-11-20', 0, '{}')`,
      ['f'.repeat(64), at],
    ),
  ).rejects.toMatchObject({ code: '23514' });

  // Records need their month partition, made on demand and once.
  const record = () =>
    db.query(
      `INSERT INTO pop_records (receive_day, batch_id, record_index, player_key, structure_id, kind, day, attested)
       VALUES ('2026-11-20', $1, 0, $2, $3, 'play', '2026-11-20', false)`,
      [first, owner, structure],
    );
  await expect(record()).rejects.toMatchObject({ code: '23514' });
  const made = await db.query("SELECT pop_records_partition('2026-11-20') AS name");
  expect(made.rows[0].name).toBe('pop_records_2026_11');
  await db.query("SELECT pop_records_partition('2026-11-30')");
  await record();
  expect((await db.query('SELECT count(*)::int AS n FROM pop_records_2026_11')).rows[0].n).toBe(1);

  // play_counts: NULL approval or slot are one key, not distinct ones.
  const count = (slot: string | null, approval: string | null) =>
    db.query(
      `INSERT INTO play_counts (player_key, structure_id, day, approval_number, slot, attested, plays, flagged)
       VALUES ($1, $2, '2026-11-20', $3, $4, false, 1, 0)
       ON CONFLICT (player_key, day, structure_id, approval_number, slot, attested)
       DO UPDATE SET plays = play_counts.plays + 1`,
      [owner, structure, approval, slot],
    );
  await count('gov', null);
  await count('gov', null);
  await count(null, 'A-1');
  await expect(count(null, null)).rejects.toMatchObject({ code: '23514' });
  const { rows: counts } = await db.query(
    'SELECT approval_number, slot, plays::int AS plays FROM play_counts ORDER BY slot NULLS FIRST',
  );
  expect(counts).toEqual([
    { approval_number: 'A-1', slot: null, plays: 1 },
    { approval_number: null, slot: 'gov', plays: 2 },
  ]);

  // Token buckets: all or nothing, time passed in.
  const take = (cost: number, when: Date) =>
    db.query<{ wait: number }>(
      "SELECT pop_take_tokens(ARRAY['a', 'b'], ARRAY[3, 1]::float8[], ARRAY[0.1, 1]::float8[], ARRAY[1, $1]::float8[], $2) AS wait",
      [cost, when],
    );
  expect((await take(1, at)).rows[0]!.wait).toBe(0);
  expect((await take(1, at)).rows[0]!.wait).toBe(1);
  // Refused: bucket a was not drawn from either.
  expect((await db.query("SELECT tokens FROM pop_rate_buckets WHERE bucket_key = 'a'")).rows[0].tokens).toBe(
    2,
  );
  expect((await take(1, new Date(at.getTime() + 1000))).rows[0]!.wait).toBe(0);
});

test('021_pop_fillfactor leaves room on the pages of the rows every batch updates; rows untouched', async () => {
  const old = await createTestDatabase({ upTo: 20 });
  try {
    const db = old.db;
    await db.query(
      "INSERT INTO pop_rate_buckets (bucket_key, tokens, updated_at) VALUES ('agent:x', 2, $1)",
      [at],
    );
    await db.query(
      "INSERT INTO pop_players (player_key, high_water_seq, previous_seq) VALUES ('device:x', 5, 0)",
    );
    await migrate(db, { upTo: 21 });
    const { rows } = await db.query<{ relname: string; reloptions: string[] }>(
      `SELECT relname, reloptions FROM pg_class
        WHERE relname IN ('play_counts', 'pop_players', 'pop_rate_buckets') ORDER BY relname`,
    );
    expect(rows).toEqual([
      { relname: 'play_counts', reloptions: ['fillfactor=70'] },
      { relname: 'pop_players', reloptions: ['fillfactor=70'] },
      { relname: 'pop_rate_buckets', reloptions: ['fillfactor=50'] },
    ]);
    expect((await db.query('SELECT bucket_key, tokens FROM pop_rate_buckets')).rows).toEqual([
      { bucket_key: 'agent:x', tokens: 2 },
    ]);
    expect((await db.query('SELECT player_key, high_water_seq FROM pop_players')).rows).toEqual([
      { player_key: 'device:x', high_water_seq: 5 },
    ]);
  } finally {
    await old.drop();
  }
});
