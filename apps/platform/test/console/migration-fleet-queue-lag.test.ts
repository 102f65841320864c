import { afterEach, describe, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { fleetListStatement } from '../../src/devices/routes.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const T = new Date('2026-11-20T06:00:00Z');
/** The fleet list's statement at `now` (every device, the first page). */
const fleetAt = (now: Date) =>
  fleetListStatement({ organisationId: null, now, silentAfterMs: 30 * 60_000, query: {} });
let database: TestDatabase | null = null;
afterEach(async () => {
  await database?.drop();
  database = null;
});

describe('migrations 061 and 063: fleet queue lag', () => {
  test('the newest record time moves to the batch row, the record index goes, the fleet list reads one index', async () => {
    database = await createTestDatabase({ upTo: 60 });
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
         VALUES ($1, 'MIG-1', 'almaly', 'billboard', $2) RETURNING id`,
        [org, T],
      )
    ).rows[0].id;
    const device = (
      await db.query('INSERT INTO devices (structure_id, created_at) VALUES ($1, $2) RETURNING id', [
        structure,
        T,
      ])
    ).rows[0].id as string;
    // A batch received before the migration, in a partition that exists before it.
    await db.query("SELECT pop_records_partition('2026-11-20')");
    const batch = async (seq: number, receivedAt: Date, day: string, newestRecordAt?: Date) =>
      (
        await db.query(
          `INSERT INTO pop_batches (owner, batch_seq, channel, body, body_sha256, received_at, receive_day,
             record_count, answer${newestRecordAt ? ', newest_record_at' : ''})
           VALUES ($1, $2, 'agent', '\\x7b7d', $3, $4, $5, 1, '{}'${newestRecordAt ? ', $6' : ''}) RETURNING id`,
          [
            `device:${device}`,
            seq,
            'd'.repeat(64),
            receivedAt,
            day,
            ...(newestRecordAt ? [newestRecordAt] : []),
          ],
        )
      ).rows[0].id as string;
    const record = (batchId: string, day: string, endAt: Date) =>
      db.query(
        `INSERT INTO pop_records (receive_day, batch_id, record_index, player_key, structure_id, kind, seq, day,
           approval_number, media_sha256, start_at, end_at, duration_ms, attested)
         VALUES ($1, $2, 0, $3, $4, 'play', 1, $1, 'APR-2026-000001', $5, $6, $6, 1000, false)`,
        [day, batchId, `device:${device}`, structure, 'e'.repeat(64), endAt],
      );
    const first = await batch(1, T, '2026-11-20');
    await record(first, '2026-11-20', new Date(T.getTime() - 300_000));

    await migrate(db);

    // 063 took the newest record time of the batches received before it (here: 5 minutes before receipt) ...
    const { rows: backfilled } = await db.query('SELECT newest_record_at FROM pop_batches WHERE id = $1', [
      first,
    ]);
    expect(backfilled[0].newest_record_at).toEqual(new Date(T.getTime() - 300_000));
    // ... and dropped the partial index on pop_records(batch_id), from every partition, old and new.
    await db.query("SELECT pop_records_partition('2026-12-01')");
    const { rows: indexes } = await db.query<{ tablename: string }>(
      `SELECT tablename FROM pg_indexes WHERE tablename LIKE 'pop_records%' AND indexdef LIKE '%(batch_id)%'`,
    );
    expect(indexes).toEqual([]);
    const { rows: batchIndexes } = await db.query<{ indexdef: string }>(
      "SELECT indexdef FROM pg_indexes WHERE indexname = 'pop_batches_owner_received'",
    );
    expect(batchIndexes[0]?.indexdef).toContain('(owner, received_at DESC, id DESC)');

    // The batch seeded before the migrations, and one in the new month as the platform now writes it.
    let { rows } = await db.query(fleetAt(T).sql, fleetAt(T).values);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ device_id: device, last_batch_seq: 1, queue_lag_seconds: 300 });
    const december = new Date('2026-12-01T00:00:00Z');
    const second = await batch(2, december, '2026-12-01', new Date(december.getTime() - 7_000));
    await record(second, '2026-12-01', new Date(december.getTime() - 7_000));
    ({ rows } = await db.query(fleetAt(december).sql, fleetAt(december).values));
    expect(rows[0]).toMatchObject({ last_batch_seq: 2, queue_lag_seconds: 7 });
    // A batch without a timed record has no lag.
    await batch(3, new Date(december.getTime() + 1000), '2026-12-01');
    ({ rows } = await db.query(
      fleetAt(new Date(december.getTime() + 1000)).sql,
      fleetAt(new Date(december.getTime() + 1000)).values,
    ));
    expect(rows[0]).toMatchObject({ last_batch_seq: 3, queue_lag_seconds: null });

    // Where sequential scans are ruled out, the plan reads the newest batch through its index (a plan that cannot
    // would fall back to a disabled sequential scan).
    const client = await db.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_seqscan = off');
      const plan = (await client.query(`EXPLAIN ${fleetAt(december).sql}`, fleetAt(december).values)).rows
        .map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN'])
        .join('\n');
      expect(plan).toContain('pop_batches_owner_received');
      // No play record is read: of pop_records only the newest mode change, through its partial index (076).
      expect(plan).not.toMatch(/Seq Scan on pop_records|pop_records_events/);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});
