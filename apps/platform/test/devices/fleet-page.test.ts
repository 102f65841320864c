import { createCsr, es256Sign, exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { fleetListStatement } from '../../src/devices/fleet.js';
import { type Device, enrol, MINUTE, modeChange, play, sendBatch } from '../alerts/helpers.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

/*
 * GET /api/v1/console/devices as the fleet page reads it (issue 22, item 2): one page of devices, searched, filtered
 * by state and sorted on the server, the whole fleet counted by state, every parameter checked, and an operator's
 * view limited to its own devices. GET /api/v1/console/devices/{id}/activity: the device page's batches, answers,
 * clock offset, rejects and refused handshakes. Devices are enrolled and batches sent through the real routes.
 */

const T0 = new Date('2026-11-20T06:00:00.000Z');
const DAY = 86_400_000;

let p: TestPlatform;
let operator: { id: string; key: string };
let other: { id: string; key: string };
const devices: Record<string, Device> = {};
let theirs: Device;

interface Item {
  device_id: string;
  structure_code: string;
  organisation_id: string;
  status: string;
  screen_off: boolean;
  last_batch_at: string | null;
  queue_lag_seconds: number | null;
  certificate_not_after: string | null;
  handshake_refusals_24h: number;
  stuck: unknown;
  open_alerts: string[];
}
interface Page {
  items: Item[];
  total: number;
  offset: number;
  limit: number;
  sort: string;
  order: string;
  summary: Record<string, number>;
}

async function list(query = '', key = operator.key): Promise<Page> {
  const res = await apiCall(p.servers.api, key, 'GET', `/api/v1/console/devices${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json<Page>();
}
const codes = (page: Page) => page.items.map((i) => i.structure_code);

/** A batch whose signed ts is the platform's clock plus `aheadMs` (the agent's clock running ahead). */
async function sendSkewed(device: Device, events: Record<string, unknown>[], aheadMs: number) {
  const body = Buffer.from(
    JSON.stringify({
      schema: 'service.pop/1',
      device_id: device.id,
      ts: new Date(p.clock.now().getTime() + aheadMs).toISOString(),
      batch_seq: device.nextBatch++,
      events,
    }),
  );
  const res = await p.servers.agents.inject({
    method: 'POST',
    url: '/s/v1/telemetry',
    headers: {
      'content-type': 'application/json',
      'x-service-signature': es256Sign(device.privateKey, body),
    },
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ accepted: number; refused: number }>();
}

beforeAll(async () => {
  p = await startTestPlatform({ now: T0 });
  operator = await createOrganisation(p, 'operator', ['console:fleet', 'write:submissions']);
  other = await createOrganisation(p, 'operator', ['console:fleet']);
  const at = (m: number) => new Date(T0.getTime() + m * MINUTE);
  // FP-01 .. FP-12, enrolled in code order; the names say what each is made to be.
  const names = [
    'reporting',
    'silent',
    'never',
    'screen',
    'expiring',
    'refused',
    'stuck',
    'revoked',
    'lag5',
    'lag30',
    'lag90',
    'fresh',
  ];
  for (const [i, name] of names.entries()) {
    const code = `FP-${String(i + 1).padStart(2, '0')}`;
    devices[name] = await enrol(p, operator.key, await createStructure(p, operator.id, { code }));
  }
  theirs = await enrol(p, other.key, await createStructure(p, other.id, { code: 'OTHER-01' }));

  // Two hours ago the silent one last spoke; everything else that reports does so in the last few minutes.
  p.clock.set(at(-120));
  await sendBatch(p, devices['silent']!, [play(devices['silent']!, at(-121))]);
  p.clock.set(at(-3));
  await sendBatch(p, devices['reporting']!, [play(devices['reporting']!, at(-5))]);
  await sendBatch(p, devices['screen']!, [modeChange(devices['screen']!, at(-4), 'normal', 'screen_off')]);
  await sendBatch(p, devices['lag5']!, [play(devices['lag5']!, at(-8))]);
  await sendBatch(p, devices['lag30']!, [play(devices['lag30']!, at(-33))]);
  await sendBatch(p, devices['lag90']!, [play(devices['lag90']!, at(-93))]);
  p.clock.set(at(-1));
  await sendBatch(p, devices['fresh']!, [play(devices['fresh']!, at(-1))]);
  await sendBatch(p, theirs, [play(theirs, at(-2))]);
  p.clock.set(T0);

  // The expiring one holds a certificate issued through enrolment, made to end in 10 days.
  const keyPair = generateEs256KeyPair();
  const reEnrolled = await apiCall(
    p.servers.api,
    operator.key,
    'POST',
    `/api/v1/console/devices/${devices['expiring']!.id}/re-enrol`,
    {
      public_key: exportPublicKeySpki(keyPair.publicKey),
      csr: await createCsr({ subject: 'CN=p', keyPair }),
    },
  );
  expect(reEnrolled.statusCode, reEnrolled.body).toBe(200);
  await p.database.db.query(
    'UPDATE device_certificates SET not_after = $2 WHERE device_id = $1 AND replaced_at IS NULL',
    [devices['expiring']!.id, new Date(T0.getTime() + 10 * DAY)],
  );
  // A refused handshake of the refused one 10 minutes ago, as the devices host records it (migration 070).
  await p.database.db.query(
    `INSERT INTO device_handshake_refusal_counts (minute, device_id, reason, refusals)
     VALUES ($1, $2, 'certificate_expired', 3)`,
    [at(-10), devices['refused']!.id],
  );
  await p.database.db.query(
    `INSERT INTO device_handshake_refusals_recent (key_sha256, at, reason, subject, serial, address, device_id, refusals)
     VALUES ($1, $2, 'certificate_expired', 'CN=x', 'ab12', '10.0.0.7', $3, 3)`,
    ['e'.repeat(64), at(-10), devices['refused']!.id],
  );
  // The stuck one was answered 500 twice after its last batch (migration 069).
  await p.database.db.query(
    `INSERT INTO device_server_errors (device_id, since, last_at, answers, batch_seq, status, code, route)
     VALUES ($1, $2, $3, 2, 1, 500, 'internal_error', 'POST /s/v1/telemetry')`,
    [devices['stuck']!.id, at(-6), at(-5)],
  );
  const revoked = await apiCall(
    p.servers.api,
    operator.key,
    'POST',
    `/api/v1/console/devices/${devices['revoked']!.id}/revoke`,
  );
  expect(revoked.statusCode, revoked.body).toBe(200);
}, 120_000);

afterAll(async () => {
  await p?.close();
});

describe('GET /api/v1/console/devices: one page of the fleet', () => {
  test('the whole fleet counted by state, the first page in code order', async () => {
    const page = await list();
    expect(page).toMatchObject({ total: 12, offset: 0, limit: 50, sort: 'structure', order: 'asc' });
    expect(codes(page)).toEqual(Array.from({ length: 12 }, (_, i) => `FP-${String(i + 1).padStart(2, '0')}`));
    expect(page.summary).toEqual({
      devices: 12,
      // reporting, screen (it sent its screen_off 3 minutes ago), lag5, lag30, lag90, fresh
      reporting: 6,
      silent: 1,
      // never, expiring, refused, stuck: enrolled, never sent a batch
      never_reported: 4,
      screen_off: 1,
      expiring: 1,
      refused: 1,
      stuck: 1,
      revoked: 1,
    });
    const byCode = Object.fromEntries(page.items.map((i) => [i.structure_code, i]));
    expect(byCode['FP-01']).toMatchObject({ status: 'reporting', queue_lag_seconds: 120, screen_off: false });
    expect(byCode['FP-02']).toMatchObject({ status: 'silent' });
    expect(byCode['FP-04']).toMatchObject({ status: 'reporting', screen_off: true });
    expect(byCode['FP-08']).toMatchObject({ status: 'revoked' });
    expect(byCode['FP-06']!.handshake_refusals_24h).toBe(3);
  });

  test('pages of 5: every device once, the total and the counts on each page, an empty page past the end', async () => {
    const seen: string[] = [];
    for (const offset of [0, 5, 10]) {
      const page = await list(`?limit=5&offset=${offset}`);
      expect(page).toMatchObject({ total: 12, offset, limit: 5 });
      expect(page.summary['devices']).toBe(12);
      seen.push(...codes(page));
    }
    expect(seen).toEqual(codes(await list()));
    const past = await list('?limit=5&offset=40');
    expect(past.items).toEqual([]);
    expect(past).toMatchObject({ total: 12, offset: 40 });
    expect(past.summary['silent']).toBe(1);
  });

  test('search by structure code (any case, a part of it) or by the beginning of a device id', async () => {
    expect(codes(await list('?q=fp-1'))).toEqual(['FP-10', 'FP-11', 'FP-12']);
    expect(codes(await list('?q=P-0'))).toHaveLength(9);
    const id = devices['lag30']!.id;
    expect(codes(await list(`?q=${id.slice(0, 8)}`))).toEqual(['FP-10']);
    expect(codes(await list(`?q=${id.toUpperCase()}`))).toEqual(['FP-10']);
    // LIKE's wildcards are taken as they are: no code holds % or _.
    expect((await list('?q=%25')).total).toBe(0);
    expect((await list('?q=_')).total).toBe(0);
    // Search and filter together; the summary stays the whole fleet's.
    const both = await list('?q=FP-0&state=silent');
    expect(codes(both)).toEqual(['FP-02']);
    expect(both.summary['devices']).toBe(12);
    // Another operator's device is not found by its id.
    expect((await list(`?q=${theirs.id}`)).total).toBe(0);
  });

  test('each state filter lists exactly the devices in that state', async () => {
    const expected: Record<string, string[]> = {
      reporting: ['FP-01', 'FP-04', 'FP-09', 'FP-10', 'FP-11', 'FP-12'],
      silent: ['FP-02'],
      never_reported: ['FP-03', 'FP-05', 'FP-06', 'FP-07'],
      screen_off: ['FP-04'],
      expiring: ['FP-05'],
      refused: ['FP-06'],
      stuck: ['FP-07'],
      revoked: ['FP-08'],
    };
    const summary = (await list()).summary;
    for (const [state, want] of Object.entries(expected)) {
      const page = await list(`?state=${state}`);
      expect(codes(page), state).toEqual(want);
      expect(page.total, state).toBe(want.length);
      expect(summary[state], state).toBe(want.length);
    }
  });

  test('sorted by last batch and by queue lag, either way, devices without the figure last', async () => {
    const lastBatch = await list('?sort=last_batch');
    expect(lastBatch.order).toBe('asc');
    // Oldest first: the silent one (2 h), then those of 3 minutes ago by code, then 1 minute ago; never-sent last.
    expect(codes(lastBatch)).toEqual([
      'FP-02',
      'FP-01',
      'FP-04',
      'FP-09',
      'FP-10',
      'FP-11',
      'FP-12',
      'FP-03',
      'FP-05',
      'FP-06',
      'FP-07',
      'FP-08',
    ]);
    expect(codes(await list('?sort=last_batch&order=desc')).slice(0, 2)).toEqual(['FP-12', 'FP-01']);
    const lag = await list('?sort=queue_lag&limit=5');
    expect(lag.order).toBe('desc');
    expect(lag.items.map((i) => [i.structure_code, i.queue_lag_seconds])).toEqual([
      ['FP-11', 90 * 60],
      ['FP-10', 30 * 60],
      ['FP-09', 5 * 60],
      ['FP-01', 120],
      ['FP-02', 60],
    ]);
    const ascending = await list('?sort=queue_lag&order=asc&limit=4');
    expect(codes(ascending)).toEqual(['FP-12', 'FP-02', 'FP-04', 'FP-01']);
    expect(ascending.items.map((i) => i.queue_lag_seconds)).toEqual([0, 60, 60, 120]);
    expect(codes(await list('?sort=structure&order=desc&limit=2'))).toEqual(['FP-12', 'FP-11']);
  });

  test('every bad parameter is 422 validation_failed naming it, never a 5xx nor a partial list', async () => {
    const bad = [
      'limit=0',
      'limit=201',
      'limit=abc',
      'limit=1.5',
      'offset=-1',
      'offset=99999999',
      'state=sleeping',
      'sort=code',
      'order=up',
      'colour=red',
      `q=${'x'.repeat(101)}`,
      'q=a%00b',
      'q=a%0Ab',
      'state=silent&state=revoked',
    ];
    for (const query of bad) {
      const res = await apiCall(p.servers.api, operator.key, 'GET', `/api/v1/console/devices?${query}`);
      expect(res.statusCode, `${query}: ${res.body}`).toBe(422);
      expect(res.headers['content-type'], query).toContain('application/problem+json');
      const problem = res.json<{ code: string; errors: { path: string }[] }>();
      expect(problem.code, query).toBe('validation_failed');
      expect(problem.errors.length, query).toBeGreaterThan(0);
      expect(problem.errors[0]!.path, query).toMatch(/^querystring/);
    }
  });

  test("an operator sees only its own fleet; the authority sees every device; others' devices are 404", async () => {
    const theirsPage = await list('', other.key);
    expect(theirsPage.items.map((i) => i.device_id)).toEqual([theirs.id]);
    expect(theirsPage.summary).toMatchObject({ devices: 1, reporting: 1, silent: 0 });
    const all = await list('', p.adminKey);
    expect(all.total).toBe(13);
    expect(all.summary['devices']).toBe(13);
    expect(codes(await list('?q=OTHER', p.adminKey))).toEqual(['OTHER-01']);

    const mine = devices['reporting']!.id;
    for (const path of [`/api/v1/console/devices/${mine}`, `/api/v1/console/devices/${mine}/activity`]) {
      const res = await apiCall(p.servers.api, other.key, 'GET', path);
      expect(res.statusCode, path).toBe(404);
      expect(res.json<{ code: string }>().code).toBe('not_found');
    }
    const nonsense = await apiCall(
      p.servers.api,
      operator.key,
      'GET',
      '/api/v1/console/devices/nope/activity',
    );
    expect(nonsense.statusCode).toBe(404);
    const anonymous = await apiCall(p.servers.api, null, 'GET', '/api/v1/console/devices?state=silent');
    expect(anonymous.statusCode).toBe(401);
    const agency = await createOrganisation(p, 'agency', ['write:submissions']);
    const denied = await apiCall(
      p.servers.api,
      agency.key,
      'GET',
      `/api/v1/console/devices/${mine}/activity`,
    );
    expect(denied.statusCode).toBe(403);
  });

  test('the page reads the newest batch, mode change and certificate of each device through their indexes', async () => {
    const { sql, values } = fleetListStatement({
      organisationId: null,
      now: T0,
      silentAfterMs: 30 * MINUTE,
      query: { state: 'screen_off', sort: 'queue_lag' },
    });
    const client = await p.database.db.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_seqscan = off');
      const plan = (await client.query(`EXPLAIN ${sql}`, values)).rows
        .map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN'])
        .join('\n');
      expect(plan, plan).toContain('pop_batches_owner_received');
      expect(plan, plan).toContain('device_certificates_newest');
      // The newest mode change through each month partition's copy of the index of migration 076, read backwards:
      // one step, whatever other events the device sent.
      const used = [...plan.matchAll(/Index Scan Backward using (\S+) on pop_records_/g)].map((m) => m[1]!);
      expect(used.length, plan).toBeGreaterThan(0);
      const { rows } = await client.query<{ indexdef: string }>(
        'SELECT indexdef FROM pg_indexes WHERE indexname = ANY ($1)',
        [used],
      );
      expect(rows.length, plan).toBeGreaterThan(0);
      for (const row of rows) expect(row.indexdef).toMatch(/WHERE \(kind = 'mode_change'::text\)$/);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});

describe('GET /api/v1/console/devices/{id}/activity: the device page', () => {
  test('its fleet row, newest batches with their answers, the clock offset, rejects and refusals', async () => {
    const device = devices['fresh']!;
    p.clock.set(new Date(T0.getTime() + MINUTE));
    const now = p.clock.now();
    // The agent's clock runs 90 s ahead; the batch holds a counted play, one refused (too short) and a reject.
    const answer = await sendSkewed(
      device,
      [
        play(device, new Date(now.getTime() - 2 * MINUTE)),
        { ...play(device, new Date(now.getTime() - MINUTE)), duration_ms: 400 },
        {
          kind: 'reject',
          seq: device.nextSeq++,
          at: new Date(now.getTime() - 30_000).toISOString(),
          code: 'NO_SIGNATURE',
          // As the agent writes it (apps/agent/src/media/library.ts).
          detail: {
            file: 'spring-sale.mp4',
            media_sha256: 'a'.repeat(64),
            reason: 'no signature beside the file',
            approval_number: 'APR-2026-000002',
          },
        },
      ],
      90_000,
    );
    expect(answer.refused).toBe(1);
    const res = await apiCall(
      p.servers.api,
      operator.key,
      'GET',
      `/api/v1/console/devices/${device.id}/activity`,
    );
    expect(res.statusCode, res.body).toBe(200);
    const activity = res.json<{
      device: Item;
      batches: {
        batch_seq: number;
        channel: string;
        clock_offset_ms: number | null;
        record_count: number;
        answer: { received: number; accepted: number; refused: number; refusals: unknown[] };
      }[];
      clock_offset: { ms: number; at: string } | null;
      rejects: { code: string; approval_number: string | null }[];
      refusals: unknown[];
    }>();
    expect(activity.device).toMatchObject({
      device_id: device.id,
      structure_code: 'FP-12',
      status: 'reporting',
    });
    expect(activity.batches.map((b) => b.batch_seq)).toEqual([2, 1]);
    expect(activity.batches[0]).toMatchObject({
      channel: 'agent',
      clock_offset_ms: 90_000,
      record_count: 2,
      answer: { received: 3, accepted: 2, refused: 1 },
    });
    expect(activity.batches[0]!.answer.refusals).toHaveLength(1);
    expect(activity.batches[1]!.clock_offset_ms).toBe(0);
    expect(activity.clock_offset).toEqual({ ms: 90_000, at: now.toISOString() });
    expect(activity.rejects).toMatchObject([
      {
        code: 'NO_SIGNATURE',
        approval_number: 'APR-2026-000002',
        media_sha256: 'a'.repeat(64),
        file: 'spring-sale.mp4',
        reason: 'no signature beside the file',
      },
    ]);
    expect(activity.refusals).toEqual([]);

    const refused = await apiCall(
      p.servers.api,
      operator.key,
      'GET',
      `/api/v1/console/devices/${devices['refused']!.id}/activity`,
    );
    expect(refused.json()).toMatchObject({
      device: { status: 'never_reported', handshake_refusals_24h: 3 },
      batches: [],
      clock_offset: null,
      rejects: [],
      refusals: [{ reason: 'certificate_expired', serial: 'ab12', address: '10.0.0.7', refusals: 3 }],
    });
    p.clock.set(T0);
  });
});
