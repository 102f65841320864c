import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { problemOf } from '../pop/helpers.js';
import { startSealPlatform } from '../seals/helpers.js';
import { apiCall, type TestPlatform } from '../support/platform.js';
import { ADVERTISER, buildReportFixture, FIRST_DAY, NOW, type ReportFixture } from './fixture.js';

/*
 * Plays per Almaty hour (issue 25 item 4: "one bar per day only (add hourly)") through HTTP, against the signed
 * batches of fixture.ts. Almaty is UTC+5: the plays of 19 Nov 20:00Z to 23:40Z are in the small hours of the 20th.
 */

let p: TestPlatform;
let f: ReportFixture;

beforeAll(async () => {
  p = await startSealPlatform(FIRST_DAY);
  f = await buildReportFixture(p);
  p.clock.set(NOW);
}, 120_000);

afterAll(async () => {
  await p?.close();
});

const get = (key: string | null, url: string) => apiCall(p.servers.api, key, 'GET', url);
const hourly = (query: string) => `/api/v1/console/reports/plays?bucket=hour&${query}`;

/** The non-zero entries of an hourly series as {index: value}. */
function nonZero(values: number[]): Record<number, number> {
  const out: Record<number, number> = {};
  values.forEach((v, i) => {
    if (v !== 0) out[i] = v;
  });
  return out;
}

