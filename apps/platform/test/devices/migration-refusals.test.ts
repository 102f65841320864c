import { afterAll, beforeAll, expect, test } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/*
 * Migrations 069 and 070: 5xx answers per device, refusal counts and the recent refusals, each bounded by the
 * database's own constraints.
 */

let database: TestDatabase;
let deviceId: string;
const now = new Date('2026-11-20T06:00:00Z');

beforeAll(async () => {
  database = await createTestDatabase();
  const db = database.db;
  const { rows: org } = await db.query<{ id: string }>(
    "INSERT INTO organisations (name, kind, created_at) VALUES ('Op', 'operator', $1) RETURNING id",
    [now],
  );
  const { rows: structure } = await db.query<{ id: string }>(
    `INSERT INTO structures (organisation_id, code, district, format, created_at)
     VALUES ($1, 'S-1', 'almaly', 'billboard', $2) RETURNING id`,
    [org[0]!.id, now],
  );
  const { rows: device } = await db.query<{ id: string }>(
    'INSERT INTO devices (structure_id, created_at) VALUES ($1, $2) RETURNING id',
    [structure[0]!.id, now],
  );
  deviceId = device[0]!.id;
});
afterAll(async () => {
  await database?.drop();
});

const sqlState = async (work: Promise<unknown>) => {
  try {
    await work;
    return null;
  } catch (error) {
    return (error as { code?: string }).code;
  }
};

test('one row of 5xx answers per device, of a known device, with a 5xx status', async () => {
  const db = database.db;
  const insert = (device: string, status: number) =>
    db.query(
      `INSERT INTO device_server_errors (device_id, since, last_at, answers, status, code)
       VALUES ($1, $2, $2, 1, $3, 'internal_error')`,
      [device, now, status],
    );
  expect(await sqlState(insert(deviceId, 500))).toBeNull();
  expect(await sqlState(insert(deviceId, 500))).toBe('23505');
  expect(await sqlState(insert('00000000-0000-4000-8000-000000000000', 500))).toBe('23503');
  await db.query('DELETE FROM device_server_errors');
  expect(await sqlState(insert(deviceId, 429))).toBe('23514');
});

test('refusal counts: one row per minute, device and reason, the anonymous ones too', async () => {
  const db = database.db;
  const add = (device: string | null, minute: Date, refusals: number) =>
    db.query(
      `INSERT INTO device_handshake_refusal_counts AS c (minute, device_id, reason, refusals)
       VALUES ($1, $2, 'no_certificate', $3)
       ON CONFLICT (minute, device_id, reason) DO UPDATE SET refusals = c.refusals + EXCLUDED.refusals`,
      [minute, device, refusals],
    );
  await add(null, now, 2);
  await add(null, now, 3);
  await add(deviceId, now, 1);
  const { rows } = await db.query(
    'SELECT device_id, refusals FROM device_handshake_refusal_counts ORDER BY device_id NULLS FIRST',
  );
  expect(rows).toEqual([
    { device_id: null, refusals: 5 },
    { device_id: deviceId, refusals: 1 },
  ]);
  expect(await sqlState(add(null, new Date(now.getTime() + 1500), 1))).toBe('23514');
  expect(
    await sqlState(
      db.query(
        "INSERT INTO device_handshake_refusal_counts (minute, reason, refusals) VALUES ($1, 'No Certificate', 1)",
        [now],
      ),
    ),
  ).toBe('23514');
});

test('recent refusals: bounded texts', async () => {
  const db = database.db;
  const insert = (subject: string) =>
    db.query(
      `INSERT INTO device_handshake_refusals_recent (key_sha256, at, reason, subject, refusals)
       VALUES ($1, $2, 'unknown_ca', $3, 1)`,
      ['a'.repeat(64), now, subject],
    );
  expect(await sqlState(insert('x'.repeat(513)))).toBe('23514');
  expect(await sqlState(insert('CN=x'))).toBeNull();
});
