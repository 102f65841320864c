import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  bandVerdict,
  checkDeclaredVsActual,
  type DeclaredVsActualEvent,
} from '../../src/city-events/declared-vs-actual.js';
import { apiCall, startTestPlatform, type TestPlatform } from '../support/platform.js';
import {
  seedApproval,
  seedOrganisation,
  seedPlayCounts,
  seedPlays,
  seedStructure,
} from '../open-data/helpers.js';

describe('the band (spec: "default band 30 %")', () => {
  test('29 and 30 percent off are inside, 31 percent outside, under and over', () => {
    expect(bandVerdict(100, 71, 30)).toEqual({ outside: false, deviationPct: -29 });
    expect(bandVerdict(100, 70, 30)).toEqual({ outside: false, deviationPct: -30 });
    expect(bandVerdict(100, 69, 30)).toEqual({ outside: true, deviationPct: -31 });
    expect(bandVerdict(100, 129, 30)).toEqual({ outside: false, deviationPct: 29 });
    expect(bandVerdict(100, 130, 30)).toEqual({ outside: false, deviationPct: 30 });
    expect(bandVerdict(100, 131, 30)).toEqual({ outside: true, deviationPct: 31 });
  });

  test('exactly at the band is inside with any declared figure (integers, no float error)', () => {
    for (const declared of [1, 3, 7, 10, 33, 70, 999, 123_457]) {
      const off = (declared * 30) / 100;
      if (Number.isInteger(off)) {
        expect(bandVerdict(declared, declared - off, 30).outside).toBe(false);
        expect(bandVerdict(declared, declared + off, 30).outside).toBe(false);
      }
      expect(bandVerdict(declared, declared - Math.floor(off) - 1, 30).outside).toBe(true);
    }
  });

  test('declared 0: any counted play is outside, none is inside', () => {
    expect(bandVerdict(0, 0, 30)).toEqual({ outside: false, deviationPct: null });
    expect(bandVerdict(0, 1, 30)).toEqual({ outside: true, deviationPct: null });
  });
});

let p: TestPlatform;
const s: string[] = [];
let submission: { submissionId: string; submissionNumber: string; number: string };
let advertiser: string;
const DAY = '2026-11-20';
// 23:59:59 on 20 November in Almaty (UTC+5): the day is not over yet.
const BEFORE_END = new Date('2026-11-20T18:59:59Z');
// 00:00:00 on 21 November in Almaty, while it is still 20 November in UTC.
const AFTER_END = new Date('2026-11-20T19:00:00Z');

beforeAll(async () => {
  p = await startTestPlatform({ now: BEFORE_END });
  const db = p.ctx.db;
  const operator = await seedOrganisation(db, 'operator');
  advertiser = await seedOrganisation(db, 'advertiser');
  for (let i = 0; i < 9; i += 1) s.push(await seedStructure(db, operator, 'almaly', 'billboard'));
  submission = await seedApproval(db, advertiser, s, {
    validFrom: DAY,
    validUntil: '2026-11-21',
    declared: {
      [s[0]!]: 100,
      [s[1]!]: 100,
      [s[2]!]: 100,
      [s[3]!]: 100,
      [s[4]!]: 100,
      [s[5]!]: 100,
      [s[6]!]: 0,
      [s[7]!]: 0,
      // s[8] is chosen but declares nothing: never compared.
    },
  });
  const counted = (i: number, count: number, startAt: string) =>
    seedPlays(db, {
      structureId: s[i]!,
      approvalNumber: submission.number,
      startAt: new Date(startAt),
      count,
    });
  // 71, 70, 69 (29, 30, 31 % under) and 129, 130, 131 (29, 30, 31 % over), spread over the Almaty day.
  await counted(0, 71, '2026-11-20T00:00:00+05:00');
  await counted(1, 70, '2026-11-20T12:00:00+05:00');
  await counted(2, 60, '2026-11-20T09:00:00+05:00');
  // The last seconds of 20 November in Almaty ...
  await counted(2, 9, '2026-11-20T18:59:59Z');
  // ... and the first of 21 November in Almaty (still 20 November in UTC): not plays of the 20th.
  await counted(2, 5, '2026-11-20T19:00:00Z');
  await counted(1, 40, '2026-11-20T19:30:00Z');
  await counted(3, 129, '2026-11-20T08:00:00+05:00');
  await counted(4, 130, '2026-11-20T08:00:00+05:00');
  await counted(5, 131, '2026-11-20T08:00:00+05:00');
  // Declared 0: one play is outside.
  await counted(6, 1, '2026-11-20T08:00:00+05:00');
  // Plays that are not this submission's: another approval, a slot.
  const other = await seedApproval(db, await seedOrganisation(db, 'advertiser'), [s[0]!]);
  await seedPlayCounts(db, { structureId: s[0]!, day: DAY, count: 50, approvalNumber: other.number });
  await seedPlayCounts(db, { structureId: s[0]!, day: DAY, count: 50, slot: 'gov' });
  // A revoked approval with declared plays raises nothing after its revocation.
  await seedApproval(db, advertiser, [s[0]!], {
    validFrom: DAY,
    validUntil: DAY,
    declared: { [s[0]!]: 1000 },
    revokedAt: new Date('2026-11-20T10:00:00+05:00'),
  });
});
afterAll(async () => {
  await p?.close();
});

