import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createCsr, es256Sign, exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import { addDays, almatyDayStart } from '@ooh/protocol';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { queryAds } from '../../src/ad-management/repository.js';
import { fleetListStatement } from '../../src/devices/fleet.js';
import { type Device, enrol } from '../alerts/helpers.js';
import { approve, CATEGORY_ID, createDraft, send, upload } from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

/*
 * DESIGN.md section 8: "All calendar logic is Asia/Almaty through the platform's tz database (UTC+5 since 2024-03-01,
 * UTC+6 before) ... Never compute a local date by adding a fixed offset." Every Almaty day, hour, month and working
 * hour is checked here across the change of 2024-03-01 (2024-02-29 lasted 25 hours: 23:00-24:00 came twice), at
 * 18:59:59.999Z and 19:00:00.000Z (Almaty midnight since the change), with the process in another time zone than
 * Almaty and UTC, and with PostgreSQL sessions in other time zones than UTC: the answers must not change.
 */

const execFileAsync = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const SRC = fileURLToPath(new URL('../../src/', import.meta.url));
const PROTOCOL = fileURLToPath(new URL('../../../../packages/protocol/src/index.ts', import.meta.url));

/** The zone the platform's process runs in below: neither Almaty nor UTC, with summer time. */
const PROCESS_TZ = 'America/New_York';
/** The session time zone of the platform's PostgreSQL connections below (PGOPTIONS), as a server may set it. */
const SESSION_TZ = 'Europe/Moscow';

const saved = { TZ: process.env['TZ'], PGOPTIONS: process.env['PGOPTIONS'] };
function restore(name: 'TZ' | 'PGOPTIONS') {
  if (saved[name] === undefined) delete process.env[name];
  else process.env[name] = saved[name];
}
beforeAll(() => {
  // Node applies a TZ set at run time to Date and to Intl's default zone at once.
  process.env['TZ'] = PROCESS_TZ;
  // node-postgres sends PGOPTIONS with every new connection: each session of the test databases starts in SESSION_TZ.
  process.env['PGOPTIONS'] = `-c TimeZone=${SESSION_TZ}`;
});
afterAll(() => {
  restore('TZ');
  restore('PGOPTIONS');
});

