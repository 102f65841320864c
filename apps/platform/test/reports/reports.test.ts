import { canonicalBytes, sha256Hex } from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseCsvStrict } from '../open-data/helpers.js';
import { insertDevice, problemOf, sendBatch } from '../pop/helpers.js';
import { startSealPlatform } from '../seals/helpers.js';
import { apiCall, createOrganisation, createStructure, type TestPlatform } from '../support/platform.js';
import {
  ADVERTISER,
  buildReportFixture,
  FIRST_DAY,
  MEDIA_SHA256,
  NOW,
  type ReportFixture,
} from './fixture.js';

/*
 * The reports of issue 17 item 4 through HTTP, against a known set of signed batches (fixture.ts): the campaign
 * report's numbers in Almaty time and in UTC, its CSV, the plays per day behind the console's charts, fleet health
 * over time, and who may see what.
 */

let p: TestPlatform;
let f: ReportFixture;

beforeAll(async () => {
  // Its own data folder: the authority's certificates are made at the fixture's first instant.
  p = await startSealPlatform(FIRST_DAY);
  f = await buildReportFixture(p);
  p.clock.set(NOW);
}, 120_000);

afterAll(async () => {
  await p?.close();
});

const get = (key: string | null, url: string) => apiCall(p.servers.api, key, 'GET', url);
const reportUrl = (tz?: string) =>
  `/api/v1/console/reports/campaigns/${f.submissionId}${tz ? `?tz=${tz}` : ''}`;

interface Cell {
  day: string;
  structure_id: string;
  live_hours: number;
  declared: number | null;
  compared: boolean;
  plays: number;
  flagged: number;
  attested: number;
  deviation_pct: number | null;
  outside_band: boolean | null;
}

function cellOf(report: { cells: Cell[] }, day: string, structureId: string): Cell | undefined {
  return report.cells.find((c) => c.day === day && c.structure_id === structureId);
}

