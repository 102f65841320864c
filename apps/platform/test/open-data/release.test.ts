import { createHash } from 'node:crypto';
import { OpenDataDictionary } from '@ooh/protocol';
import { Value } from '@sinclair/typebox/value';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { CellStatus } from '../../src/open-data/dictionary.js';
import { COLUMNS, STATUSES } from '../../src/open-data/dictionary.js';
import { isWithheld, type MarginTable } from '../../src/open-data/disclosure.js';
import { buildDueReleases } from '../../src/open-data/release.js';
import { createOpenDataFeature } from '../../src/open-data/routes.js';
import { apiCall, startTestPlatform, type TestPlatform } from '../support/platform.js';
import {
  csvObjects,
  parseCsvStrict,
  recoverableWithheld,
  seedApproval,
  seedOrganisation,
  seedPlays,
  seedStructure,
} from './helpers.js';

/*
 * Releases end to end on a real PostgreSQL: plays seeded as the ingestion stores them, the release built by the
 * builder, read back through the verify host and parsed by a strict RFC 4180 parser (test/open-data/helpers.ts).
 *
 * October 2026 shows every disclosure rule, one per daypart so that the tables do not touch each other:
 *   night    4 cells, each with 3 operators and 3 advertisers: all published
 *   morning  1 cell with 2 operators            -> withheld_operators
 *   day      1 cell with 2 advertisers          -> withheld_advertisers
 *   evening  1 cell, one advertiser at 70 %     -> published
 *   late     1 cell, one advertiser at 71 %     -> withheld_share
 *   unknown  1 cell, one operator at 71 % (plays without a start time) -> withheld_share
 * September 2026 shows complementary suppression in the day daypart.
 */

let p: TestPlatform;
const ops: string[] = [];
const advs: string[] = [];
const structures = new Map<string, string>();
const approvals = new Map<string, string>();
const st = (op: number, district: string, format: string) => structures.get(`${op}/${district}/${format}`)!;
const apr = (adv: number) => approvals.get(String(adv))!;
const at = (iso: string) => new Date(iso);

async function plays(
  op: number,
  adv: number,
  district: string,
  format: string,
  startAt: Date | null,
  count: number,
) {
  await seedPlays(p.ctx.db, {
    structureId: st(op, district, format),
    approvalNumber: apr(adv),
    startAt,
    count,
    ...(startAt === null ? { day: '2026-10-15' } : {}),
  });
}