/** A platform at `now` with an authority of its own (the shared one was made in 2026: not valid yet in 2004). */
async function platformAt(now: string): Promise<{ p: TestPlatform; close(): Promise<void> }> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'ooh-almaty-time-'));
  const p = await startTestPlatform({ now: new Date(now), dataDir });
  return {
    p,
    close: async () => {
      await p.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** A PostgreSQL session on `url` in `timeZone` (a pool client, as the platform's queries take). */
async function session(url: string, timeZone: string): Promise<pg.PoolClient & { close(): Promise<void> }> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const client = await pool.connect();
  await client.query(`SET TimeZone = '${timeZone}'`);
  // close, not end: the pool's own end() calls each idle client's end(), which must stay the client's.
  return Object.assign(client, {
    close: async () => {
      client.release();
      await pool.end();
    },
  });
}

/*
 * The calendar functions the platform's features call, computed in a child process whose TZ is each of these zones
 * (unset: the machine's). Each answer is the Almaty one, whatever the zone.
 */
const CHILD = `
const p = await import(${JSON.stringify(PROTOCOL)});
const src = ${JSON.stringify(SRC)};
const wh = await import(src + 'working-hours/index.ts');
const oh = await import(src + 'alerts/operating-hours.ts');
const st = await import(src + 'alerts/settings.ts');
const od = await import(src + 'open-data/release.ts');
const fh = await import(src + 'reports/fleet-health.ts');
const days = await import(src + 'reports/days.ts');
const plays = await import(src + 'reports/plays.ts');
const ce = await import(src + 'city-events/declared-vs-actual.ts');
const judge = await import(src + 'pop/judge.ts');
const instants = ['2024-02-29T17:59:59.999Z', '2024-02-29T18:00:00.000Z', '2024-02-29T18:59:59.999Z',
  '2024-02-29T19:00:00.000Z', '2025-12-31T18:59:59.999Z', '2025-12-31T19:00:00.000Z', '2026-11-20T18:59:59.999Z',
  '2026-11-20T19:00:00.000Z'];
const iso = (d) => d.toISOString();
const calendar = wh.workingCalendar();
const hours = st.parseOperatingHours('07:00-23:00');
const out = {
  zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
  localHour: new Date('2024-02-29T19:00:00.000Z').getHours(),
  date: instants.map((t) => p.almatyDate(new Date(t))),
  popDay: instants.map((t) => judge.almatyDayOfMs(Date.parse(t))),
  month: instants.map((t) => p.almatyMonth(new Date(t))),
  hour: instants.map((t) => p.almatyHour(new Date(t))),
  formatted: instants.map((t) => p.formatAlmaty(new Date(t), { milliseconds: true })),
  daypart: instants.map((t) => p.daypartOf(new Date(t))),
  lastFullDay: instants.map((t) => ce.lastFullDay(new Date(t))),
  utcDay: instants.map((t) => days.dayOf('UTC', new Date(t))),
  dueMonthLag1: ['2024-03-31T18:59:59.999Z', '2024-03-31T19:00:00.000Z'].map((t) => od.latestDueMonth(new Date(t), 1)),
  dayStart: ['2024-02-28', '2024-02-29', '2024-03-01'].map((d) => iso(p.almatyDayStart(d))),
  dayEnd: ['2024-02-28', '2024-02-29', '2024-03-01'].map((d) => iso(p.almatyDayEnd(d))),
  monthStartEnd: [iso(p.almatyMonthStart('2024-03')), iso(p.almatyMonthEnd('2024-02'))],
  hoursOfDay: ['2024-02-28', '2024-02-29', '2024-03-01'].map((d) => plays.almatyHours(d, d).length),
  monthHours: ['2024-02', '2024-03'].map((m) => od.monthHourDayparts(m).epochHours.length),
  wallClock: [['2024-02-29', 9], ['2024-02-29', 18], ['2024-03-01', 9], ['2024-03-01', 0]]
    .map(([d, h]) => iso(wh.almatyWallClock(d, h))),
  due: ['2024-02-28T18:59:59.999Z', '2024-02-29T11:00:00.000Z', '2024-02-29T18:59:59.999Z', '2024-02-29T19:00:00.000Z',
    '2026-12-15T18:59:59.999Z', '2026-12-16T19:00:00.000Z']
    .map((t) => p.formatAlmaty(wh.addWorkingHours(new Date(t), 4, calendar).due)),
  operating: ['2024-02-29T01:00:00.000Z', '2024-02-29T16:59:59.999Z', '2024-02-29T17:00:00.000Z',
    '2024-02-29T18:30:00.000Z', '2024-03-01T01:59:59.999Z', '2024-03-01T02:00:00.000Z']
    .map((t) => oh.operatingWindowAt(new Date(t), hours).open),
  buckets: fh.bucketsOf({ bucket: 'day', days: 2 }, new Date('2024-02-29T19:00:00.000Z'))
    .map((b) => [iso(b.start), iso(b.end)]),
  live: (() => {
    const i = days.liveInterval({ validFrom: '2024-02-29', validUntil: '2024-02-29', revokedAt: null });
    return [iso(i.from), iso(i.until)];
  })(),
  declared: days.declaredOnDay('Asia/Almaty', '2024-02-29',
    [days.liveInterval({ validFrom: '2024-02-28', validUntil: '2024-03-01', revokedAt: null })], 100,
    new Date('2024-02-29T19:00:00.000Z')),
};
process.stdout.write(JSON.stringify(out));
`;

const EXPECTED = {
  // 17:59:59.999Z is 23:59:59.999 at +06; 18:00Z is 23:00 again, at +05; 19:00Z is midnight of 1 March.
  date: [
    '2024-02-29',
    '2024-02-29',
    '2024-02-29',
    '2024-03-01',
    '2025-12-31',
    '2026-01-01',
    '2026-11-20',
    '2026-11-21',
  ],
  month: ['2024-02', '2024-02', '2024-02', '2024-03', '2025-12', '2026-01', '2026-11', '2026-11'],
  hour: [23, 23, 23, 0, 23, 0, 23, 0],
  formatted: [
    '2024-02-29T23:59:59.999+06:00',
    '2024-02-29T23:00:00.000+05:00',
    '2024-02-29T23:59:59.999+05:00',
    '2024-03-01T00:00:00.000+05:00',
    '2025-12-31T23:59:59.999+05:00',
    '2026-01-01T00:00:00.000+05:00',
    '2026-11-20T23:59:59.999+05:00',
    '2026-11-21T00:00:00.000+05:00',
  ],
  daypart: ['late', 'late', 'late', 'night', 'late', 'night', 'late', 'night'],
  lastFullDay: [
    '2024-02-28',
    '2024-02-28',
    '2024-02-28',
    '2024-02-29',
    '2025-12-30',
    '2025-12-31',
    '2026-11-19',
    '2026-11-20',
  ],
  utcDay: [
    '2024-02-29',
    '2024-02-29',
    '2024-02-29',
    '2024-02-29',
    '2025-12-31',
    '2025-12-31',
    '2026-11-20',
    '2026-11-20',
  ],
  // Month M is released from 00:00 Almaty of the first day of M + 1 + lag.
  dueMonthLag1: ['2024-01', '2024-02'],
  dayStart: ['2024-02-27T18:00:00.000Z', '2024-02-28T18:00:00.000Z', '2024-02-29T19:00:00.000Z'],
  dayEnd: ['2024-02-28T18:00:00.000Z', '2024-02-29T19:00:00.000Z', '2024-03-01T19:00:00.000Z'],
  monthStartEnd: ['2024-02-29T19:00:00.000Z', '2024-02-29T19:00:00.000Z'],
  hoursOfDay: [24, 25, 24],
  monthHours: [29 * 24 + 1, 31 * 24],
  wallClock: [
    '2024-02-29T03:00:00.000Z',
    '2024-02-29T12:00:00.000Z',
    '2024-03-01T04:00:00.000Z',
    '2024-02-29T19:00:00.000Z',
  ],
  due: [
    '2024-02-29T13:00:00+06:00',
    '2024-03-01T12:00:00+05:00',
    '2024-03-01T13:00:00+05:00',
    '2024-03-01T13:00:00+05:00',
    // Wednesday 16 December 2026 is Independence Day.
    '2026-12-17T13:00:00+05:00',
    '2026-12-17T13:00:00+05:00',
  ],
  // 07:00-23:00 Almaty: on 29 February 23:00 came first at 17:00Z (+06); 07:00 of 1 March is 02:00Z (+05).
  operating: [true, true, false, false, false, true],
  buckets: [
    ['2024-02-28T18:00:00.000Z', '2024-02-29T19:00:00.000Z'],
    ['2024-02-29T19:00:00.000Z', '2024-03-01T19:00:00.000Z'],
  ],
  live: ['2024-02-28T18:00:00.000Z', '2024-02-29T19:00:00.000Z'],
  declared: { declared: 100, liveHours: 25, compared: true },
};

describe('calendar functions give Almaty answers whatever the process time zone (child processes)', () => {
  test.each([
    ['unset', null, null],
    ['UTC', 'UTC', 19],
    ['Asia/Almaty', 'Asia/Almaty', 0],
    ['America/New_York', 'America/New_York', 14],
    ['Asia/Kolkata', 'Asia/Kolkata', 0],
    ['Pacific/Kiritimati', 'Pacific/Kiritimati', 9],
    ['Etc/GMT+12', 'Etc/GMT+12', 7],
  ])(
    'TZ=%s',
    async (_name, tz, localHour) => {
      const env: NodeJS.ProcessEnv = { ...process.env };
      delete env['TZ'];
      if (tz !== null) env['TZ'] = tz;
      const { stdout } = await execFileAsync(
        process.execPath,
        ['--conditions=source', '--import', 'tsx', '--input-type=module', '-e', CHILD],
        { cwd: ROOT, env, maxBuffer: 1 << 20 },
      );
      const { zone, localHour: hour, popDay, ...answers } = JSON.parse(stdout);
      if (tz !== null) {
        // The child really ran in that zone.
        expect(zone).toBe(new Intl.DateTimeFormat('en', { timeZone: tz }).resolvedOptions().timeZone);
        expect(hour).toBe(localHour);
      }
      expect(popDay).toEqual(EXPECTED.date);
      expect(answers).toEqual(EXPECTED);
    },
    60_000,
  );
});

describe(`the platform with its process in ${PROCESS_TZ} and its PostgreSQL sessions in ${SESSION_TZ}`, () => {
  let p: TestPlatform;
  let close: () => Promise<void>;
  let operator: { id: string; key: string };
  let partner: { id: string; key: string };
  let structure: { id: string; code: string };
  let device: Device;
  let counter = 0;

  const at = (iso: string) => p.clock.set(new Date(iso));
  const get = (key: string, url: string) => apiCall(p.servers.api, key, 'GET', url);

  /** A fast-track draft with its media, sent at `iso`: its review_due_at. */
  async function sentAt(iso: string): Promise<string> {
    counter += 1;
    const draft = await createDraft(p, operator.key, { structure_ids: [structure.id], fast_track: true });
    const up = await upload(p, operator.key, draft.id, png(16, 9, 100 + counter), 'image/png');
    expect(up.statusCode, up.body).toBe(200);
    at(iso);
    const res = await send(p, operator.key, draft.id);
    expect(res.statusCode, res.body).toBe(200);
    const read = await get(operator.key, `/api/v1/submissions/${draft.id}`);
    expect(read.json().review_due_at).toBe(res.json().review_due_at);
    return res.json().review_due_at;
  }

  /** A programmatic submission of `partner` for [from, to], sent and approved now: its id and approval number. */
  async function approved(from: string, to: string): Promise<{ id: string; number: string }> {
    counter += 1;
    const res = await apiCall(p.servers.api, partner.key, 'POST', '/api/v1/submissions', {
      advertiser_name: 'Acme LLP',
      period_from: from,
      period_to: to,
      structure_ids: [structure.id],
      category_id: CATEGORY_ID,
      channel: 'programmatic',
      external_refs: { crid: `tz-${counter}`, adomain: ['acme.kz'], dsp: 'dsp-1', ssp: 'ssp-1' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json<{ id: string }>().id;
    const up = await upload(p, partner.key, id, png(32, 16, 200 + counter), 'image/png');
    expect(up.statusCode, up.body).toBe(200);
    const sent = await send(p, partner.key, id);
    expect(sent.statusCode, sent.body).toBe(200);
    const ok = await approve(p, id);
    expect(ok.statusCode, ok.body).toBe(201);
    return { id, number: ok.json<{ approval_number: string }>().approval_number };
  }

  async function ad(id: string): Promise<{ status: number; ext: { status: string }; lastmod: number }> {
    const res = await get(partner.key, `/api/v1/ads/${id}`);
    expect(res.statusCode, res.body).toBe(200);
    return res.json().ads[0].audit;
  }

  /** One agent batch received now, with one play that starts at `start` (15 s long). */
  async function batchWithPlayAt(start: string): Promise<void> {
    const seq = device.nextSeq++;
    const begin = Date.parse(start);
    const body = Buffer.from(
      JSON.stringify({
        schema: 'service.pop/1',
        device_id: device.id,
        ts: p.clock.now().toISOString(),
        batch_seq: device.nextBatch++,
        events: [
          {
            kind: 'play',
            seq,
            play_id: `tz-${seq}`,
            approval_number: 'APR-2024-999999',
            media_sha256: 'd'.repeat(64),
            start: new Date(begin).toISOString(),
            end: new Date(begin + 15_000).toISOString(),
            duration_ms: 15_000,
            screen: { power: 'on' },
          },
        ],
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
    expect(res.json().accepted, res.body).toBe(1);
  }

  beforeAll(async () => {
    ({ p, close } = await platformAt('2024-02-20T06:00:00.000Z'));
    operator = await createOrganisation(p, 'operator', ['write:submissions', 'console:fleet']);
    partner = await createOrganisation(p, 'agency', ['write:submissions', 'read:ads']);
    structure = await createStructure(p, operator.id);
    device = await enrol(p, operator.key, await createStructure(p, operator.id));
  }, 120_000);

  afterAll(async () => {
    await close?.();
  });

  test('the process and the sessions are in the zones this describe says', async () => {
    expect(new Date('2024-02-29T19:00:00.000Z').getHours()).toBe(14);
    const { rows } = await p.database.db.query<{ tz: string }>('SELECT current_setting($1) AS tz', [
      'TimeZone',
    ]);
    expect(rows[0]!.tz).toBe(SESSION_TZ);
  });

  test('review_due_at across 2024-03-01 and at Almaty midnight: working hours of Almaty, in its offset', async () => {
    // Wednesday 23:59:59.999 +06: Thursday 09:00-13:00, still at +06 (the spec's "+05:00" is today's offset).
    expect(await sentAt('2024-02-28T18:59:59.999Z')).toBe('2024-02-29T13:00:00+06:00');
    // Thursday 17:00 +06: 1 hour on Thursday, 3 on Friday 1 March, at +05.
    expect(await sentAt('2024-02-29T11:00:00.000Z')).toBe('2024-03-01T12:00:00+05:00');
  });

  test('at 18:59:59.999Z and 19:00:00.000Z on 2024-02-29: approval status, review_due_at, receive day, play day, seal', async () => {
    at('2024-02-29T11:00:00.000Z');
    const { id } = await approved('2024-02-20', '2024-02-29');

    // 23:59:59.999 of 29 February, at +05 (the hour 23:00-24:00 came twice that night).
    at('2024-02-29T18:59:59.999Z');
    expect(await ad(id)).toMatchObject({ status: 3, ext: { status: 'valid' } });
    expect(await sentAt('2024-02-29T18:59:59.999Z')).toBe('2024-03-01T13:00:00+05:00');
    await batchWithPlayAt('2024-02-29T18:59:59.999Z');

    // 00:00 of 1 March.
    at('2024-02-29T19:00:00.000Z');
    // audit.lastmod of an expired ad: 00:00 Almaty of the day after valid_until.
    expect(await ad(id)).toMatchObject({
      status: 6,
      ext: { status: 'expired' },
      lastmod: Date.parse('2024-02-29T19:00:00.000Z'),
    });
    expect(await sentAt('2024-02-29T19:00:00.000Z')).toBe('2024-03-01T13:00:00+05:00');
    await batchWithPlayAt('2024-02-29T19:00:00.000Z');

    const batches = await p.database.db.query<{ receive_day: string; n: number }>(
      `SELECT to_char(receive_day, 'YYYY-MM-DD') AS receive_day, count(*)::int AS n FROM pop_batches
        WHERE owner = $1 GROUP BY receive_day ORDER BY receive_day`,
      [`device:${device.id}`],
    );
    expect(batches.rows).toEqual([
      { receive_day: '2024-02-29', n: 1 },
      { receive_day: '2024-03-01', n: 1 },
    ]);
    const counts = await p.database.db.query<{ day: string; plays: number }>(
      `SELECT to_char(day, 'YYYY-MM-DD') AS day, sum(plays)::int AS plays FROM play_counts
        WHERE structure_id = $1 GROUP BY day ORDER BY day`,
      [device.structure.id],
    );
    expect(counts.rows).toEqual([
      { day: '2024-02-29', plays: 1 },
      { day: '2024-03-01', plays: 1 },
    ]);
    // 2024-02-29 has ended at 19:00:00.000Z: its seal holds the first batch only, signed at Almaty midnight.
    const sealed = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/seals/2024-02-29');
    expect([200, 201], sealed.body).toContain(sealed.statusCode);
    expect(sealed.json()).toMatchObject({ body: { day: '2024-02-29', batch_count: 1, record_count: 1 } });
    expect(sealed.json().signed_at).toBe('2024-03-01T00:00:00+05:00');
    const early = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/seals/2024-03-01');
    expect(early.statusCode, early.body).toBe(409);
    at('2024-03-01T19:00:00.000Z');
    const next = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/seals/2024-03-01');
    expect([200, 201], next.body).toContain(next.statusCode);
    expect(next.json()).toMatchObject({ body: { day: '2024-03-01', batch_count: 1, record_count: 1 } });
  });

  test('submission and approval numbers take the Almaty year: 18:59:59.999Z and 19:00:00.000Z on 31 December', async () => {
    at('2025-12-31T18:59:59.999Z');
    const before = await createDraft(p, operator.key, { structure_ids: [structure.id] });
    expect(before.number).toMatch(/^SUB-2025-\d{6}$/);
    const approvedBefore = await approved('2026-01-01', '2026-01-31');
    expect(approvedBefore.number).toMatch(/^APR-2025-\d{6}$/);
    at('2025-12-31T19:00:00.000Z');
    const after = await createDraft(p, operator.key, { structure_ids: [structure.id] });
    expect(after.number).toMatch(/^SUB-2026-\d{6}$/);
    const approvedAfter = await approved('2026-01-01', '2026-01-31');
    expect(approvedAfter.number).toMatch(/^APR-2026-\d{6}$/);
  });

  test('review_due_at over a holiday, sent at 18:59:59.999Z and 19:00:00.000Z', async () => {
    // Tuesday 15 December 2026 23:59:59.999; Wednesday 16 December is Independence Day.
    expect(await sentAt('2026-12-15T18:59:59.999Z')).toBe('2026-12-17T13:00:00+05:00');
    // Thursday 17 December 00:00.
    expect(await sentAt('2026-12-16T19:00:00.000Z')).toBe('2026-12-17T13:00:00+05:00');
  });

  test('pop_records_partition names and bounds a month whatever the session zone', async () => {
    for (const [zone, day, name] of [
      ['America/Asuncion', '2023-10-01', 'pop_records_2023_10'],
      ['Pacific/Kiritimati', '2023-11-30', 'pop_records_2023_11'],
      ['Etc/GMT+12', '2023-12-01', 'pop_records_2023_12'],
    ] as const) {
      const client = await session(p.database.url, zone);
      try {
        const made = await client.query<{ name: string }>('SELECT pop_records_partition($1::date) AS name', [
          day,
        ]);
        expect(made.rows[0]!.name).toBe(name);
        const bound = await client.query<{ bound: string }>(
          `SELECT pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_class c WHERE c.relname = $1`,
          [name],
        );
        const month = day.slice(0, 7);
        const next = addDays(`${month}-28`, 4).slice(0, 7);
        expect(bound.rows[0]!.bound).toBe(`FOR VALUES FROM ('${month}-01') TO ('${next}-01')`);
      } finally {
        await client.close();
      }
    }
  });

  /*
   * "Expiring" on the fleet page (spec: "A player renews on its own when less than 30 days are left"; the agent
   * counts 30 x 24 hours, and so does the console's badge). Thirty days added to an instant in SQL are calendar
   * days of the session's time zone: 721 hours in Asia/Almaty across 29 February 2024, 719 in Europe/Berlin across
   * the spring change. The page must say the same thing in every session.
   */
  test.each([
    ['UTC', '2024-02-15T12:00:00.000Z'],
    [SESSION_TZ, '2024-02-15T12:00:00.000Z'],
    ['Asia/Almaty', '2024-02-15T12:00:00.000Z'],
    ['Europe/Berlin', '2024-03-15T12:00:00.000Z'],
  ])('fleet "expiring" is 30 x 24 hours in a %s session (now %s)', async (zone, nowIso) => {
    const keyPair = generateEs256KeyPair();
    const fresh = await enrol(p, operator.key, await createStructure(p, operator.id));
    const reEnrolled = await apiCall(
      p.servers.api,
      operator.key,
      'POST',
      `/api/v1/console/devices/${fresh.id}/re-enrol`,
      {
        public_key: exportPublicKeySpki(keyPair.publicKey),
        csr: await createCsr({ subject: 'CN=p', keyPair }),
      },
    );
    expect(reEnrolled.statusCode, reEnrolled.body).toBe(200);
    const now = new Date(nowIso);
    const thirtyDays = 30 * 86_400_000;
    const client = await session(p.database.url, zone);
    try {
      for (const [leftMs, expiring] of [
        [thirtyDays - 30 * 60_000, true],
        [thirtyDays + 30 * 60_000, false],
      ] as const) {
        await client.query(
          `UPDATE device_certificates SET not_before = $2, not_after = $3
            WHERE device_id = $1 AND replaced_at IS NULL`,
          [fresh.id, new Date(now.getTime() - 86_400_000), new Date(now.getTime() + leftMs)],
        );
        const statement = fleetListStatement({
          organisationId: operator.id,
          now,
          silentAfterMs: 30 * 60_000,
          query: {},
          deviceId: fresh.id,
        });
        const { rows } = await client.query<{ n_expiring: number }>(statement.sql, statement.values);
        expect(rows[0]!.n_expiring, `${leftMs / 3_600_000} hours left`).toBe(expiring ? 1 : 0);
      }
    } finally {
      await client.close();
    }
  });
});

describe('an expired ad changed at 00:00 Almaty of the day after valid_until, through the tz database', () => {
  // Almaty kept summer time until 2004 (UTC+7 from March to October): 1 July 2004 began at 17:00Z, not 18:00Z.
  let p: TestPlatform;
  let close: () => Promise<void>;
  let partner: { id: string; key: string };
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    ({ p, close } = await platformAt('2004-06-10T06:00:00.000Z'));
    const operator = await createOrganisation(p, 'operator', ['write:submissions']);
    const structure = await createStructure(p, operator.id);
    partner = await createOrganisation(p, 'agency', ['write:submissions', 'read:ads']);
    for (const [name, from, until] of [
      ['summer-2004', '2004-06-10', '2004-06-30'],
      ['winter-2004', '2004-06-10', '2004-11-30'],
    ] as const) {
      const res = await apiCall(p.servers.api, partner.key, 'POST', '/api/v1/submissions', {
        advertiser_name: 'Acme LLP',
        period_from: from,
        period_to: until,
        structure_ids: [structure.id],
        category_id: CATEGORY_ID,
        channel: 'programmatic',
        external_refs: { crid: name, adomain: ['acme.kz'], dsp: 'dsp-1', ssp: 'ssp-1' },
      });
      expect(res.statusCode, res.body).toBe(201);
      const id = res.json<{ id: string }>().id;
      const up = await upload(p, partner.key, id, png(32, 16, name.length), 'image/png');
      expect(up.statusCode, up.body).toBe(200);
      expect((await send(p, partner.key, id)).statusCode).toBe(200);
      const ok = await approve(p, id);
      expect(ok.statusCode, ok.body).toBe(201);
      ids[name] = id;
    }
    p.clock.set(new Date('2004-12-05T06:00:00.000Z'));
  }, 120_000);

  afterAll(async () => {
    await close?.();
  });

  test.each([
    ['summer-2004', '2004-06-30'],
    ['winter-2004', '2004-11-30'],
  ])('%s (valid until %s): audit.lastmod is the first instant of the next Almaty day', async (name, until) => {
    const expected = almatyDayStart(addDays(until, 1)).getTime();
    const res = await apiCall(p.servers.api, partner.key, 'GET', `/api/v1/ads/${ids[name]}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().ads[0].audit).toMatchObject({ status: 6, lastmod: expected });
    // The same in every session time zone.
    for (const zone of ['UTC', 'Europe/Moscow', 'America/New_York', 'Asia/Almaty']) {
      const client = await session(p.database.url, zone);
      try {
        const rows = await queryAds(client, {
          organisationId: partner.id,
          today: '2004-12-05',
          id: ids[name]!,
          auditEnd: p.clock.now(),
          limit: 10,
        });
        expect(
          rows.map((r) => [r.status, r.audit_lastmod.getTime()]),
          zone,
        ).toEqual([['expired', expected]]);
      } finally {
        await client.close();
      }
    }
  });
});