describe('the proof-of-play report of a campaign', () => {
  test('in Almaty time (the default): plays per day and structure against the declared plays, flags apart, seals', async () => {
    const res = await get(f.keys.agency, reportUrl());
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('private, no-store');
    const r = res.json();
    const { s1, s2, s3 } = f.structures;
    expect(r.report).toMatchObject({
      time_zone: 'Asia/Almaty',
      generated_at: '2026-11-20T11:00:00+05:00',
      scope: 'full',
      viewer_organisation: 'Media Agency LLP',
      band_pct: 30,
    });
    expect(r.campaign).toEqual({
      submission_id: f.submissionId,
      submission_number: f.submissionNumber,
      advertiser_name: ADVERTISER,
      advertiser_bin: '123456789012',
      submitted_by: 'Media Agency LLP',
      period_from: '2026-11-19',
      period_to: '2026-11-25',
      category_id: 1564,
    });
    expect(r.approvals).toEqual([
      expect.objectContaining({
        approval_number: f.approvalNumber,
        media_sha256: MEDIA_SHA256,
        valid_from: '2026-11-19',
        valid_until: '2026-11-25',
        issued_at: '2026-11-18T11:00:00+05:00',
        revoked_at: null,
        manifest_sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
        structure_ids: [s1.id, s2.id, s3.id].sort(),
      }),
    ]);
    expect(r.structures.map((s: { code: string }) => s.code)).toEqual(['ALM-R001', 'ALM-R002', 'ALM-R003']);
    expect(r.structures.map((s: { declared_daily_plays: number }) => s.declared_daily_plays)).toEqual([
      4, 2, 3,
    ]);
    expect(r.structures.map((s: { operator: string }) => s.operator)).toEqual([
      'Almaty Outdoor LLP',
      'Almaty Outdoor LLP',
      'Steppe Screens',
    ]);
    // Seven Almaty days, each structure live all day.
    expect(r.days.map((d: { day: string }) => d.day)).toEqual([
      '2026-11-19',
      '2026-11-20',
      '2026-11-21',
      '2026-11-22',
      '2026-11-23',
      '2026-11-24',
      '2026-11-25',
    ]);
    expect(r.cells).toHaveLength(21);
    // 19 November is over: compared; 20 November is under way: shown, not compared.
    expect(cellOf(r, '2026-11-19', s1.id)).toEqual({
      day: '2026-11-19',
      structure_id: s1.id,
      live_hours: 24,
      declared: 4,
      compared: true,
      plays: 2,
      flagged: 0,
      attested: 0,
      deviation_pct: -50,
      outside_band: true,
    });
    expect(cellOf(r, '2026-11-19', s2.id)).toMatchObject({ declared: 2, plays: 0, deviation_pct: -100 });
    // The four plays that began after 01:00 Almaty on the 20th (before midnight UTC) are the 20th's here.
    expect(cellOf(r, '2026-11-20', s1.id)).toMatchObject({
      live_hours: 24,
      declared: 4,
      compared: false,
      plays: 7,
      flagged: 2,
      deviation_pct: null,
      outside_band: null,
    });
    expect(cellOf(r, '2026-11-20', s2.id)).toMatchObject({ plays: 2, attested: 2, flagged: 0 });
    expect(cellOf(r, '2026-11-20', s3.id)).toMatchObject({ plays: 3 });
    expect(cellOf(r, '2026-11-25', s3.id)).toMatchObject({ declared: 3, compared: false, plays: 0 });
    expect(r.totals).toEqual({
      plays: 14,
      flagged: 2,
      unflagged: 12,
      attested: 2,
      declared: 9,
      plays_compared: 2,
      deviation_pct: -77.78,
      compared_days: 3,
      days_outside_band: 3,
    });
    expect(r.days[1]).toMatchObject({
      day: '2026-11-20',
      live_hours: 24,
      plays: 12,
      flagged: 2,
      compared_days: 0,
    });
    // Flagged plays apart, by flag; the slot play and the unknown approval's play are not the campaign's.
    expect(r.flags).toEqual([
      { flag: 'media_mismatch', plays: 1 },
      { flag: 'screen_off', plays: 1 },
    ]);
    // Seals: the Almaty receive days of the plays; the 19th is sealed, the 20th is not yet.
    expect(r.seals).toHaveLength(2);
    expect(r.seals[0]).toMatchObject({
      receive_day: '2026-11-19',
      plays: 2,
      sealed: true,
      body_sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      batch_count: 1,
      record_count: 2,
      signed_at: '2026-11-20T05:00:00+05:00',
      ledger: null,
    });
    expect(r.seals[0].url).toMatch(/\/v1\/stats-seals\/2026-11-19$/);
    expect(r.seals[1]).toMatchObject({
      receive_day: '2026-11-20',
      plays: 12,
      sealed: false,
      body_sha256: null,
    });
    // The seal's body hash is the one the public seal carries.
    const publicSeal = await p.servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-11-19' });
    expect(r.seals[0].body_sha256).toBe(sha256Hex(canonicalBytes(publicSeal.json().body)));
    expect(r.verification.authority_root_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(r.consistency).toEqual({ counted_plays: 14, recorded_plays: 14, agree: true });
  });

  test('in UTC: plays move to the UTC day they began, partial days are not compared', async () => {
    const res = await get(f.keys.agency, reportUrl('utc'));
    expect(res.statusCode, res.body).toBe(200);
    const r = res.json();
    const { s1, s2, s3 } = f.structures;
    expect(r.report).toMatchObject({ time_zone: 'UTC', generated_at: '2026-11-20T06:00:00Z' });
    expect(r.approvals[0].issued_at).toBe('2026-11-18T06:00:00Z');
    // The campaign runs from 19 Nov 00:00 Almaty (18 Nov 19:00 UTC) to 26 Nov 00:00 Almaty (25 Nov 19:00 UTC).
    expect(r.days.map((d: { day: string; live_hours: number }) => [d.day, d.live_hours])).toEqual([
      ['2026-11-18', 5],
      ['2026-11-19', 24],
      ['2026-11-20', 24],
      ['2026-11-21', 24],
      ['2026-11-22', 24],
      ['2026-11-23', 24],
      ['2026-11-24', 24],
      ['2026-11-25', 19],
    ]);
    expect(cellOf(r, '2026-11-18', s1.id)).toMatchObject({
      live_hours: 5,
      declared: null,
      compared: false,
      plays: 0,
    });
    // 09:00 and 09:10, and 20:00, 21:00, 23:30 and 23:40 UTC: the 19th in UTC.
    expect(cellOf(r, '2026-11-19', s1.id)).toEqual({
      day: '2026-11-19',
      structure_id: s1.id,
      live_hours: 24,
      declared: 4,
      compared: true,
      plays: 6,
      flagged: 1,
      attested: 0,
      deviation_pct: 50,
      outside_band: true,
    });
    expect(cellOf(r, '2026-11-20', s1.id)).toMatchObject({ plays: 3, flagged: 1, compared: false });
    expect(cellOf(r, '2026-11-20', s2.id)).toMatchObject({ plays: 2, attested: 2 });
    expect(cellOf(r, '2026-11-20', s3.id)).toMatchObject({ plays: 3 });
    expect(cellOf(r, '2026-11-25', s2.id)).toMatchObject({ live_hours: 19, declared: null });
    expect(r.totals).toMatchObject({
      plays: 14,
      flagged: 2,
      declared: 9,
      plays_compared: 6,
      deviation_pct: -33.33,
    });
    // Receive days stay Almaty days: a seal covers an Almaty day.
    expect(r.seals.map((s: { receive_day: string; plays: number }) => [s.receive_day, s.plays])).toEqual([
      ['2026-11-19', 2],
      ['2026-11-20', 12],
    ]);
    expect(r.seals[0].signed_at).toBe('2026-11-20T00:00:00Z');
    expect(r.consistency.agree).toBe(true);
  });

  test('the CSV parses as RFC 4180, carries a BOM, the time zone in every row and in its name, and no formula', async () => {
    const res = await get(f.keys.agency, `${reportUrl()}/plays.csv?tz=utc`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(res.headers['content-disposition']).toBe(
      `attachment; filename="${f.submissionNumber}-plays-utc.csv"`,
    );
    const bytes = res.rawPayload;
    expect([...bytes.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    const text = bytes.subarray(3).toString('utf8');
    const [header, ...rows] = parseCsvStrict(text);
    expect(header).toEqual([
      'row',
      'submission_number',
      'approval_numbers',
      'advertiser_name',
      'day',
      'time_zone',
      'structure_code',
      'structure_id',
      'operator',
      'live_hours',
      'declared',
      'plays',
      'flagged',
      'unflagged',
      'attested',
      'deviation_pct',
      'outside_band',
    ]);
    const objects = rows.map((row) => Object.fromEntries(header!.map((h, i) => [h, row[i]!])));
    expect(objects.filter((o) => o['row'] === 'day')).toHaveLength(24);
    expect(objects.filter((o) => o['row'] === 'structure_total')).toHaveLength(3);
    expect(objects.every((o) => o['time_zone'] === 'UTC')).toBe(true);
    // A name that begins with "=" cannot become a formula; its quotes and comma survive the quoting.
    expect(objects[0]!['advertiser_name']).toBe(`'${ADVERTISER}`);
    expect(text).toContain(`"'=HYPERLINK(""http://x.example"",""Tea, Almaty"")"`);
    expect(
      objects.find(
        (o) => o['row'] === 'day' && o['day'] === '2026-11-19' && o['structure_code'] === 'ALM-R001',
      ),
    ).toMatchObject({
      approval_numbers: f.approvalNumber,
      live_hours: '24',
      declared: '4',
      plays: '6',
      flagged: '1',
      unflagged: '5',
      attested: '0',
      deviation_pct: '50',
      outside_band: 'true',
      operator: 'Almaty Outdoor LLP',
    });
    expect(
      objects.find(
        (o) => o['row'] === 'day' && o['day'] === '2026-11-18' && o['structure_code'] === 'ALM-R003',
      ),
    ).toMatchObject({ live_hours: '5', declared: '', deviation_pct: '', outside_band: '' });
    expect(objects.at(-1)).toMatchObject({
      row: 'campaign_total',
      day: '',
      structure_code: '',
      declared: '9',
      plays: '14',
      flagged: '2',
      unflagged: '12',
      attested: '2',
      deviation_pct: '-33.33',
    });
    // In Almaty time the same file has the Almaty days.
    const almaty = await get(f.keys.agency, `${reportUrl()}/plays.csv`);
    expect(almaty.headers['content-disposition']).toContain('-plays-almaty.csv');
    const almatyRows = parseCsvStrict(almaty.rawPayload.subarray(3).toString('utf8'));
    const s1On20 = almatyRows.find(
      (row) => row[0] === 'day' && row[4] === '2026-11-20' && row[6] === 'ALM-R001',
    );
    expect(s1On20?.[5]).toBe('Asia/Almaty');
    expect(s1On20?.[11]).toBe('7');
  });

  test('an operator sees the plays on its own structures only; the submitter and the authority see all', async () => {
    const b = (await get(f.keys.operatorB, reportUrl())).json();
    expect(b.report.scope).toBe('own_structures');
    expect(b.structures.map((s: { code: string }) => s.code)).toEqual(['ALM-R003']);
    expect(b.campaign.advertiser_bin).toBeNull();
    expect(b.approvals[0].structure_ids).toEqual([f.structures.s3.id]);
    expect(b.totals).toMatchObject({ plays: 3, declared: 3, plays_compared: 0 });
    expect(b.seals.map((s: { receive_day: string; plays: number }) => [s.receive_day, s.plays])).toEqual([
      ['2026-11-20', 3],
    ]);
    expect(b.consistency).toEqual({ counted_plays: 3, recorded_plays: 3, agree: true });

    const a = (await get(f.keys.operatorA, reportUrl())).json();
    expect(a.structures.map((s: { code: string }) => s.code)).toEqual(['ALM-R001', 'ALM-R002']);
    expect(a.totals).toMatchObject({ plays: 11, flagged: 2, attested: 2, declared: 6, plays_compared: 2 });

    const authority = (await get(p.adminKey, reportUrl())).json();
    expect(authority.report.scope).toBe('full');
    expect(authority.totals.plays).toBe(14);

    const listed = (await get(f.keys.operatorB, '/api/v1/console/reports/campaigns')).json();
    expect(listed.items).toEqual([
      expect.objectContaining({
        submission_id: f.submissionId,
        scope: 'own_structures',
        structures: 1,
        declared_daily_plays: 3,
        plays: 3,
        valid_from: '2026-11-19',
        valid_until: '2026-11-25',
      }),
    ]);
    const agencyList = (await get(f.keys.agency, '/api/v1/console/reports/campaigns')).json();
    expect(agencyList.items).toEqual([
      expect.objectContaining({
        scope: 'full',
        structures: 3,
        declared_daily_plays: 9,
        plays: 14,
        flagged: 2,
      }),
    ]);
  });

  test("someone else's credential gets 404, a credential without the scope 403, none 401", async () => {
    for (const key of [f.keys.foreignAgency, f.keys.foreignOperator]) {
      problemOf(await get(key, reportUrl()), 404, 'not_found');
      problemOf(await get(key, `${reportUrl()}/plays.csv`), 404, 'not_found');
      expect((await get(key, '/api/v1/console/reports/campaigns')).json().items).toEqual([]);
    }
    problemOf(await get(f.keys.playsOnly, reportUrl()), 403, 'key_scope_denied');
    problemOf(await get(null, reportUrl()), 401, 'unauthenticated');
    // A malformed id names nothing; an unknown one neither.
    problemOf(await get(f.keys.agency, '/api/v1/console/reports/campaigns/not-a-uuid'), 404, 'not_found');
    problemOf(
      await get(f.keys.agency, '/api/v1/console/reports/campaigns/00000000-0000-4000-8000-000000000000'),
      404,
      'not_found',
    );
  });

  test('bad parameters are 422 naming the parameter; a submission without approval is 409 to its owner', async () => {
    const bad = await get(f.keys.agency, reportUrl('pacific'));
    problemOf(bad, 422, 'validation_failed');
    expect(bad.json().errors).toEqual([
      expect.objectContaining({ path: 'querystring:/tz', code: 'not_allowed' }),
    ]);
    const unknown = await get(f.keys.agency, `${reportUrl()}?zone=utc`);
    problemOf(unknown, 422, 'validation_failed');
    expect(unknown.json().errors[0]).toMatchObject({ path: 'querystring:/zone', code: 'unknown_key' });

    const draft = await apiCall(p.servers.api, f.keys.agency, 'POST', '/api/v1/submissions', {
      advertiser_name: 'Draft LLP',
      period_from: '2026-12-01',
      period_to: '2026-12-31',
      structure_ids: [f.structures.s1.id],
    });
    expect(draft.statusCode, draft.body).toBe(201);
    const url = `/api/v1/console/reports/campaigns/${draft.json().id}`;
    problemOf(await get(f.keys.agency, url), 409, 'state_conflict');
    problemOf(await get(f.keys.operatorA, url), 404, 'not_found');
    problemOf(await get(f.keys.foreignAgency, url), 404, 'not_found');
  });
});

describe('plays per day (the console charts)', () => {
  const playsUrl = '/api/v1/console/reports/plays?from=2026-11-18&to=2026-11-20';

  test('the agency sees its campaign against the declared plays, nothing else', async () => {
    const r = (await get(f.keys.agency, playsUrl)).json();
    expect(r.days).toEqual(['2026-11-18', '2026-11-19', '2026-11-20']);
    expect(r.time_zone).toBe('Asia/Almaty');
    expect(r.totals).toEqual({ plays: 14, flagged: 2, attested: 2, slot: 0, declared: 9, plays_compared: 2 });
    expect(
      r.structures.map((s: { code: string; plays: number[]; declared: (number | null)[] }) => [
        s.code,
        s.plays,
        s.declared,
      ]),
    ).toEqual([
      ['ALM-R001', [0, 2, 7], [null, 4, 4]],
      ['ALM-R002', [0, 0, 2], [null, 2, 2]],
      ['ALM-R003', [0, 0, 3], [null, 3, 3]],
    ]);
    expect(r.campaigns).toEqual([
      {
        submission_id: f.submissionId,
        submission_number: f.submissionNumber,
        advertiser_name: ADVERTISER,
        totals: { plays: 14, flagged: 2, declared: 9, plays_compared: 2 },
        plays: [0, 2, 12],
        flagged: [0, 0, 2],
        attested: [0, 0, 2],
        declared: [null, 9, 9],
      },
    ]);
    expect(r.unknown_approvals.plays).toEqual([0, 0, 0]);
    expect(r.slots.gov).toEqual([0, 0, 0]);
  });

  test('an operator sees everything on its structures, slot plays and unknown approvals apart', async () => {
    const r = (await get(f.keys.operatorA, playsUrl)).json();
    expect(
      r.structures.map((s: { code: string; plays: number[]; slot: number[] }) => [s.code, s.plays, s.slot]),
    ).toEqual([
      ['ALM-R001', [0, 2, 8], [0, 0, 1]],
      ['ALM-R002', [0, 0, 2], [0, 0, 0]],
    ]);
    expect(r.campaigns[0]).toMatchObject({ plays: [0, 2, 9], declared: [null, 6, 6] });
    expect(r.unknown_approvals.plays).toEqual([0, 0, 1]);
    expect(r.slots).toEqual({ gov: [0, 0, 1], emergency: [0, 0, 0] });
    expect(r.totals).toMatchObject({ plays: 12, slot: 1 });

    const authority = (await get(p.adminKey, playsUrl)).json();
    expect(authority.totals).toMatchObject({ plays: 15, slot: 1, flagged: 3 });
    const byStructure = (await get(p.adminKey, `${playsUrl}&structure_id=${f.structures.s3.id}`)).json();
    expect(byStructure.structures.map((s: { code: string }) => s.code)).toEqual(['ALM-R003']);
    const foreign = (await get(f.keys.foreignAgency, playsUrl)).json();
    expect(foreign.structures).toEqual([]);
    expect(foreign.campaigns).toEqual([]);
  });

  test('a range is at most 92 days, from before to, dates real', async () => {
    for (const [query, path] of [
      ['from=2026-11-20&to=2026-11-19', 'querystring:/to'],
      ['from=2026-01-01&to=2026-12-31', 'querystring:/to'],
      ['from=2026-02-30&to=2026-03-01', 'querystring:/from'],
      ['from=0000-01-01&to=2026-03-01', 'querystring:/from'],
      // The year's edge once made the day after unwritable (a 500), and a span of millennia was listed day by day
      // before it was refused: both are refused at once now.
      ['from=9999-12-31&to=9999-12-31', 'querystring:/from'],
      ['to=9999-12-31', 'querystring:/to'],
      ['from=1970-01-01&to=9000-12-31', 'querystring:/to'],
      ['from=2026-11-01&to=2026-11-02&structure_id=x', 'querystring:/structure_id'],
    ] as const) {
      const res = await get(f.keys.agency, `/api/v1/console/reports/plays?${query}`);
      problemOf(res, 422, 'validation_failed');
      expect(res.json().errors[0].path, query).toBe(path);
    }
  });
});

describe('fleet health over time', () => {
  test('per Almaty day: devices reporting, queue lag, screens reported off; a device that never sent is not silent', async () => {
    const r = (await get(p.adminKey, '/api/v1/console/reports/fleet-health?bucket=day&days=3')).json();
    expect(r).toMatchObject({
      bucket: 'day',
      time_zone: 'Asia/Almaty',
      devices: 3,
      devices_never_reported: 1,
    });
    expect(r.items).toEqual([
      {
        start: '2026-11-18T00:00:00+05:00',
        end: '2026-11-19T00:00:00+05:00',
        partial: false,
        devices_expected: 0,
        devices_reporting: 0,
        devices_silent: 0,
        queue_lag_p50_seconds: null,
        queue_lag_p95_seconds: null,
        queue_lag_max_seconds: null,
        screen_off_devices: 0,
        screen_off_share_pct: null,
      },
      {
        start: '2026-11-19T00:00:00+05:00',
        end: '2026-11-20T00:00:00+05:00',
        partial: false,
        devices_expected: 1,
        devices_reporting: 1,
        devices_silent: 0,
        // Received 10:00 UTC; newest play ended 09:10:15.
        queue_lag_p50_seconds: 2985,
        queue_lag_p95_seconds: 2985,
        queue_lag_max_seconds: 2985,
        screen_off_devices: 0,
        screen_off_share_pct: 0,
      },
      {
        start: '2026-11-20T00:00:00+05:00',
        end: '2026-11-20T11:00:00+05:00',
        partial: true,
        devices_expected: 2,
        devices_reporting: 2,
        devices_silent: 0,
        queue_lag_p50_seconds: 1185,
        queue_lag_p95_seconds: 2385,
        queue_lag_max_seconds: 2385,
        screen_off_devices: 1,
        screen_off_share_pct: 50,
      },
    ]);
  });

  test('per hour, and an operator sees its own devices only', async () => {
    const r = (await get(p.adminKey, '/api/v1/console/reports/fleet-health?bucket=hour&days=1')).json();
    expect(r.items).toHaveLength(24);
    expect(r.items[0].start).toBe('2026-11-19T12:00:00+05:00');
    const five = r.items.find((i: { start: string }) => i.start === '2026-11-20T05:00:00+05:00');
    expect(five).toMatchObject({
      devices_expected: 1,
      devices_reporting: 1,
      screen_off_devices: 1,
      screen_off_share_pct: 100,
    });
    expect(r.items[23]).toMatchObject({
      start: '2026-11-20T11:00:00+05:00',
      partial: true,
      devices_reporting: 2,
    });
    expect(r.items[22]).toMatchObject({ devices_expected: 1, devices_reporting: 0, devices_silent: 1 });

    const b = (await get(f.keys.operatorB, '/api/v1/console/reports/fleet-health?days=3')).json();
    expect(b.devices).toBe(1);
    expect(b.items[2]).toMatchObject({
      devices_expected: 1,
      devices_reporting: 1,
      screen_off_devices: 0,
      queue_lag_max_seconds: 1185,
    });
    const foreign = (await get(f.keys.foreignOperator, '/api/v1/console/reports/fleet-health?days=3')).json();
    expect(foreign.devices).toBe(0);
    expect(foreign.items.every((i: { devices_expected: number }) => i.devices_expected === 0)).toBe(true);
    problemOf(await get(f.keys.agency, '/api/v1/console/reports/fleet-health'), 403, 'key_scope_denied');
  });

  test('bounded: 31 days, or 3 days of hours', async () => {
    for (const [query, path] of [
      ['bucket=hour&days=4', 'querystring:/days'],
      ['days=32', 'querystring:/days'],
      ['days=0', 'querystring:/days'],
      ['days=1.5', 'querystring:/days'],
      ['bucket=week', 'querystring:/bucket'],
      ['since=2026-01-01', 'querystring:/since'],
    ] as const) {
      const res = await get(p.adminKey, `/api/v1/console/reports/fleet-health?${query}`);
      problemOf(res, 422, 'validation_failed');
      expect(res.json().errors[0].path, query).toBe(path);
    }
  });
});

// Last in the file: it adds a device and a play the figures above do not count.
describe("a play naming another organisation's approval on a structure its campaign does not cover", () => {
  test("counts for the structure's operator as an unknown approval: no submission, number or advertiser of the campaign", async () => {
    // Approval numbers and media hashes are public (GET {verify_url}/v1/approvals/{number}): any operator's device can
    // name them. The campaign is not the operator's to see (README "Who sees what": anyone else, 404).
    const stranger = await createOrganisation(
      p,
      'operator',
      ['read:submissions', 'console:fleet'],
      'Stranger LLP',
    );
    const structure = await createStructure(p, stranger.id, { code: 'STR-0001' });
    const device = await insertDevice(p.database.db, structure, new Date('2026-11-19T00:00:00Z'));
    const start = new Date(NOW.getTime() - 600_000);
    const sent = await sendBatch(
      p.servers,
      device,
      1,
      [
        {
          kind: 'play',
          seq: 1,
          play_id: 'stranger-1',
          approval_number: f.approvalNumber,
          media_sha256: MEDIA_SHA256,
          start: start.toISOString(),
          end: new Date(start.getTime() + 15_000).toISOString(),
          duration_ms: 15_000,
        },
      ],
      { ts: p.clock.now() },
    );
    expect(sent.statusCode, sent.body).toBe(200);
    expect(sent.json()).toMatchObject({ accepted: 1, flagged: 1 });

    const playsUrl = '/api/v1/console/reports/plays?from=2026-11-18&to=2026-11-20';
    for (const url of [playsUrl, '/api/v1/console/reports/plays?bucket=hour&from=2026-11-20&to=2026-11-20']) {
      const res = await get(stranger.key, url);
      expect(res.statusCode, res.body).toBe(200);
      const r = res.json();
      expect(r.campaigns, url).toEqual([]);
      expect(r.totals.plays, url).toBe(1);
      expect(
        r.unknown_approvals.plays.reduce((a: number, b: number) => a + b, 0),
        url,
      ).toBe(1);
      for (const secret of [f.submissionId, f.submissionNumber, 'HYPERLINK'])
        expect(res.body, url).not.toContain(secret);
    }
    // Naming the campaign is the same as naming one that does not exist.
    const named = (await get(stranger.key, `${playsUrl}&submission_id=${f.submissionId}`)).json();
    const nothing = (
      await get(stranger.key, `${playsUrl}&submission_id=00000000-0000-4000-8000-000000000000`)
    ).json();
    expect(named).toEqual(nothing);
    problemOf(await get(stranger.key, reportUrl()), 404, 'not_found');

    // The campaign's owner and the authority see the play in the campaign, on that structure (its plays "on every
    // structure").
    for (const key of [f.keys.agency, p.adminKey]) {
      const r = (await get(key, playsUrl)).json();
      const campaign = r.campaigns.find((c: { submission_id: string }) => c.submission_id === f.submissionId);
      expect(campaign.totals.plays).toBe(15);
      expect(r.structures.map((s: { code: string }) => s.code)).toContain('STR-0001');
    }
  });
});
