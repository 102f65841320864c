import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const HEX = (c: string) => c.repeat(64);

/** Migration 077 (checkpoints, cosignatures, witnesses, anchored_by) over a ledger that has blocks already. */
describe('migration 077', () => {
  let t: TestDatabase;

  beforeAll(async () => {
    t = await createTestDatabase({ upTo: 76 });
    for (const [day, prev, height, anchor, digest] of [
      ['2026-11-18', null, 1, HEX('0'), HEX('1')],
      ['2026-11-19', '2026-11-18', 2, HEX('1'), HEX('2')],
    ] as const) {
      await t.db.query(
        `INSERT INTO ledger_blocks (day, prev_day, block_height, leaf_count, merkle_root, anchor_sha256, digest,
           digested_at)
         VALUES ($1, $2, $3, 0, $4, $5, $6, '2026-11-20T00:00:00Z')`,
        [day, prev, height, HEX('e'), anchor, digest],
      );
    }
    await migrate(t.db);
  });
  afterAll(async () => {
    await t?.drop();
  });

  const checkpoint = (size: number) =>
    t.db.query(
      `INSERT INTO ledger_checkpoints (size, origin, root_hash, note, made_at) VALUES ($1, 'o', $2, 'n', now())`,
      [size, HEX(String(size))],
    );

  test('the blocks stay digested with no anchor; a checkpoint needs its block; a block is anchored only with anchored_by', async () => {
    const { rows } = await t.db.query<{ status: string; anchored_by: number | null }>(
      'SELECT status, anchored_by FROM ledger_blocks ORDER BY day',
    );
    expect(rows).toEqual([
      { status: 'digested', anchored_by: null },
      { status: 'digested', anchored_by: null },
    ]);
    await checkpoint(2);
    await expect(checkpoint(3)).rejects.toMatchObject({ code: '23503' });
    await expect(checkpoint(2)).rejects.toMatchObject({ code: '23505' });
    const anchor = (sql: string) => t.db.query(`UPDATE ledger_blocks SET ${sql} WHERE block_height = 2`);
    await expect(anchor(`status = 'anchored'`)).rejects.toMatchObject({ code: '23514' });
    await expect(anchor(`status = 'anchored', anchored_by = 1`)).rejects.toMatchObject({ code: '23514' });
    await anchor(`status = 'anchored', anchored_by = 2`);
  });

  test('a cosignature belongs to a checkpoint, once per witness key; witness state never goes below 0', async () => {
    const cosign = (size: number, keyId = '0a0b0c0d') =>
      t.db.query(
        `INSERT INTO ledger_cosignatures (size, witness, key_id, line, cosigned_at, received_at)
         VALUES ($1, 'w.test/1', $2, 'l', now(), now())`,
        [size, keyId],
      );
    await cosign(2);
    await expect(cosign(2)).rejects.toMatchObject({ code: '23505' });
    await expect(cosign(1)).rejects.toMatchObject({ code: '23503' });
    await expect(cosign(2, 'XYZ')).rejects.toMatchObject({ code: '23514' });
    await expect(
      t.db.query(`INSERT INTO ledger_witnesses (vkey, name, url, cosigned_size) VALUES ('v', 'n', 'u', -1)`),
    ).rejects.toMatchObject({ code: '23514' });
  });
});