describe('plays per Almaty hour', () => {
  test('hours of two Almaty days: a play of 19 Nov 20:00Z is in the 20th, 01:00; the days add up', async () => {
    const res = await get(f.keys.agency, hourly('from=2026-11-19&to=2026-11-20'));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('private, no-store');
    const r = res.json();
    expect(r.bucket).toBe('hour');
    expect(r.days).toEqual(['2026-11-19', '2026-11-20']);
    expect(r.hours).toHaveLength(48);
    expect(r.hours[0]).toBe('2026-11-19T00:00:00+05:00');
    expect(r.hours[23]).toBe('2026-11-19T23:00:00+05:00');
    expect(r.hours[24]).toBe('2026-11-20T00:00:00+05:00');
    expect(r.hours[47]).toBe('2026-11-20T23:00:00+05:00');
    expect(r.campaigns).toHaveLength(1);
    const c = r.campaigns[0];
    expect(c).toMatchObject({
      submission_id: f.submissionId,
      submission_number: f.submissionNumber,
      advertiser_name: ADVERTISER,
      // The totals are the days' (declared plays are per day).
      totals: { plays: 14, flagged: 2, declared: 9, plays_compared: 2 },
    });
    // 19th 14:00 (09:00Z, 09:10Z); 20th 01:00, 02:00, 04:00 x2 (20:00Z-23:40Z of the 19th); 08:00; 09:00 (04:00Z
    // and the CMS's 04:30Z, 04:40Z); 10:00 (05:00Z on S1 and 05:30Z-05:40Z on S3).
    expect(nonZero(c.plays)).toEqual({ 14: 2, 25: 1, 26: 1, 28: 2, 32: 1, 33: 3, 34: 4 });
    expect(nonZero(c.flagged)).toEqual({ 28: 1, 34: 1 });
    expect(nonZero(c.attested)).toEqual({ 33: 2 });
    expect(c.declared.every((v: number | null) => v === null)).toBe(true);
    // Per day, the hours add up to the counters' days.
    const daily = (
      await get(f.keys.agency, '/api/v1/console/reports/plays?from=2026-11-19&to=2026-11-20')
    ).json();
    expect(daily.bucket).toBe('day');
    const sum = (v: number[]) => v.reduce((a, b) => a + b, 0);
    expect([sum(c.plays.slice(0, 24)), sum(c.plays.slice(24))]).toEqual(daily.campaigns[0].plays);
    for (const s of r.structures) {
      const d = daily.structures.find((x: { structure_id: string }) => x.structure_id === s.structure_id);
      expect([sum(s.plays.slice(0, 24)), sum(s.plays.slice(24))], s.code).toEqual(d.plays);
    }
    expect(r.totals).toEqual(daily.totals);
    // Neither the slot play nor the unknown approval is the agency's.
    expect(nonZero(r.slots.gov)).toEqual({});
    expect(nonZero(r.unknown_approvals.plays)).toEqual({});
  });

  test('one day is 24 hours from its Almaty midnight (19:00Z the day before); today by default', async () => {
    const r = (await get(p.adminKey, hourly('from=2026-11-20&to=2026-11-20'))).json();
    expect(r.hours).toHaveLength(24);
    expect(new Date(r.hours[0]).toISOString()).toBe('2026-11-19T19:00:00.000Z');
    expect(nonZero(r.campaigns[0].plays)).toEqual({ 1: 1, 2: 1, 4: 2, 8: 1, 9: 3, 10: 4 });
    // The authority sees the gov slot play (05:10Z) and the unknown approval (05:20Z) apart, at 10:00.
    expect(nonZero(r.slots.gov)).toEqual({ 10: 1 });
    expect(nonZero(r.unknown_approvals.plays)).toEqual({ 10: 1 });
    const s1 = r.structures.find((s: { code: string }) => s.code === f.structures.s1.code);
    expect(nonZero(s1.slot)).toEqual({ 10: 1 });
    expect(nonZero(s1.plays)).toEqual({ 1: 1, 2: 1, 4: 2, 8: 1, 9: 1, 10: 2 });

    const byDefault = (await get(p.adminKey, '/api/v1/console/reports/plays?bucket=hour')).json();
    expect(byDefault).toMatchObject({ from: '2026-11-20', to: '2026-11-20' });
    expect(byDefault.hours).toEqual(r.hours);
    expect(byDefault.campaigns[0].plays).toEqual(r.campaigns[0].plays);

    const only19 = (await get(p.adminKey, hourly('from=2026-11-19&to=2026-11-19'))).json();
    expect(nonZero(only19.campaigns[0].plays)).toEqual({ 14: 2 });
  });

  test('scoped as the days are: an operator its structures, structure and campaign filters, foreign nothing', async () => {
    const q = 'from=2026-11-20&to=2026-11-20';
    // Operator B owns S3 only: the campaign's plays there, nothing of S1 or S2.
    const b = (await get(f.keys.operatorB, hourly(q))).json();
    expect(b.structures.map((s: { code: string }) => s.code)).toEqual([f.structures.s3.code]);
    expect(nonZero(b.structures[0].plays)).toEqual({ 10: 3 });
    expect(nonZero(b.campaigns[0].plays)).toEqual({ 10: 3 });
    expect(nonZero(b.slots.gov)).toEqual({});
    expect(nonZero(b.unknown_approvals.plays)).toEqual({});

    // Operator A: S1 and S2, with the slot play and the unknown approval on its S1.
    const a = (await get(f.keys.operatorA, hourly(q))).json();
    expect(a.structures.map((s: { code: string }) => s.code)).toEqual([
      f.structures.s1.code,
      f.structures.s2.code,
    ]);
    expect(nonZero(a.campaigns[0].plays)).toEqual({ 1: 1, 2: 1, 4: 2, 8: 1, 9: 3, 10: 1 });
    expect(nonZero(a.slots.gov)).toEqual({ 10: 1 });

    const s3 = (await get(p.adminKey, hourly(`${q}&structure_id=${f.structures.s3.id}`))).json();
    expect(s3.structures.map((s: { code: string }) => s.code)).toEqual([f.structures.s3.code]);
    expect(nonZero(s3.campaigns[0].plays)).toEqual({ 10: 3 });
    expect(nonZero(s3.slots.gov)).toEqual({});

    const campaign = (await get(p.adminKey, hourly(`${q}&submission_id=${f.submissionId}`))).json();
    expect(nonZero(campaign.slots.gov)).toEqual({});
    expect(nonZero(campaign.unknown_approvals.plays)).toEqual({});
    expect(nonZero(campaign.campaigns[0].plays)).toEqual({ 1: 1, 2: 1, 4: 2, 8: 1, 9: 3, 10: 4 });

    for (const key of [f.keys.foreignAgency, f.keys.foreignOperator]) {
      const foreign = (await get(key, hourly(q))).json();
      expect(foreign.structures).toEqual([]);
      expect(foreign.campaigns).toEqual([]);
      expect(nonZero(foreign.slots.gov)).toEqual({});
      expect(nonZero(foreign.unknown_approvals.plays)).toEqual({});
      // Another organisation's campaign by id: nothing of it.
      const named = (await get(key, hourly(`${q}&submission_id=${f.submissionId}`))).json();
      expect(named.campaigns).toEqual([]);
    }
    problemOf(await get(null, hourly(q)), 401, 'unauthenticated');
  });

  test('bad bucket and range values are 422 naming the parameter', async () => {
    for (const [query, path] of [
      ['bucket=minute', 'querystring:/bucket'],
      ['bucket=', 'querystring:/bucket'],
      ['bucket=hour&bucket=day', 'querystring:/bucket'],
      ['bucket=hour&from=2026-11-17&to=2026-11-20', 'querystring:/to'],
      ['bucket=hour&from=2026-11-20&to=2026-11-19', 'querystring:/to'],
      ['bucket=hour&from=2026-11-31&to=2026-12-01', 'querystring:/from'],
      ['bucket=hour&from=2026-11-20&to=20261120', 'querystring:/to'],
    ] as const) {
      const res = await get(f.keys.agency, `/api/v1/console/reports/plays?${query}`);
      problemOf(res, 422, 'validation_failed');
      expect(res.json().errors[0].path, query).toBe(path);
    }
    // Three days are allowed (72 hours).
    const three = (await get(f.keys.agency, hourly('from=2026-11-18&to=2026-11-20'))).json();
    expect(three.hours).toHaveLength(72);
  });
});

