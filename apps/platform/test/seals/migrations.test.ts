import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { agentBody, insertBatch, newDevice } from './helpers.js';

const HEX = (c: string) => c.repeat(64);

/** Migrations 040 (stats seals) and 041 (ledger blocks): applied over seeded data, their constraints hold. */
describe('migrations 040-041', () => {
  let t: TestDatabase;
  const leafIds: number[] = [];

  beforeAll(async () => {
    t = await createTestDatabase({ upTo: 39 });
    const device = newDevice();
    await insertBatch(t.db, {
      owner: device,
      batchSeq: 1,
      body: agentBody(device.slice(7), 1, 2),
      receivedAt: '2026-11-19T10:00:00.000001Z',
    });
    for (let i = 0; i < 3; i += 1) {
      const { rows } = await t.db.query<{ id: number }>(
        `INSERT INTO ledger_leaves (recorded_at, day, kind, approval_number, manifest_sha256, signed_at, revoked_at)
         VALUES ('2026-11-19T10:00:00Z', '2026-11-19', 'stats_seal', NULL, $1, '2026-11-19T10:00:00Z', NULL)
         RETURNING id`,
        [HEX(String(i))],
      );
      leafIds.push(rows[0]!.id);
    }
    await migrate(t.db);
  });
  afterAll(async () => {
    await t?.drop();
  });

  const seal = (day: string, prevDay: string | null, leafId: number, signedAt = '2026-11-20T06:00:00Z') =>
    t.db.query(
      `INSERT INTO stats_seals (day, prev_day, signed_at, body, body_sha256, signature, ledger_leaf_id)
       VALUES ($1, $2, $3, '\\x7b7d', $4, '\\x30', $5)`,
      [day, prevDay, signedAt, HEX('a'), leafId],
    );

  test('seed data survives; the tables start empty', async () => {
    expect((await t.db.query('SELECT count(*)::int AS n FROM pop_batches')).rows[0].n).toBe(1);
    expect((await t.db.query('SELECT count(*)::int AS n FROM stats_seals')).rows[0].n).toBe(0);
    expect((await t.db.query('SELECT count(*)::int AS n FROM ledger_blocks')).rows[0].n).toBe(0);
  });

  test('stats_seals: one seal per day, one first seal, each following the day before, whole seconds', async () => {
    await seal('2026-11-19', null, leafIds[0]!);
    await expect(seal('2026-11-19', null, leafIds[1]!)).rejects.toMatchObject({ code: '23505' });
    await expect(seal('2026-11-25', null, leafIds[1]!)).rejects.toMatchObject({ code: '23505' });
    await expect(seal('2026-11-21', '2026-11-19', leafIds[1]!)).rejects.toMatchObject({ code: '23514' });
    await expect(
      seal('2026-11-20', '2026-11-19', leafIds[1]!, '2026-11-21T06:00:00.5Z'),
    ).rejects.toMatchObject({
      code: '23514',
    });
    await seal('2026-11-20', '2026-11-19', leafIds[1]!);
    // A leaf stands for one seal only.
    await expect(seal('2026-11-21', '2026-11-20', leafIds[1]!)).rejects.toMatchObject({ code: '23505' });
  });

  test('ledger_blocks: heights from 1, anchors chain, a leaf in one block only', async () => {
    const block = (day: string, prev: string | null, height: number, anchor: string, digest: string) =>
      t.db.query(
        `INSERT INTO ledger_blocks (day, prev_day, block_height, leaf_count, merkle_root, anchor_sha256, digest,
           digested_at) VALUES ($1, $2, $3, 0, $4, $5, $6, '2026-11-20T00:00:00Z')`,
        [day, prev, height, HEX('e'), anchor, digest],
      );
    await expect(block('2026-11-19', null, 1, HEX('1'), HEX('b'))).rejects.toMatchObject({ code: '23514' });
    await expect(block('2026-11-19', null, 2, HEX('0'), HEX('b'))).rejects.toMatchObject({ code: '23514' });
    await block('2026-11-19', null, 1, HEX('0'), HEX('b'));
    await expect(block('2026-11-21', '2026-11-19', 2, HEX('b'), HEX('c'))).rejects.toMatchObject({
      code: '23514',
    });
    await block('2026-11-20', '2026-11-19', 2, HEX('b'), HEX('c'));
    await t.db.query(
      `INSERT INTO ledger_block_leaves (leaf_id, day, position) VALUES ($1, '2026-11-19', 0)`,
      [leafIds[0]],
    );
    await expect(
      t.db.query(`INSERT INTO ledger_block_leaves (leaf_id, day, position) VALUES ($1, '2026-11-20', 0)`, [
        leafIds[0],
      ]),
    ).rejects.toMatchObject({ code: '23505' });
    await expect(
      t.db.query(`INSERT INTO ledger_block_leaves (leaf_id, day, position) VALUES ($1, '2026-11-19', 0)`, [
        leafIds[1],
      ]),
    ).rejects.toMatchObject({ code: '23505' });
  });
});
