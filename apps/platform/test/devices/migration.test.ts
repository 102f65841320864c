import { afterAll, beforeAll, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let database: TestDatabase;
const now = new Date('2026-11-20T06:00:00Z');
const hex = (c: string) => c.repeat(64);
let deviceId: string;

beforeAll(async () => {
  // Migration 010 on a database holding devices from before it.
  database = await createTestDatabase({ upTo: 9 });
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
  await db.query(
    `INSERT INTO device_keys (device_id, public_key_spki, fingerprint, registered_at) VALUES ($1, 'AAAA', $2, $3)`,
    [deviceId, hex('a'), now],
  );
  await migrate(db, { upTo: 19 });
});
afterAll(async () => {
  await database?.drop();
});

const insertCertificate = (serial: string, extra: Record<string, unknown> = {}) => {
  const row = {
    serial,
    device_id: deviceId,
    certificate_sha256: hex(serial.slice(0, 1)),
    key_fingerprint: hex('a'),
    pem: 'PEM',
    not_before: now,
    not_after: new Date(now.getTime() + 365 * 86_400_000),
    issued_at: now,
    issued_by: 'enrolment',
    ...extra,
  };
  const columns = Object.keys(row);
  return database.db.query(
    `INSERT INTO device_certificates (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`,
    Object.values(row),
  );
};

test('existing devices and keys are kept as they were; the new columns start empty', async () => {
  const { rows } = await database.db.query('SELECT re_enrolled_at, revoked_at FROM devices WHERE id = $1', [
    deviceId,
  ]);
  expect(rows).toEqual([{ re_enrolled_at: null, revoked_at: null }]);
  const { rows: keys } = await database.db.query('SELECT fingerprint, accepted_until FROM device_keys');
  expect(keys).toEqual([{ fingerprint: hex('a'), accepted_until: null }]);
});

test('certificates: one newest per device; a renewal names its source and CSR; replaced goes with old_valid_until', async () => {
  await insertCertificate('1a');
  await expect(insertCertificate('2a')).rejects.toMatchObject({ code: '23505' });
  await database.db.query(
    'UPDATE device_certificates SET replaced_at = $2, old_valid_until = $3 WHERE serial = $1',
    ['1a', now, new Date(now.getTime() + 86_400_000)],
  );
  await expect(insertCertificate('3a', { issued_by: 'renewal' })).rejects.toMatchObject({ code: '23514' });
  await insertCertificate('3a', { issued_by: 'renewal', renewed_from: '1a', csr_sha256: hex('c') });
  // One renewal per certificate.
  await database.db.query(
    'UPDATE device_certificates SET replaced_at = $2, old_valid_until = $2 WHERE serial = $1',
    ['3a', now],
  );
  await expect(
    insertCertificate('4a', { issued_by: 'renewal', renewed_from: '1a', csr_sha256: hex('d') }),
  ).rejects.toMatchObject({ code: '23505' });
  await expect(
    database.db.query('UPDATE device_certificates SET replaced_at = NULL WHERE serial = $1', ['1a']),
  ).rejects.toMatchObject({ code: '23514' });
  await expect(insertCertificate('XY')).rejects.toMatchObject({ code: '23514' });
});

test('force-renewal grants belong to a device and end after they start', async () => {
  await database.db.query(
    'INSERT INTO device_force_renewal_grants (device_id, granted_at, valid_until, granted_by) VALUES ($1, $2, $3, $4)',
    [deviceId, now, new Date(now.getTime() + 86_400_000), 'key-1'],
  );
  await expect(
    database.db.query(
      'INSERT INTO device_force_renewal_grants (device_id, granted_at, valid_until, granted_by) VALUES ($1, $2, $2, $3)',
      [deviceId, now, 'key-1'],
    ),
  ).rejects.toMatchObject({ code: '23514' });
});
