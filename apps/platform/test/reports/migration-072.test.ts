import { afterEach, describe, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { HEALTH_SQL } from '../../src/reports/fleet-health.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const T = new Date('2026-11-20T06:00:00Z');
let database: TestDatabase | null = null;
afterEach(async () => {
  await database?.drop();
  database = null;
});

describe('migration 072: batches with a flagged record, by device and receive time', () => {
  test('batches stored before it are indexed, clean ones are not, and fleet health probes them through it', async () => {
    database = await createTestDatabase({ upTo: 71 });
    const db = database.db;
    const org = (
      await db.query(
        "INSERT INTO organisations (name, kind, created_at) VALUES ('Operator', 'operator', $1) RETURNING id",
        [T],
      )
    ).rows[0].id;
    const structure = (
      await db.query(
        `INSERT INTO structures (organisation_id, code, district, format, created_at)
         VALUES ($1, 'MIG-72', 'almaly', 'billboard', $2) RETURNING id`,
        [org, T],
      )
    ).rows[0].id;
    const device = (
      await db.query('INSERT INTO devices (structure_id, created_at) VALUES ($1, $2) RETURNING id', [
        structure,
        T,
      ])
    ).rows[0].id as string;
    const batch = (seq: number, at: Date, answer: unknown) =>
      db.query(
        `INSERT INTO pop_batches (owner, batch_seq, channel, body, body_sha256, received_at, receive_day, record_count,
           answer, newest_record_at)
         VALUES ($1, $2, 'agent', '\\x7b7d', $3, $4, '2026-11-20', 1, $5, $6)`,
        [
          `device:${device}`,
          seq,
          'd'.repeat(64),
          at,
          JSON.stringify(answer),
          new Date(at.getTime() - 60_000),
        ],
      );
    const clean = {
      batch_seq: 1,
      received: 1,
      accepted: 1,
      duplicates: 0,
      refused: 0,
      flagged: 0,
      duplicate: false,
      items: [],
    };
    const screenOff = {
      ...clean,
      batch_seq: 2,
      flagged: 1,
      items: [{ index: 0, status: 'flagged', flags: ['screen_off'] }],
    };
    await batch(1, new Date(T.getTime() - 3_600_000), clean);
    await batch(2, new Date(T.getTime() - 1_800_000), screenOff);
    // An answer without a "flagged" count (earlier fixtures wrote '{}') is simply not in the index.
    await batch(3, new Date(T.getTime() - 600_000), {});

    await migrate(db);

    const { rows: indexes } = await db.query<{ indexdef: string }>(
      "SELECT indexdef FROM pg_indexes WHERE indexname = 'pop_batches_flagged_owner_received'",
    );
    expect(indexes[0]?.indexdef).toContain(
      "(owner, received_at) WHERE (((answer ->> 'flagged'::text))::integer > 0)",
    );
    const client = await db.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_seqscan = off');
      // One entry: the flagged batch (an index-only count through the partial index).
      const { rows: counted } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pop_batches WHERE (answer->>'flagged')::int > 0 AND owner = $1`,
        [`device:${device}`],
      );
      expect(counted[0]?.n).toBe(1);
      const params = [null, [new Date('2026-11-19T19:00:00Z')], [new Date('2026-11-20T19:00:00Z')]];
      const plan = (await client.query(`EXPLAIN ${HEALTH_SQL}`, params)).rows
        .map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN'])
        .join('\n');
      expect(plan).toContain('pop_batches_flagged_owner_received');
      expect(plan).toContain('pop_batches_owner_received');
      expect(plan).not.toMatch(/Seq Scan on pop_batches/);
      const { rows } = await client.query(HEALTH_SQL, params);
      expect(rows).toEqual([
        expect.objectContaining({ i: 1, expected: 1, reporting: 1, screen_off: 1, lag_max: 60 }),
      ]);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});
