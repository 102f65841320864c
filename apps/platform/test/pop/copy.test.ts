import { afterAll, beforeAll, expect, test } from 'vitest';
import { BinaryCopyWriter, copyFrom } from '../../src/db/copy.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/* COPY's binary format as written by BinaryCopyWriter, read back by PostgreSQL itself. */
let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase({ migrate: false });
  await database.db.query(
    `CREATE TABLE t (i int, b bigint, x text, u uuid, d date, ts timestamptz, ok boolean, tags text[], j json)`,
  );
});
afterAll(async () => {
  await database?.drop();
});

test('every value kind round-trips: edges of int8, instants before 2000, multibyte text, arrays, NULL', async () => {
  const rows: [number, number, string, string, string, number, boolean, string[], string][] = [
    [0, 0, '', '00000000-0000-0000-0000-000000000000', '2000-01-01', Date.UTC(2000, 0, 1), false, [], 'null'],
    [
      -2147483648,
      Number.MAX_SAFE_INTEGER,
      'tab\there, nl\nthere, back\\slash, quote"',
      'ABCDEF01-2345-6789-abcd-ef0123456789',
      '1999-12-31',
      Date.UTC(1999, 11, 31, 23, 59, 59, 999),
      true,
      ['approval_unknown', 'screen_off'],
      '{"a":[1,"\\u0000"]}',
    ],
    [
      2147483647,
      -Number.MAX_SAFE_INTEGER,
      'Алматы — №1 😀',
      'ffffffff-ffff-ffff-ffff-ffffffffffff',
      '2026-11-20',
      Date.UTC(2026, 10, 20, 5, 59, 30, 500),
      true,
      ['ü', ''],
      '"text"',
    ],
    [
      7,
      2 ** 32,
      'x'.repeat(100),
      '12345678-1234-1234-1234-123456789abc',
      '1931-02-28',
      Date.UTC(1931, 1, 28),
      false,
      ['a'],
      '1',
    ],
  ];
  const out = new BinaryCopyWriter(16); // grows as needed
  for (const row of rows) {
    out.row(9);
    out.int32(row[0]);
    out.int64(row[1]);
    out.text(row[2]);
    out.uuid(row[3]);
    out.date(row[4]);
    out.timestamp(row[5]);
    out.bool(row[6]);
    out.textArray(row[7]);
    out.text(row[8]);
  }
  out.row(9);
  for (let i = 0; i < 9; i += 1) out.null();
  const client = await database.db.connect();
  try {
    expect(await copyFrom(client, 'COPY t FROM STDIN (FORMAT binary)', [out.finish()])).toBe(5);
  } finally {
    client.release();
  }
  const { rows: back } = await database.db.query(
    `SELECT i, b::text AS b, x, u::text AS u, d::text AS d, ts, ok, tags, j::text AS j FROM t ORDER BY i NULLS LAST`,
  );
  const sorted = [...rows].sort((a, b) => a[0] - b[0]);
  expect(back.slice(0, 4)).toEqual(
    sorted.map((r) => ({
      i: r[0],
      b: String(r[1]),
      x: r[2],
      u: r[3].toLowerCase(),
      d: r[4],
      ts: new Date(r[5]),
      ok: r[6],
      tags: r[7],
      j: r[8],
    })),
  );
  expect(back[4]).toEqual({
    i: null,
    b: null,
    x: null,
    u: null,
    d: null,
    ts: null,
    ok: null,
    tags: null,
    j: null,
  });
});

test('misuse throws before anything is sent: not a uuid, not a day, an unsafe integer', () => {
  const out = new BinaryCopyWriter();
  expect(() => out.uuid('not-a-uuid')).toThrow(TypeError);
  expect(() => out.date('2026-11-20T00:00:00Z')).toThrow(TypeError);
  expect(() => out.int64(2 ** 53)).toThrow(RangeError);
  expect(() => out.int64(1.5)).toThrow(RangeError);
  expect(() => out.int32(2 ** 31)).toThrow(RangeError);
});

