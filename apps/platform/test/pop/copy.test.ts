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