beforeAll(async () => {
  p = await startTestPlatform({ now: at('2026-11-20T12:00:00+05:00') });
  const db = p.ctx.db;
  for (let i = 1; i <= 4; i += 1) ops.push(await seedOrganisation(db, 'operator', `Operator ${i}`));
  for (let i = 1; i <= 4; i += 1) advs.push(await seedOrganisation(db, 'advertiser', `Advertiser ${i}`));
  for (let op = 1; op <= 3; op += 1) {
    for (const district of ['almaly', 'medeu']) {
      for (const format of ['billboard', 'led']) {
        structures.set(
          `${op}/${district}/${format}`,
          await seedStructure(db, ops[op - 1]!, district, format),
        );
      }
    }
  }
  // A structure without plays: its district still has rows (no_plays).
  structures.set('4/auezov/billboard', await seedStructure(db, ops[3]!, 'auezov', 'billboard'));
  for (let adv = 1; adv <= 4; adv += 1) {
    approvals.set(String(adv), (await seedApproval(db, advs[adv - 1]!, [...structures.values()])).number);
  }

  // ---- October ----
  // night: every cell 3 operators x 3 advertisers, 10 plays each pair.
  for (const district of ['almaly', 'medeu']) {
    for (const format of ['billboard', 'led']) {
      for (let i = 1; i <= 3; i += 1)
        await plays(i, i, district, format, at('2026-10-05T02:30:00+05:00'), 10);
    }
  }
  // 2026-09-30T20:00Z is 1 October 01:00 in Almaty: October's night, not September.
  await plays(1, 1, 'almaly', 'billboard', at('2026-09-30T20:00:00Z'), 5);
  // 2026-10-31T19:30Z is 1 November 00:30 in Almaty: not in October at all.
  await plays(1, 1, 'almaly', 'billboard', at('2026-10-31T19:30:00Z'), 7);
  // A play naming an approval the platform does not know is counted but not billable here.
  await seedPlays(db, {
    structureId: st(1, 'almaly', 'led'),
    approvalNumber: 'APR-2026-999999',
    startAt: at('2026-10-05T02:30:00+05:00'),
    count: 3,
  });
  // morning: 2 operators.
  await plays(1, 1, 'almaly', 'billboard', at('2026-10-06T08:30:00+05:00'), 10);
  await plays(2, 2, 'almaly', 'billboard', at('2026-10-06T08:30:00+05:00'), 10);
  await plays(2, 3, 'almaly', 'billboard', at('2026-10-06T08:30:00+05:00'), 10);
  // day: 2 advertisers.
  await plays(1, 1, 'almaly', 'billboard', at('2026-10-07T12:30:00+05:00'), 10);
  await plays(2, 2, 'almaly', 'billboard', at('2026-10-07T12:30:00+05:00'), 10);
  await plays(3, 2, 'almaly', 'billboard', at('2026-10-07T12:30:00+05:00'), 10);
  // evening: advertiser 1 holds exactly 70 of 100.
  await plays(1, 1, 'almaly', 'billboard', at('2026-10-08T18:30:00+05:00'), 34);
  await plays(2, 1, 'almaly', 'billboard', at('2026-10-08T18:30:00+05:00'), 36);
  await plays(2, 2, 'almaly', 'billboard', at('2026-10-08T18:30:00+05:00'), 15);
  await plays(3, 3, 'almaly', 'billboard', at('2026-10-08T18:30:00+05:00'), 15);
  // late: advertiser 1 holds 71 of 100.
  await plays(1, 1, 'almaly', 'billboard', at('2026-10-09T22:30:00+05:00'), 34);
  await plays(2, 1, 'almaly', 'billboard', at('2026-10-09T22:30:00+05:00'), 37);
  await plays(2, 2, 'almaly', 'billboard', at('2026-10-09T22:30:00+05:00'), 15);
  await plays(3, 3, 'almaly', 'billboard', at('2026-10-09T22:30:00+05:00'), 14);
  // unknown daypart (no start time): operator 1 holds 71 of 100, advertisers spread.
  await plays(1, 1, 'medeu', 'led', null, 36);
  await plays(1, 2, 'medeu', 'led', null, 35);
  await plays(2, 3, 'medeu', 'led', null, 15);
  await plays(3, 3, 'medeu', 'led', null, 14);
  // slot plays: gov with 3 operators (published), emergency with 1 operator (withheld).
  for (let op = 1; op <= 3; op += 1) {
    await seedPlays(db, {
      structureId: st(op, 'almaly', 'billboard'),
      slot: 'gov',
      startAt: at('2026-10-10T02:30:00+05:00'),
      count: 5,
    });
  }
  await seedPlays(db, {
    structureId: st(1, 'medeu', 'led'),
    slot: 'emergency',
    startAt: at('2026-10-10T12:00:00+05:00'),
    count: 4,
  });

  // ---- September: complementary suppression in the day daypart ----
  const sept = at('2026-09-15T12:30:00+05:00');
  for (let i = 1; i <= 3; i += 1) await plays(i, i, 'almaly', 'billboard', sept, 10); // 30, published
  for (let i = 1; i <= 3; i += 1) await plays(i, i, 'almaly', 'led', sept, 15); // 45, published
  await plays(1, 1, 'medeu', 'billboard', sept, 10); // 20 with 2 operators: withheld_operators
  await plays(2, 2, 'medeu', 'billboard', sept, 5);
  await plays(2, 3, 'medeu', 'billboard', sept, 5);
  for (let i = 1; i <= 3; i += 1) await plays(i, i, 'medeu', 'led', sept, 13 + i); // 14 + 15 + 16 = 45, published
});
afterAll(async () => {
  await p?.close();
});