describe("a campaign report's hours", () => {
  const reportUrl = (tz: string) => `/api/v1/console/reports/campaigns/${f.submissionId}?tz=${tz}`;

  test('the hours that hold plays, in Almaty time or UTC, adding up to the report; an operator its own structures', async () => {
    const almaty = (await get(f.keys.agency, reportUrl('almaty'))).json();
    expect(almaty.hours).toEqual([
      { start: '2026-11-19T14:00:00+05:00', day: '2026-11-19', hour: 14, plays: 2, flagged: 0 },
      { start: '2026-11-20T01:00:00+05:00', day: '2026-11-20', hour: 1, plays: 1, flagged: 0 },
      { start: '2026-11-20T02:00:00+05:00', day: '2026-11-20', hour: 2, plays: 1, flagged: 0 },
      { start: '2026-11-20T04:00:00+05:00', day: '2026-11-20', hour: 4, plays: 2, flagged: 1 },
      { start: '2026-11-20T08:00:00+05:00', day: '2026-11-20', hour: 8, plays: 1, flagged: 0 },
      { start: '2026-11-20T09:00:00+05:00', day: '2026-11-20', hour: 9, plays: 3, flagged: 0 },
      { start: '2026-11-20T10:00:00+05:00', day: '2026-11-20', hour: 10, plays: 4, flagged: 1 },
    ]);
    const sum = (hours: { plays: number }[]) => hours.reduce((n, h) => n + h.plays, 0);
    expect(sum(almaty.hours)).toBe(almaty.totals.plays);
    expect(almaty.consistency.agree).toBe(true);

    const utc = (await get(f.keys.agency, reportUrl('utc'))).json();
    expect(utc.hours.map((h: { start: string; plays: number }) => [h.start, h.plays])).toEqual([
      ['2026-11-19T09:00:00Z', 2],
      ['2026-11-19T20:00:00Z', 1],
      ['2026-11-19T21:00:00Z', 1],
      ['2026-11-19T23:00:00Z', 2],
      ['2026-11-20T03:00:00Z', 1],
      ['2026-11-20T04:00:00Z', 3],
      ['2026-11-20T05:00:00Z', 4],
    ]);
    // Across the day boundary: 23:00Z on the 19th in UTC is 04:00 on the 20th in Almaty.
    expect(utc.hours[3]).toMatchObject({ day: '2026-11-19', hour: 23, flagged: 1 });

    // Operator B sees its own structure (S3) of another organisation's campaign, and only its hours.
    const b = (await get(f.keys.operatorB, reportUrl('almaty'))).json();
    expect(b.report.scope).toBe('own_structures');
    expect(b.hours).toEqual([
      { start: '2026-11-20T10:00:00+05:00', day: '2026-11-20', hour: 10, plays: 3, flagged: 0 },
    ]);
    problemOf(await get(f.keys.foreignAgency, reportUrl('almaty')), 404, 'not_found');
  });
});
