import { afterEach, describe, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { seedApproval, seedOrganisation, seedPlays, seedStructure } from './helpers.js';

const open: TestDatabase[] = [];
afterEach(async () => {
  while (open.length) await open.pop()!.drop();
});

describe('migration 050_open_data', () => {
  test('applies on seeded data; publication starts off with the default disclosure; releases are immutable', async () => {
    const d = await createTestDatabase({ upTo: 49 });
    open.push(d);
    const operator = await seedOrganisation(d.db, 'operator');
    const structure = await seedStructure(d.db, operator, 'almaly', 'billboard');
    const approval = await seedApproval(d.db, await seedOrganisation(d.db, 'advertiser'), [structure]);
    await seedPlays(d.db, {
      structureId: structure,
      approvalNumber: approval.number,
      startAt: new Date('2026-10-01T10:00:00+05:00'),
      count: 3,
    });
    await migrate(d.db);
    const { rows: settings } = await d.db.query('SELECT * FROM open_data_settings');
    expect(settings).toEqual([
      expect.objectContaining({
        published: false,
        published_changed_at: null,
        min_operators: null,
        min_advertisers: null,
        max_party_share_pct: null,
        lag_months: null,
      }),
    ]);
    // One settings row only.
    await expect(d.db.query('INSERT INTO open_data_settings (id) VALUES (false)')).rejects.toMatchObject({
      code: '23514',
      constraint: 'open_data_settings_id_check',
    });
    await expect(d.db.query('UPDATE open_data_settings SET max_party_share_pct = 101')).rejects.toMatchObject(
      {
        code: '23514',
        constraint: 'open_data_settings_max_party_share_pct_check',
      },
    );
    // The seeded plays are untouched.
    const { rows: counts } = await d.db.query('SELECT sum(plays)::int AS n FROM play_counts');
    expect(counts[0].n).toBe(3);
    const insert = (month: string) =>
      d.db.query(
        `INSERT INTO open_data_releases (month, csv, csv_sha256, dictionary, dictionary_sha256, built_at,
                                         min_operators, min_advertisers, max_party_share_pct, lag_months)
         VALUES ($1, 'a', $2, '{}', $2, now(), 3, 3, 70, 1)`,
        [month, 'f'.repeat(64)],
      );
    await insert('2026-10');
    await expect(insert('2026-13')).rejects.toMatchObject({
      code: '23514',
      constraint: 'open_data_releases_month_check',
    });
    await expect(insert('2026-10')).rejects.toMatchObject({
      code: '23505',
      constraint: 'open_data_releases_pkey',
    });
    await expect(
      d.db.query("UPDATE open_data_releases SET built_at = now() WHERE month = '2026-10'"),
    ).rejects.toMatchObject({
      code: '23001',
      where: expect.stringContaining('open_data_releases_immutable'),
    });
    await expect(d.db.query('DELETE FROM open_data_releases')).rejects.toMatchObject({
      code: '23001',
      where: expect.stringContaining('open_data_releases_immutable'),
    });
  });
});