const verify = (url: string, headers: Record<string, string> = {}) =>
  p.servers.verify.inject({ method: 'GET', url, headers });
const publish = async (enabled: boolean) => {
  const res = await apiCall(p.servers.api, p.adminKey, 'PUT', '/api/v1/console/open-data/publication', {
    enabled,
  });
  expect(res.statusCode).toBe(200);
  expect(res.json()).toMatchObject({ enabled });
};

type Row = Record<string, string>;
const find = (rows: Row[], match: Partial<Row>) => {
  const found = rows.filter((row) => Object.entries(match).every(([k, v]) => row[k] === v));
  expect(found, JSON.stringify(match)).toHaveLength(1);
  return found[0]!;
};

describe('monthly releases', () => {
  test('publication is off by default: every open-data route answers 404 not_published', async () => {
    expect(await buildDueReleases(p.ctx)).toEqual(['2026-09']);
    for (const url of [
      '/v1/open/dictionary.json',
      '/v1/open/releases',
      '/v1/open/releases/2026-09/plays.csv',
      '/v1/open/releases/2026-09/dictionary.json',
      '/v1/open/releases/1999-01/plays.csv',
    ]) {
      const res = await verify(url);
      expect(res.statusCode, url).toBe(404);
      expect(res.json().code, url).toBe('not_published');
    }
  });

  test('lag: October is not released a day early, nor a second before 1 December 00:00 Almaty', async () => {
    await publish(true);
    p.clock.set(at('2026-11-30T12:00:00+05:00'));
    expect(await buildDueReleases(p.ctx)).toEqual([]);
    p.clock.set(at('2026-11-30T23:59:59+05:00'));
    expect(await buildDueReleases(p.ctx)).toEqual([]);
    const early = await verify('/v1/open/releases/2026-10/plays.csv');
    expect(early.statusCode).toBe(404);
    expect(early.json().code).toBe('not_found');
    // 2026-11-30T19:00:00Z is 1 December 00:00 in Almaty (UTC+5): a fixed UTC midnight would be five hours late.
    p.clock.set(at('2026-11-30T19:00:00Z'));
    expect(await buildDueReleases(p.ctx)).toEqual(['2026-10']);
    expect(await buildDueReleases(p.ctx)).toEqual([]);
    const list = await verify('/v1/open/releases');
    expect(list.statusCode).toBe(200);
    const releases = list.json().releases;
    expect(releases.map((r: { month: string }) => r.month)).toEqual(['2026-09', '2026-10']);
    expect(releases[1]).toMatchObject({ month: '2026-10', built_at: '2026-12-01T00:00:00+05:00' });
    expect(releases[1].files.map((f: { name: string }) => f.name)).toEqual([
      'plays-2026-10.csv',
      'dictionary.json',
    ]);
  });

  test('months not released or not existing: 404 not_found', async () => {
    for (const month of ['2026-11', '2025-01', '2026-13', '2026-1', 'latest']) {
      const res = await verify(`/v1/open/releases/${month}/plays.csv`);
      expect(res.statusCode, month).toBe(404);
      expect(res.json().code, month).toBe('not_found');
    }
  });

  test('October: the CSV parses strictly, keeps a row per cell with its status, and applies every rule', async () => {
    const res = await verify('/v1/open/releases/2026-10/plays.csv');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/csv; charset=utf-8/);
    expect(res.body.endsWith('\r\n')).toBe(true);
    const records = parseCsvStrict(res.body);
    expect(records[0]).toEqual([...COLUMNS]);
    const rows = csvObjects(res.body);
    for (const row of rows) {
      expect(row['month']).toBe('2026-10');
      expect(STATUSES).toContain(row['status']);
      expect(row['plays'] === '').toBe(isWithheld(row['status'] as CellStatus));
    }
    // 3 districts x 2 formats x 6 dayparts cells; 6 x (3 + 2 + 1) totals; 2 slots x 3 x 2 x 6 slot cells.
    expect(rows.filter((r) => r['table'] === 'cells')).toHaveLength(36);
    expect(rows.filter((r) => r['table'] === 'district_totals')).toHaveLength(18);
    expect(rows.filter((r) => r['table'] === 'format_totals')).toHaveLength(12);
    expect(rows.filter((r) => r['table'] === 'daypart_totals')).toHaveLength(6);
    expect(rows.filter((r) => r['table'] === 'slot_cells')).toHaveLength(72);

    const cell = (daypart: string, district: string, format: string) =>
      find(rows, { table: 'cells', daypart, district, format });
    // night: 3 operators and 3 advertisers are published; the 01:00 Almaty play of 1 October is in; the play of
    // 1 November 00:30 Almaty and the play of an unknown approval are out.
    expect(cell('night', 'almaly', 'billboard')).toMatchObject({ plays: '35', status: 'published' });
    expect(cell('night', 'almaly', 'led')).toMatchObject({ plays: '30', status: 'published' });
    expect(cell('night', 'auezov', 'billboard')).toMatchObject({ plays: '0', status: 'no_plays' });
    expect(find(rows, { table: 'daypart_totals', daypart: 'night' })).toMatchObject({
      plays: '125',
      status: 'published',
    });
    // 2 operators, 2 advertisers: withheld, and so are their totals (the same parties).
    expect(cell('morning', 'almaly', 'billboard')).toMatchObject({ plays: '', status: 'withheld_operators' });
    expect(find(rows, { table: 'district_totals', daypart: 'morning', district: 'almaly' })).toMatchObject({
      status: 'withheld_operators',
    });
    expect(cell('day', 'almaly', 'billboard')).toMatchObject({ plays: '', status: 'withheld_advertisers' });
    // one party at 70 percent passes, at 71 percent it does not (advertiser and operator).
    expect(cell('evening', 'almaly', 'billboard')).toMatchObject({ plays: '100', status: 'published' });
    expect(cell('late', 'almaly', 'billboard')).toMatchObject({ plays: '', status: 'withheld_share' });
    expect(cell('unknown', 'medeu', 'led')).toMatchObject({ plays: '', status: 'withheld_share' });
    // slot plays: a table of their own, operator rules only.
    expect(
      find(rows, {
        table: 'slot_cells',
        slot: 'gov',
        daypart: 'night',
        district: 'almaly',
        format: 'billboard',
      }),
    ).toMatchObject({
      plays: '15',
      status: 'published',
    });
    expect(
      find(rows, {
        table: 'slot_cells',
        slot: 'emergency',
        daypart: 'day',
        district: 'medeu',
        format: 'led',
      }),
    ).toMatchObject({
      plays: '',
      status: 'withheld_operators',
    });
  });

  test('October: the parsed CSV sums up — every published total equals the sum of its published cells', async () => {
    const rows = csvObjects((await verify('/v1/open/releases/2026-10/plays.csv')).body);
    const cells = rows.filter((r) => r['table'] === 'cells');
    const sum = (list: Row[]) => list.reduce((total, r) => total + Number(r['plays']), 0);
    let checked = 0;
    for (const total of rows.filter((r) => r['table'] !== 'cells' && r['table'] !== 'slot_cells')) {
      const members = cells.filter(
        (c) =>
          c['daypart'] === total['daypart'] &&
          (total['district'] === '' || c['district'] === total['district']) &&
          (total['format'] === '' || c['format'] === total['format']),
      );
      if (
        !isWithheld(total['status'] as CellStatus) &&
        members.every((c) => !isWithheld(c['status'] as CellStatus))
      ) {
        expect(sum(members), JSON.stringify(total)).toBe(Number(total['plays']));
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(10);
    // All billable plays of October: the night ones (125) and the evening ones (100) are published; the rest are
    // withheld and their daypart totals too.
    const published = rows.filter((r) => r['table'] === 'daypart_totals' && r['status'] === 'published');
    expect(sum(published)).toBe(225);
    expect(sum(cells.filter((c) => c['status'] === 'published' || c['status'] === 'no_plays'))).toBe(225);
  });

  test('September: complementary suppression; no withheld value can be recovered from the published totals', async () => {
    const res = await verify('/v1/open/releases/2026-09/plays.csv');
    expect(res.statusCode).toBe(200);
    const rows = csvObjects(res.body).filter((r) => r['daypart'] === 'day' && r['table'] !== 'slot_cells');
    const status = (match: Partial<Row>) => find(rows, match)['status'];
    expect(status({ table: 'cells', district: 'medeu', format: 'billboard' })).toBe('withheld_operators');
    // Without complements, medeu's total minus medeu/led (and billboard's total minus almaly/billboard) would give
    // the withheld 20 away. The cheapest safe pattern is the rectangle of the four cells.
    expect(status({ table: 'cells', district: 'medeu', format: 'led' })).toBe('withheld_complementary');
    expect(status({ table: 'cells', district: 'almaly', format: 'billboard' })).toBe(
      'withheld_complementary',
    );
    expect(status({ table: 'cells', district: 'almaly', format: 'led' })).toBe('withheld_complementary');
    expect(find(rows, { table: 'district_totals', district: 'medeu' })).toMatchObject({
      plays: '65',
      status: 'published',
    });
    expect(find(rows, { table: 'format_totals', format: 'billboard' })).toMatchObject({
      plays: '50',
      status: 'published',
    });
    expect(find(rows, { table: 'daypart_totals' })).toMatchObject({ plays: '140', status: 'published' });

    // Subtraction by a reader: in every row and column of the day table (totals included) a published total minus
    // the published values leaves either nothing or a sum of two or more withheld values.
    const districts = ['almaly', 'auezov', 'medeu'];
    const formats = ['billboard', 'led'];
    const entry = (d: number, f: number): Row =>
      d < districts.length && f < formats.length
        ? find(rows, { table: 'cells', district: districts[d]!, format: formats[f]! })
        : d < districts.length
          ? find(rows, { table: 'district_totals', district: districts[d]! })
          : f < formats.length
            ? find(rows, { table: 'format_totals', format: formats[f]! })
            : find(rows, { table: 'daypart_totals' });
    const table: MarginTable = {
      rows: districts.length,
      cols: formats.length,
      plays: [0, 1, 2, 3].map((d) => [0, 1, 2].map((f) => Number(entry(d, f)['plays']))),
      status: [0, 1, 2, 3].map((d) => [0, 1, 2].map((f) => entry(d, f)['status'] as CellStatus)),
    };
    for (let d = 0; d <= 3; d += 1) {
      const n = table.status[d]!.filter(isWithheld).length;
      expect(n === 0 || n >= 2).toBe(true);
    }
    for (let f = 0; f <= 2; f += 1) {
      const n = table.status.filter((row) => isWithheld(row[f]!)).length;
      expect(n === 0 || n >= 2).toBe(true);
    }
    // And by any combination of sums and differences (linear algebra over the published relations).
    expect(recoverableWithheld(table)).toEqual([]);
  });

  test('a release is byte-identical every time, with its SHA-256 as ETag, and can be neither changed nor rebuilt', async () => {
    const first = await verify('/v1/open/releases/2026-09/plays.csv');
    const second = await verify('/v1/open/releases/2026-09/plays.csv');
    expect(second.rawPayload.equals(first.rawPayload)).toBe(true);
    const sha = createHash('sha256').update(first.rawPayload).digest('hex');
    expect(first.headers['etag']).toBe(`"${sha}"`);
    const list = (await verify('/v1/open/releases')).json().releases;
    expect(list[0]).toMatchObject({ month: '2026-09', sha256: sha });
    const notModified = await verify('/v1/open/releases/2026-09/plays.csv', { 'if-none-match': `"${sha}"` });
    expect(notModified.statusCode).toBe(304);
    expect(notModified.body).toBe('');

    // Late plays of September (within the 90 days a play may arrive late) do not change the release.
    await plays(1, 1, 'almaly', 'billboard', at('2026-09-16T12:30:00+05:00'), 50);
    expect(await buildDueReleases(p.ctx)).toEqual([]);
    const after = await verify('/v1/open/releases/2026-09/plays.csv');
    expect(after.rawPayload.equals(first.rawPayload)).toBe(true);
    await expect(
      p.ctx.db.query("UPDATE open_data_releases SET csv = 'x' WHERE month = '2026-09'"),
    ).rejects.toMatchObject({
      code: '23001',
      where: expect.stringContaining('open_data_releases_immutable'),
    });
    await expect(
      p.ctx.db.query("DELETE FROM open_data_releases WHERE month = '2026-09'"),
    ).rejects.toMatchObject({
      code: '23001',
      where: expect.stringContaining('open_data_releases_immutable'),
    });
  });

  test("a release's dictionary.json is the OpenDataDictionary it was built with", async () => {
    const res = await verify('/v1/open/releases/2026-10/dictionary.json');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const sha = createHash('sha256').update(res.rawPayload).digest('hex');
    expect(res.headers['etag']).toBe(`"${sha}"`);
    const dictionary = res.json();
    expect(Value.Check(OpenDataDictionary, dictionary)).toBe(true);
    expect(dictionary.files[0].name).toBe('plays-2026-10.csv');
    expect(dictionary.codes.district.map((c: { code: string }) => c.code)).toEqual([
      'almaly',
      'auezov',
      'medeu',
    ]);
    expect(dictionary.codes.format.map((c: { code: string }) => c.code)).toEqual(['billboard', 'led']);
    expect(dictionary.disclosure).toMatchObject({
      min_operators: 3,
      min_advertisers: 3,
      max_party_share_pct: 70,
      lag_months: 1,
    });
  });

  test('switching publication off hides the releases again (404 not_published)', async () => {
    await publish(false);
    for (const url of [
      '/v1/open/releases',
      '/v1/open/releases/2026-09/plays.csv',
      '/v1/open/dictionary.json',
    ]) {
      const res = await verify(url);
      expect(res.statusCode, url).toBe(404);
      expect(res.json().code, url).toBe('not_published');
    }
    await publish(true);
    expect((await verify('/v1/open/releases/2026-09/plays.csv')).statusCode).toBe(200);
  });

  test("the feature's background loop builds what is due, once, with the clock's time", async () => {
    p.clock.set(at('2027-01-01T00:00:00+05:00'));
    const feature = createOpenDataFeature({ tickMs: 5 });
    const stop = await feature.start!(p.ctx);
    try {
      for (let i = 0; i < 400; i += 1) {
        const { rows } = await p.ctx.db.query("SELECT 1 FROM open_data_releases WHERE month = '2026-11'");
        if (rows.length > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    } finally {
      await stop();
    }
    const { rows } = await p.ctx.db.query<{ month: string; built_at: Date }>(
      'SELECT month, built_at FROM open_data_releases ORDER BY month',
    );
    expect(rows.map((r) => r.month)).toEqual(['2026-09', '2026-10', '2026-11']);
    expect(rows[2]!.built_at.toISOString()).toBe('2026-12-31T19:00:00.000Z');
  });
});
