import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { canonicalize, merkleRoot, sha256Hex } from '@ooh/crypto';
import { MerkleRootBuilder } from '@ooh/verify';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { LEAF_JSON_SQL, RECEIVED_AT_SQL } from '../../src/seals/leaf.js';
import { FIRST_PAGE_KEY, LEAF_PAGE_SQL, type LeafPage } from '../../src/seals/repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { computeDayLeaves } from '../../src/seals/seal.js';

const uuid = fc.uuid().map((u) => u.toLowerCase());
// Receive times within the Almaty day 2026-11-19 (19:00 UTC the day before to 19:00 UTC), to the microsecond.
const micros = fc
  .date({
    min: new Date('2026-11-18T19:00:00Z'),
    max: new Date('2026-11-19T18:59:59.999Z'),
    noInvalidDate: true,
  })
  .chain((d) =>
    fc
      .integer({ min: 0, max: 999 })
      .map((us) => `${d.toISOString().slice(0, 23)}${String(us).padStart(3, '0')}Z`),
  );
const leafArb = fc.record({
  batch: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER - 1 }),
  owner: fc.tuple(fc.constantFrom('device', 'source'), uuid).map(([k, u]) => `${k}:${u}`),
  seq: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
  body_sha256: fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex')),
  received_at: micros,
});

describe('the leaf JSON written by PostgreSQL', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => {
    await t?.drop();
  });

  test('equals canonicalize() of the same values for random rows, and the page hashes are their SHA-256', async () => {
    // One leaf per batch number (samples repeat small values).
    const leaves = [...new Map(fc.sample(leafArb, 400).map((l) => [l.batch, l])).values()].filter(
      (l) => l.batch !== 9_007_199_254_740_991,
    );
    leaves.push({
      ...leaves[0]!,
      batch: 9_007_199_254_740_991,
      seq: 9_007_199_254_740_991,
      received_at: '2026-11-19T18:59:59.999999Z',
    });
    let n = 0;
    for (const leaf of leaves) {
      n += 1;
      await t.db.query(
        `INSERT INTO pop_batches (id, owner, batch_seq, channel, body, body_sha256, received_at, receive_day,
           record_count, answer)
         VALUES ($1, $2, $3, 'agent', '\\x7b7d', $4, $5::timestamptz, '2026-11-19', $6, '{}')`,
        [
          leaf.batch,
          `${leaf.owner.slice(0, 7)}${randomUUID()}`,
          leaf.seq,
          leaf.body_sha256,
          leaf.received_at,
          n % 3,
        ],
      );
    }
    const { rows } = await t.db.query<{
      json: string;
      id: string;
      owner: string;
      seq: string;
      sha: string;
      at: string;
    }>(
      `SELECT ${LEAF_JSON_SQL} AS json, b.id::text AS id, b.owner, b.batch_seq::text AS seq, b.body_sha256 AS sha,
              ${RECEIVED_AT_SQL} AS at
         FROM pop_batches b ORDER BY b.received_at, b.id`,
    );
    expect(rows).toHaveLength(leaves.length);
    for (const row of rows) {
      const leaf = {
        batch: Number(row.id),
        owner: row.owner,
        seq: Number(row.seq),
        body_sha256: row.sha,
        received_at: row.at,
      };
      expect(row.json).toBe(canonicalize(leaf));
    }
    // Receive times survive to the microsecond.
    expect(new Set(rows.map((r) => r.at))).toEqual(new Set(leaves.map((l) => l.received_at)));

    const client = await t.db.connect();
    try {
      const tree = syncBuilder();
      let key: { at: string; id: number } = { ...FIRST_PAGE_KEY };
      const all: Buffer[] = [];
      for (;;) {
        const page = (await client.query<LeafPage>(LEAF_PAGE_SQL, ['2026-11-19', key.at, key.id, 7]))
          .rows[0]!;
        if (page.n === 0) break;
        for (let o = 0; o < page.hashes.length; o += 32) all.push(page.hashes.subarray(o, o + 32));
        key = { at: page.last_at!, id: page.last_id! };
      }
      expect(all.map((h) => h.toString('hex'))).toEqual(rows.map((r) => sha256Hex(r.json)));
      for (const h of all) tree.addSync(h);
      expect(Buffer.from(tree.rootSync()).equals(Buffer.from(merkleRoot(all)))).toBe(true);
    } finally {
      client.release();
    }
  });

  test('a batch number beyond 2^53 - 1 stops the seal rather than being written inexactly', async () => {
    await t.db.query(
      `INSERT INTO pop_batches (id, owner, batch_seq, channel, body, body_sha256, received_at, receive_day,
         record_count, answer)
       VALUES (9007199254740993, $1, 1, 'agent', '\\x7b7d', $2, '2026-11-20T05:00:00Z', '2026-11-20', 0, '{}')`,
      [`device:${randomUUID()}`, 'a'.repeat(64)],
    );
    const client = await t.db.connect();
    try {
      await expect(computeDayLeaves(client, '2026-11-20')).rejects.toThrow(/beyond 2\^53/);
    } finally {
      client.release();
    }
  });
});

// computeDayLeaves folds with @ooh/verify's builder hashing on node:crypto, as here.
const syncBuilder = () =>
  new MerkleRootBuilder({ sha256: (bytes) => new Uint8Array(createHash('sha256').update(bytes).digest()) });

describe('MerkleRootBuilder on node:crypto (the sealing tree)', () => {
  test('equals @ooh/crypto merkleRoot for every size, at every prefix', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 140 }), (count) => {
        const pool = randomBytes(count * 32);
        const leaves = Array.from(
          { length: count },
          (_, i) => new Uint8Array(pool.subarray(i * 32, i * 32 + 32)),
        );
        const tree = syncBuilder();
        expect(Buffer.from(tree.rootSync()).equals(Buffer.from(merkleRoot([])))).toBe(true);
        leaves.forEach((leaf, i) => {
          tree.addSync(leaf);
          expect(
            Buffer.from(tree.rootSync()).equals(Buffer.from(merkleRoot(leaves.slice(0, i + 1)))),
            `${i + 1} leaves`,
          ).toBe(true);
        });
        expect(tree.count).toBe(count);
      }),
      { numRuns: 40 },
    );
  });

  test('sizes around powers of two', () => {
    for (const count of [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 1023, 1024, 1025]) {
      const leaves = Array.from({ length: count }, () => new Uint8Array(randomBytes(32)));
      const tree = syncBuilder();
      for (const leaf of leaves) tree.addSync(leaf);
      expect(Buffer.from(tree.rootSync()).equals(Buffer.from(merkleRoot(leaves))), `${count}`).toBe(true);
    }
  });
});