/** Rows of `(int)` as binary COPY data: `bad` makes the second row's field the wrong length, which the server refuses. */
function intRows(values: number[], bad = false): Buffer {
  const out = new BinaryCopyWriter();
  values.forEach((value, i) => {
    out.row(1);
    if (bad && i === 1) out.text('not four bytes');
    else out.int32(value);
  });
  return out.finish();
}

/*
 * The data goes out behind the COPY statement without waiting for CopyInResponse, and `commit` puts the COMMIT in
 * the same query string. Whatever fails, the connection must read nothing of the data as anything else, and nothing
 * of a failed transaction may be kept.
 */
test('COPY with its COMMIT in one round trip: committed; a failed COPY, statement or COMMIT keeps nothing', async () => {
  await database.db.query(
    'CREATE TABLE c (v int, CONSTRAINT c_v UNIQUE (v) DEFERRABLE INITIALLY DEFERRED); CREATE TABLE c_side (v int)',
  );
  const copy = 'COPY c (v) FROM STDIN (FORMAT binary)';
  const visible = async () =>
    (await database.db.query<{ v: number }>('SELECT v FROM c ORDER BY v')).rows.map((r) => r.v);
  const client = await database.db.connect();
  try {
    // Committed: another connection sees the rows, and the client is out of its transaction (a ROLLBACK now only
    // warns, and takes nothing back).
    await client.query('BEGIN');
    await client.query('INSERT INTO c_side VALUES (1)');
    expect(await copyFrom(client, copy, [intRows([1, 2, 3])], { commit: true })).toBe(3);
    expect(await visible()).toEqual([1, 2, 3]);
    await client.query('ROLLBACK');
    expect((await database.db.query('SELECT count(*)::int AS n FROM c_side')).rows).toEqual([{ n: 1 }]);

    // Data the server refuses: the COMMIT is not run, the transaction is aborted, then rolled back with its other
    // work.
    await client.query('BEGIN');
    await client.query('INSERT INTO c_side VALUES (2)');
    await expect(copyFrom(client, copy, [intRows([4, 5, 6], true)], { commit: true })).rejects.toMatchObject({
      code: '22P03',
    });
    await expect(client.query('SELECT 1')).rejects.toMatchObject({ code: '25P02' });
    await client.query('ROLLBACK');
    expect(await visible()).toEqual([1, 2, 3]);

    // A statement the server refuses before any COPY (no such table): the data behind it is dropped, not read as
    // queries; the connection answers the next query as it should.
    await client.query('BEGIN');
    await expect(
      copyFrom(client, 'COPY missing (v) FROM STDIN (FORMAT binary)', [intRows([7, 8])], { commit: true }),
    ).rejects.toMatchObject({ code: '42P01' });
    await client.query('ROLLBACK');
    expect((await client.query('SELECT 41 + 1 AS n')).rows).toEqual([{ n: 42 }]);

    // A COMMIT that fails (a deferred unique check): the promise rejects with its error and nothing is kept.
    await client.query('BEGIN');
    await client.query('INSERT INTO c_side VALUES (3)');
    await expect(copyFrom(client, copy, [intRows([9, 1])], { commit: true })).rejects.toMatchObject({
      code: '23505',
    });
    await client.query('ROLLBACK'); // only a warning: the failed COMMIT ended the transaction
    expect(await visible()).toEqual([1, 2, 3]);
    expect((await database.db.query('SELECT count(*)::int AS n FROM c_side')).rows).toEqual([{ n: 1 }]);

    // Without `commit`, the pipelined COPY stays inside the caller's transaction.
    await client.query('BEGIN');
    expect(await copyFrom(client, copy, [intRows([10])])).toBe(1);
    expect(await visible()).toEqual([1, 2, 3]);
    await client.query('COMMIT');
    expect(await visible()).toEqual([1, 2, 3, 10]);
  } finally {
    client.release();
  }
});
