import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { seedApproval, seedOrganisation, seedStructure } from '../open-data/helpers.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const open: TestDatabase[] = [];
afterEach(async () => {
  while (open.length) await open.pop()!.drop();
});
const NOW = new Date('2026-11-20T06:00:00Z');

describe('migration 051_city_events', () => {
  test('applies on seeded data; the band defaults; events are unique by type and subject', async () => {
    const d = await createTestDatabase({ upTo: 50 });
    open.push(d);
    const structure = await seedStructure(d.db, await seedOrganisation(d.db, 'operator'), 'medeu', 'led');
    const approval = await seedApproval(d.db, await seedOrganisation(d.db, 'advertiser'), [structure], {
      declared: { [structure]: 100 },
    });
    await d.db.query('UPDATE open_data_settings SET published = true');
    await migrate(d.db);
    const { rows: settings } = await d.db.query('SELECT declared_band_pct FROM city_event_settings');
    expect(settings).toEqual([{ declared_band_pct: null }]);
    const { rows: kept } = await d.db.query('SELECT declared_daily_plays FROM submissions WHERE id = $1', [
      approval.submissionId,
    ]);
    expect(kept[0].declared_daily_plays).toEqual({ [structure]: 100 });
    expect((await d.db.query('SELECT published FROM open_data_settings')).rows).toEqual([
      { published: true },
    ]);

    const event = (id: string) =>
      d.db.query(
        `INSERT INTO city_events (id, type, subject_key, day, payload, body, created_at)
         VALUES ($1, 'declared_vs_actual', 'sub/st/2026-11-20', '2026-11-20', '{}', '{}', $2)`,
        [id, NOW],
      );
    const first = randomUUID();
    await event(first);
    await expect(event(randomUUID())).rejects.toMatchObject({
      code: '23505',
      constraint: 'city_events_type_subject_key_key',
    });
    const { rows: sub } = await d.db.query(
      `INSERT INTO webhook_subscriptions (url, secret, types, created_at)
       VALUES ('https://example.org/hook', $1, '{declared_vs_actual}', $2) RETURNING id`,
      ['s'.repeat(32), NOW],
    );
    await d.db.query(
      'INSERT INTO webhook_deliveries (subscription_id, event_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $3)',
      [sub[0].id, first, NOW],
    );
    await expect(
      d.db.query(
        'INSERT INTO webhook_deliveries (subscription_id, event_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $3)',
        [sub[0].id, first, NOW],
      ),
    ).rejects.toMatchObject({ code: '23505', constraint: 'webhook_deliveries_subscription_id_event_id_key' });
    await expect(
      d.db.query(
        `INSERT INTO webhook_subscriptions (url, secret, types, created_at) VALUES ('ftp://x', $1, '{a}', $2)`,
        ['s'.repeat(32), NOW],
      ),
    ).rejects.toMatchObject({ code: '23514', constraint: 'webhook_subscriptions_url_check' });
  });
});