const events = async (query = '?type=declared_vs_actual') => {
  const res = await apiCall(p.servers.api, p.adminKey, 'GET', `/api/v1/console/events${query}`);
  expect(res.statusCode).toBe(200);
  return res.json<{ items: DeclaredVsActualEvent[] }>().items;
};

describe('declared_vs_actual after each full Almaty day', () => {
  test('nothing before the Almaty day is over', async () => {
    const run = await checkDeclaredVsActual(p.ctx, BEFORE_END);
    expect(run.days).not.toContain(DAY);
    expect(run.events).toBe(0);
    expect(await events()).toEqual([]);
  });

  test('at 00:00 Almaty the day is compared: 31 % under and over and declared 0 are raised, 29 and 30 % are not', async () => {
    p.clock.set(AFTER_END);
    const run = await checkDeclaredVsActual(p.ctx);
    expect(run).toEqual({ days: [DAY], events: 3 });
    const items = await events();
    const byStructure = new Map(items.map((e) => [e.data.structure_id, e]));
    expect([...byStructure.keys()].sort()).toEqual([s[2]!, s[5]!, s[6]!].sort());
    const under = byStructure.get(s[2]!)!;
    expect(under).toMatchObject({
      type: 'declared_vs_actual',
      day: DAY,
      created_at: '2026-11-21T00:00:00+05:00',
      data: {
        submission_id: submission.submissionId,
        submission_number: submission.submissionNumber,
        organisation_id: advertiser,
        approval_numbers: [submission.number],
        structure_id: s[2],
        declared_plays: 100,
        // 60 + 9 of the 20th; the 5 plays from 00:00 Almaty on the 21st are not in.
        actual_plays: 69,
        deviation_pct: -31,
        direction: 'under',
        band_pct: 30,
      },
    });
    expect(under.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(byStructure.get(s[5]!)!.data).toMatchObject({
      actual_plays: 131,
      deviation_pct: 31,
      direction: 'over',
    });
    expect(byStructure.get(s[6]!)!.data).toMatchObject({
      declared_plays: 0,
      actual_plays: 1,
      deviation_pct: null,
    });
  });

  test('a re-run never raises the same event twice', async () => {
    expect(await checkDeclaredVsActual(p.ctx)).toEqual({ days: [], events: 0 });
    // Even when the day is compared again (its check row gone), the events are unique by subject.
    await p.ctx.db.query("DELETE FROM city_event_checks WHERE day = '2026-11-20'");
    expect(await checkDeclaredVsActual(p.ctx)).toEqual({ days: [DAY], events: 0 });
    expect(await events()).toHaveLength(3);
    const { rows } = await p.ctx.db.query('SELECT count(*)::int AS n FROM city_events');
    expect(rows[0].n).toBe(3);
  });

  test('the band is configurable; the next day is compared with the band in force', async () => {
    const set = await apiCall(p.servers.api, p.adminKey, 'PUT', '/api/v1/console/events/settings', {
      declared_band_pct: 20,
    });
    expect(set.statusCode).toBe(200);
    expect(set.json()).toEqual({ declared_band_pct: 20 });
    // 21 November: 75 plays on s[0] is 25 % under (inside 30, outside 20).
    await seedPlays(p.ctx.db, {
      structureId: s[0]!,
      approvalNumber: submission.number,
      startAt: new Date('2026-11-21T15:00:00+05:00'),
      count: 75,
    });
    p.clock.set(new Date('2026-11-21T19:00:00Z'));
    const run = await checkDeclaredVsActual(p.ctx);
    expect(run.days).toEqual(['2026-11-21']);
    const day21 = await events('?type=declared_vs_actual&day=2026-11-21');
    const first = day21.find((e) => e.data.structure_id === s[0]);
    expect(first?.data).toMatchObject({ actual_plays: 75, deviation_pct: -25, band_pct: 20 });
    // s[1] on the 21st: the 40 plays of 00:30 Almaty.
    expect(day21.find((e) => e.data.structure_id === s[1])?.data).toMatchObject({ actual_plays: 40 });
    const reset = await apiCall(p.servers.api, p.adminKey, 'PUT', '/api/v1/console/events/settings', {
      declared_band_pct: null,
    });
    expect(reset.json()).toEqual({ declared_band_pct: 30 });
  });

  test('the console lists events newest first, filters, and refuses bad parameters', async () => {
    const all = await events('');
    expect(all.length).toBeGreaterThan(3);
    expect(all[0]!.day).toBe('2026-11-21');
    expect(await events('?type=declared_vs_actual&day=2026-11-20&limit=2')).toHaveLength(2);
    expect(await events('?day=2026-11-20&offset=2')).toHaveLength(1);
    for (const query of [
      '?type=other',
      '?day=2026-13-01',
      '?limit=0',
      '?limit=501',
      '?offset=-1',
      '?foo=1',
    ]) {
      const res = await apiCall(p.servers.api, p.adminKey, 'GET', `/api/v1/console/events${query}`);
      expect(res.statusCode, query).toBe(422);
      expect(res.json().code).toBe('validation_failed');
    }
  });
});
