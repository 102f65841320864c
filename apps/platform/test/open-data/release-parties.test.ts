import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildDueReleases } from '../../src/open-data/release.js';
import { setRules } from '../../src/open-data/repository.js';
import { apiCall, startTestPlatform, type TestPlatform } from '../support/platform.js';
import { csvObjects, seedApproval, seedOrganisation, seedPlays, seedStructure } from './helpers.js';

/*
 * Which plays enter a release, and who the parties of a cell are, end to end on a real PostgreSQL (audit I, findings
 * 1 and 4). Plays are seeded as ingestion stores them (pop_records with the flags src/pop/judge.ts gives).
 *
 * October 2026 is built with rules that publish every cell with plays (1 operator, 1 advertiser, 100 %), so that the
 * cell's number shows exactly which plays entered. November 2026 is built with the spec's defaults (3, 3, 70 %).
 */

let p: TestPlatform;
const at = (iso: string) => new Date(iso);
const verify = (url: string) => p.servers.verify.inject({ method: 'GET', url });

beforeAll(async () => {
  p = await startTestPlatform({ now: at('2026-11-20T12:00:00+05:00') });
  const on = await apiCall(p.servers.api, p.adminKey, 'PUT', '/api/v1/console/open-data/publication', {
    enabled: true,
  });
  expect(on.statusCode).toBe(200);
});
afterAll(async () => {
  await p?.close();
});

async function releaseRows(month: string): Promise<Record<string, string>[]> {
  const res = await verify(`/v1/open/releases/${month}/plays.csv`);
  expect(res.statusCode, res.body).toBe(200);
  return csvObjects(res.body);
}

const cellOf = (rows: Record<string, string>[], district: string, format: string, daypart: string) => {
  const found = rows.filter(
    (r) =>
      r['table'] === 'cells' &&
      r['district'] === district &&
      r['format'] === format &&
      r['daypart'] === daypart,
  );
  expect(found).toHaveLength(1);
  return { plays: found[0]!['plays'], status: found[0]!['status'] };
};

describe('only counted, billable plays enter the cells (DESIGN.md section 7)', () => {
  test('plays the approval did not cover (revoked, outside its dates, not its structure, other media) are left out; other flags stay in', async () => {
    const db = p.ctx.db;
    const operator = await seedOrganisation(db, 'operator', 'Billing Operator');
    const advertiser = await seedOrganisation(db, 'advertiser', 'Billing Advertiser');
    const structure = await seedStructure(db, operator, 'turksib', 'billboard');
    const approval = await seedApproval(db, advertiser, [structure]);
    const start = at('2026-10-07T12:30:00+05:00');
    const seed = (count: number, flags: string[] = []) =>
      seedPlays(db, {
        structureId: structure,
        approvalNumber: approval.number,
        startAt: start,
        count,
        flags,
      });
    await seed(10);
    // Flags about the report, not the approval: the plays are billable.
    await seed(2, ['screen_off']);
    await seed(1, ['structure_mismatch', 'timing_missing']);
    // Flags that say the approval did not cover the play.
    await seed(7, ['approval_revoked']);
    await seed(5, ['approval_not_valid_on_day']);
    await seed(4, ['approval_not_for_structure']);
    await seed(3, ['media_mismatch', 'screen_off']);

    await setRules(db, { minOperators: 1, minAdvertisers: 1, maxPartySharePct: 100 }, p.clock.now());
    p.clock.set(at('2026-12-01T00:00:00+05:00'));
    expect(await buildDueReleases(p.ctx)).toEqual(['2026-10']);
    await setRules(db, { minOperators: null, minAdvertisers: null, maxPartySharePct: null }, p.clock.now());

    const rows = await releaseRows('2026-10');
    expect(cellOf(rows, 'turksib', 'billboard', 'day')).toEqual({ plays: '13', status: 'published' });
    const dictionary = (await verify('/v1/open/releases/2026-10/dictionary.json')).json();
    expect(dictionary.version).toBe('3');
    for (const flag of [
      'approval_not_valid_on_day',
      'approval_not_for_structure',
      'approval_revoked',
      'media_mismatch',
    ]) {
      expect(dictionary.basis.description.en).toContain(flag);
      expect(dictionary.basis.description.ru).toContain(flag);
      expect(dictionary.basis.description.kk).toContain(flag);
    }
  });
});
