import { almatyDayStart } from '@ooh/protocol';
import { expect, test } from 'vitest';
import { Fleet, formatReconciliation } from '../hardware-sim/src/index.js';
import { startE2ePlatform, testDir } from './support/e2e-platform.js';

test(
  'three players play two virtual hours; every play shown is counted once',
  { timeout: 180_000 },
  async () => {
    const dir = testDir('basics');
    const start = almatyDayStart('2026-01-15');
    const platform = await startE2ePlatform({ dir, now: start });
    const fleet = await Fleet.create({
      dir,
      platform: { urls: platform.urls, adminKey: platform.adminKey },
      time: { startMs: start.getTime(), platformClock: platform.platformClock, minStepMs: 15_000 },
      settings: {
        image_duration_ms: 60_000,
        media_recheck_ms: 3_600_000,
        shipping: { idle_interval_ms: 600_000 },
      },
      log: (line) => console.log(line),
    });
    try {
      await fleet.provision({
        players: 3,
        creatives: [{ name: 'alpha' }, { name: 'beta' }],
        validFrom: '2026-01-01',
        validUntil: '2026-01-31',
      });
      await fleet.startAll();
      const t0 = performance.now();
      await fleet.advance(2 * 3_600_000);
      console.log(
        `2 h in ${((performance.now() - t0) / 1000).toFixed(1)} s, steps ${fleet.driver!.stats.steps}, unsettled ${fleet.driver!.stats.unsettledSteps}`,
      );
      expect(await fleet.drain()).toBe(true);
      const result = await fleet.reconcile();
      console.log(formatReconciliation(result, { allPlayers: true }));
      expect(result.problems).toEqual([]);
      expect(result.totals.played).toBeGreaterThanOrEqual(3 * 110);
      expect(result.totals.counted).toBe(result.totals.played);
    } finally {
      console.log('closing fleet');
      await fleet.close();
      console.log('closing platform');
      await platform.close();
      console.log('closed');
    }
  },
);
