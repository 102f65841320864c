import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/*
 * Migration 071 (fleet alerts): applied over seeded city events and subscriptions of migration 051, which stay the
 * authority's; the alerts table keeps one open alert per kind and subject and refuses rows that contradict
 * themselves.
 */

let database: TestDatabase;
const now = new Date('2026-11-20T06:00:00Z');
let organisationId: string;
let structureId: string;
let deviceId: string;
let subscriptionId: string;
let eventId: string;

const sqlState = async (work: Promise<unknown>) => {
  try {
    await work;
    return null;
  } catch (error) {
    return (error as { code?: string }).code;
  }
};

beforeAll(async () => {
  database = await createTestDatabase({ upTo: 70 });
  const db = database.db;
  const { rows: org } = await db.query<{ id: string }>(
    "INSERT INTO organisations (name, kind, created_at) VALUES ('Op', 'operator', $1) RETURNING id",
    [now],
  );
  organisationId = org[0]!.id;
  const { rows: structure } = await db.query<{ id: string }>(
    `INSERT INTO structures (organisation_id, code, district, format, created_at)
     VALUES ($1, 'S-1', 'almaly', 'billboard', $2) RETURNING id`,
    [organisationId, now],
  );
  structureId = structure[0]!.id;
  const { rows: device } = await db.query<{ id: string }>(
    'INSERT INTO devices (structure_id, created_at) VALUES ($1, $2) RETURNING id',
    [structureId, now],
  );
  deviceId = device[0]!.id;
  const { rows: subscription } = await db.query<{ id: string }>(
    `INSERT INTO webhook_subscriptions (url, secret, types, created_at)
     VALUES ('https://receiver.example/hook', 'a-secret-of-some-length', '{declared_vs_actual}', $1) RETURNING id`,
    [now],
  );
  subscriptionId = subscription[0]!.id;
  eventId = randomUUID();
  await db.query(
    `INSERT INTO city_events (id, type, subject_key, day, payload, body, created_at)
     VALUES ($1, 'declared_vs_actual', 'x/y/2026-11-19', '2026-11-19', '{}', '{}', $2)`,
    [eventId, now],
  );
  await migrate(db);
});
afterAll(async () => {
  await database?.drop();
});

test('subscriptions and events made before stay the authority’s; the monitor starts empty', async () => {
  const db = database.db;
  const { rows: subscriptions } = await db.query('SELECT id, organisation_id FROM webhook_subscriptions');
  expect(subscriptions).toEqual([{ id: subscriptionId, organisation_id: null }]);
  const { rows: events } = await db.query('SELECT id, organisation_id FROM city_events');
  expect(events).toEqual([{ id: eventId, organisation_id: null }]);
  const { rows: monitor } = await db.query('SELECT evaluated_at, watching_since FROM alert_monitor');
  expect(monitor).toEqual([{ evaluated_at: null, watching_since: null }]);
  expect(await sqlState(db.query('INSERT INTO alert_monitor (id) VALUES (true)'))).toBe('23505');
});

test('one open alert per kind and subject; resolved ones pile up; contradictions are refused', async () => {
  const db = database.db;
  const event = async () => {
    const id = randomUUID();
    await db.query(
      `INSERT INTO city_events (id, type, subject_key, payload, body, created_at, organisation_id)
       VALUES ($1, 'alert_opened', $4, '{}', '{}', $2, $3)`,
      [id, now, organisationId, id],
    );
    return id;
  };
  const insert = async (fields: { kind?: string; installation?: boolean; resolution?: string | null } = {}) =>
    db.query(
      `INSERT INTO alerts (id, kind, subject_key, organisation_id, device_id, installation_id, external_id,
                           structure_id, since, opened_at, opened_event_id, resolution)
       VALUES ($1, $2, $3, $4, $5, NULL, $6, $7, $8, $8, $9, $10)`,
      [
        randomUUID(),
        fields.kind ?? 'device_silent',
        `device:${deviceId}`,
        organisationId,
        deviceId,
        fields.installation ? 'player-1' : null,
        structureId,
        now,
        await event(),
        fields.resolution ?? null,
      ],
    );
  expect(await sqlState(insert())).toBeNull();
  expect(await sqlState(insert())).toBe('23505');
  expect(await sqlState(insert({ kind: 'screen_off' }))).toBeNull();
  // Resolved, the same kind may open again.
  const closing = await event();
  await db.query(
    `UPDATE alerts SET resolved_at = $1, resolution = 'cleared', resolved_event_id = $2
      WHERE kind = 'device_silent' AND resolved_at IS NULL`,
    [now, closing],
  );
  expect(await sqlState(insert())).toBeNull();
  expect(await sqlState(insert({ kind: 'fire' }))).toBe('23514');
  expect(await sqlState(insert({ kind: 'queue_lag', installation: true }))).toBe('23514');
  expect(await sqlState(insert({ kind: 'cms_player_no_plays' }))).toBe('23514');
  expect(await sqlState(insert({ kind: 'queue_lag', resolution: 'cleared' }))).toBe('23514');
  // A subscription or an event names an organisation that exists.
  expect(
    await sqlState(
      db.query('UPDATE webhook_subscriptions SET organisation_id = $1', [
        '00000000-0000-4000-8000-000000000000',
      ]),
    ),
  ).toBe('23503');
});
