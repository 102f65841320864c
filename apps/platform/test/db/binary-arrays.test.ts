import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import {
  boolArray,
  dateArray,
  int4Array,
  int8Array,
  pgDate,
  textArray,
  uuidArray,
  uuidBytes,
} from '../../src/db/binary-arrays.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

// The arrays PostgreSQL reads (array_recv) must be the values given: each is sent as a binary parameter and read
// back as text by PostgreSQL itself.
let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await t?.drop();
});

async function readBack(cast: string, value: Buffer): Promise<string[] | null> {
  const { rows } = await t.db.query<{ v: string[] | null }>(
    `SELECT (SELECT array_agg(x::text ORDER BY o) FROM unnest($1::${cast}) WITH ORDINALITY AS u(x, o)) AS v,
            cardinality($1::${cast}) AS n`,
    [value],
  );
  return rows[0]!.v;
}

test('int4, int8 and bool arrays, extremes included', async () => {
  expect(await readBack('int4[]', int4Array([0, 1, -1, 2147483647, -2147483648]))).toEqual([
    '0',
    '1',
    '-1',
    '2147483647',
    '-2147483648',
  ]);
  expect(
    await readBack(
      'int8[]',
      int8Array([0, 1, -1, 4294967296, -4294967297, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]),
    ),
  ).toEqual(['0', '1', '-1', '4294967296', '-4294967297', '9007199254740991', '-9007199254740991']);
  expect(await readBack('bool[]', boolArray([true, false, true]))).toEqual(['true', 'false', 'true']);
});

test('text arrays: NULLs, the empty string, multi-byte text', async () => {
  const values = ['A-2026-000001', null, '', 'Алматы — 广告 🚏', 'a,b;"c"\\{d}', null];
  const { rows } = await t.db.query<{ v: (string | null)[] }>('SELECT $1::text[] AS v', [textArray(values)]);
  expect(rows[0]!.v).toEqual(values);
});

test('uuid and date arrays', async () => {
  const ids = ['00000000-0000-0000-0000-000000000000', 'F47AC10B-58CC-4372-A567-0E02B2C3D479'];
  expect(await readBack('uuid[]', uuidArray(ids))).toEqual([ids[0], ids[1]!.toLowerCase()]);
  const days = [
    '2026-11-28',
    '2000-01-01',
    '1999-12-31',
    '2024-02-29',
    '2026-11-28',
    '9999-12-31',
    '0001-01-01',
  ];
  expect(await readBack('date[]', dateArray(days))).toEqual(days);
});

test('a uuid is read digit by digit exactly as the regular expression and the hex decoder read it', () => {
  const reference = (value: string): Buffer | null =>
    /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/.test(value)
      ? Buffer.from(value.replaceAll('-', ''), 'hex')
      : null;
  const ours = (value: string): Buffer | null => {
    try {
      return uuidBytes(value);
    } catch (error) {
      expect(error).toBeInstanceOf(TypeError);
      return null;
    }
  };
  const odd = ['g', 'G', '-', ' ', '/', ':', '@', '`', '\u0000', 'é', 'ａ', '٣', '\uD83D'];
  let refused = 0;
  for (let n = 0; n < 3000; n += 1) {
    let value: string = randomUUID();
    if (n % 3 === 0) value = value.toUpperCase();
    const at = Math.floor(Math.random() * 36);
    switch (n % 6) {
      case 1: // one code unit changed
        value = value.slice(0, at) + odd[n % odd.length]! + value.slice(at + 1);
        break;
      case 2: // one removed, or one added
        value =
          n % 12 === 2
            ? value.slice(0, at) + value.slice(at + 1)
            : `${value.slice(0, at)}a${value.slice(at)}`;
        break;
      case 3: // a hyphen moved
        value = value.replace('-', '').replace(/^(.{9})/, '$1-');
        break;
    }
    const expected = reference(value);
    expect(ours(value), value).toEqual(expected);
    if (expected === null) refused += 1;
    else expect(uuidArray([value]).subarray(24)).toEqual(expected);
  }
  expect(refused).toBeGreaterThan(1000);
});

test('empty arrays are arrays of no element, of the right type', async () => {
  for (const [cast, value] of [
    ['int4[]', int4Array([])],
    ['int8[]', int8Array([])],
    ['bool[]', boolArray([])],
    ['text[]', textArray([])],
    ['uuid[]', uuidArray([])],
    ['date[]', dateArray([])],
  ] as const) {
    expect(await readBack(cast, value)).toBeNull();
  }
});

test('PostgreSQL refuses an array of another element type than its cast', async () => {
  await expect(t.db.query('SELECT $1::int8[]', [int4Array([1])])).rejects.toThrow(
    /element type 23 \(integer\) instead of expected 20/,
  );
});

test('values the types cannot hold are refused before anything is sent', () => {
  expect(() => int4Array([2147483648])).toThrow(RangeError);
  expect(() => int4Array([1.5])).toThrow(RangeError);
  expect(() => int8Array([2 ** 53])).toThrow(RangeError);
  expect(() => int8Array([Number.NaN])).toThrow(RangeError);
  expect(() => textArray(['a\u0000b'])).toThrow(RangeError);
  expect(() => uuidArray(['not-a-uuid'])).toThrow(TypeError);
  expect(() => dateArray(['2026-02-30'])).toThrow(TypeError);
  expect(() => dateArray(['2026-11-28T00:00:00Z'])).toThrow(TypeError);
  expect(pgDate('2000-01-01')).toBe(0);
  expect(pgDate('1999-12-31')).toBe(-1);
});
