import { expect } from 'vitest';
import { apiCall, createOrganisation, createStructure } from '../support/platform.js';
import { insertDevice, play, sendBatch } from './helpers.js';
import { popWorld } from './world.js';

const test = popWorld();

test('GET /api/v1/console/pop/quality: flagged records by flag and refused ones by reason', async ({
  db,
  servers,
  platform,
}) => {
  const op = await createOrganisation(platform, 'operator', ['write:submissions']);
  const structure = await createStructure(platform, op.id);
  const device = await insertDevice(db, structure);
  const res = await sendBatch(servers, device, 0, [
    play(1), // approval unknown: flagged
    play(2, { duration_ms: 200 }), // too_short: refused
    play(3, { duration_ms: 300 }), // too_short: refused
  ]);
  expect(res.statusCode, res.body).toBe(200);
  const day = '2026-11-20'; // the Almaty receive day of T0
  const q = await apiCall(
    servers.api,
    platform.adminKey,
    'GET',
    `/api/v1/console/pop/quality?from=${day}&to=${day}`,
  );
  expect(q.statusCode, q.body).toBe(200);
  expect(q.json().refusals).toEqual([{ reason: 'too_short', records: 2 }]);
  expect(q.json().flags).toEqual(expect.arrayContaining([{ flag: 'approval_unknown', records: 1 }]));
  const missing = await apiCall(servers.api, platform.adminKey, 'GET', '/api/v1/console/pop/quality');
  expect(missing.statusCode).toBe(422);
  const operator = await apiCall(
    servers.api,
    op.key,
    'GET',
    `/api/v1/console/pop/quality?from=${day}&to=${day}`,
  );
  expect(operator.statusCode).toBe(403);
});

test('console pop queries answer 422 problem+json, never 500, for a day or a name PostgreSQL cannot hold', async ({
  servers,
  platform,
}) => {
  const urls = [
    // ajv's "date" takes year 0000, which PostgreSQL's date refuses.
    '/api/v1/console/pop/quality?from=0000-01-01&to=2026-01-01',
    '/api/v1/console/pop/counts?from=0000-01-01',
    '/api/v1/console/pop/counts?to=0000-12-31',
    // PostgreSQL text holds no U+0000.
    '/api/v1/console/pop/counts?player=%00abc',
    '/api/v1/console/pop/counts?approval_number=A%00',
  ];
  for (const url of urls) {
    const res = await apiCall(servers.api, platform.adminKey, 'GET', url);
    expect(res.statusCode, `${url}: ${res.body}`).toBe(422);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json().code).toBe('validation_failed');
  }
  const fine = await apiCall(
    servers.api,
    platform.adminKey,
    'GET',
    '/api/v1/console/pop/counts?from=0001-01-01',
  );
  expect(fine.statusCode, fine.body).toBe(200);
});
