import { expect, test } from 'vitest';
import { startE2ePlatform, testDir } from '../../test/support/e2e-platform.js';
import { parseScenario } from '../src/scenario/load.js';
import { formatDatabaseReport, runScenario } from '../src/scenario/run.js';
import { formatReconciliation } from '../src/truth/reconcile.js';

/**
 * "Years in minutes" (issue "A player that runs for years on a small disk"), the shorter version npm test runs: one
 * real agent against a real platform through three years of virtual time, at one play every 30 minutes (the full one,
 * a play a minute, is the `years` benchmark: hardware-sim/bench/years.bench.ts, scenarios/years-on-a-small-disk.json).
 * Outages of three to six weeks; during the longest, other software fills the player's small volume until it is all
 * but full: the player stops playing what it must prove (only the city's gov notice plays) and resumes by itself
 * once space is back. The play log stays bounded by retention; every play shown is counted once.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const MB = 1024 * 1024;
const YEARS = Number(process.env['YEARS_TEST_DAYS'] ?? 1095) * DAY;

// The longest outage, and the disk filling during it (days from the start).
const FULL_AT = 510;
const CLEANED_AT = 560;

const scenario = parseScenario({
  name: 'years-on-a-small-disk-short',
  description: 'three years, a play every 30 minutes, outages of weeks, a disk that nearly fills',
  time: { duration: `${YEARS / DAY}d`, step: '30m' },
  fleet: {
    players: 1,
    certificates: 0,
    network: 'tunnel',
    // 64 MB, of which other software takes 50: some 13 MB left for the play log (and its WAL, up to 4 MB).
    disk: { capacity_mb: 64, other_mb: 50 },
  },
  creatives: [{ name: 'kazakh-air' }, { name: 'almaty-metro' }, { name: 'city-notice', slot: 'gov' }],
  agent: {
    image_duration_ms: 30 * 60_000,
    media_recheck_ms: 12 * HOUR,
    revocation_refresh_ms: 12 * HOUR,
    // A batch every six hours (up to 1000 records): virtual time moves in steps of 30 minutes, and a shorter pause
    // would send one batch per play.
    shipping: { idle_interval_ms: 6 * HOUR, min_interval_ms: 6 * HOUR },
    disk: { warn_free_bytes: 6 * MB, hard_free_bytes: 3 * MB, check_interval_ms: HOUR },
    retention: { prune_interval_ms: 6 * HOUR },
  },
  steps: [
    { at: '150d', action: 'network', down: true },
    { at: '180d', action: 'network', down: false },
    { at: '500d', action: 'network', down: true },
    // Other software's logs grow: low, then all but full.
    { at: `${FULL_AT - 5}d`, action: 'disk', players: 'all', other_mb: 54 },
    { at: `${FULL_AT}d`, action: 'disk', players: 'all', other_mb: 60 },
    { at: '542d', action: 'network', down: false },
    // A technician (or logrotate) frees the space: the player resumes by itself.
    { at: `${CLEANED_AT}d`, action: 'disk', players: 'all', other_mb: 50 },
    { at: '900d', action: 'network', down: true },
    { at: '921d', action: 'network', down: false },
  ].filter((step) => Number.parseInt(step.at, 10) * DAY < YEARS),
  report: { database_every: '30d' },
});

test(
  'years in minutes: a player on a small disk for three years stays bounded and every play counts once',
  { timeout: 900_000 },
  async () => {
    const dir = testDir('years');
    // From yesterday on: a clock before 2025 is one the agent takes for unset (clock.ts EARLIEST_PLAUSIBLE), and the
    // signed channel (no client certificate) needs nothing of the machine's real clock.
    const start = Math.floor((Date.now() - DAY) / HOUR) * HOUR;
    const platform = await startE2ePlatform({ dir, now: new Date(start) });
    try {
      const began = performance.now();
      const result = await runScenario(
        { ...scenario, time: { ...scenario.time, start: new Date(start).toISOString() } },
        {
          dir,
          platform: { urls: platform.urls, adminKey: platform.adminKey, clock: platform.platformClock },
        },
      );
      console.log(
        `${YEARS / DAY} virtual days in ${((performance.now() - began) / 1000).toFixed(1)} s real, ${result.steps} steps`,
      );
      console.log(formatDatabaseReport(result.database));
      console.log(formatReconciliation(result.reconciliation));
      console.log(result.warnings);

      // Every play shown is counted on the platform exactly once.
      expect(result.drained).toBe(true);
      expect(result.reconciliation.problems).toEqual([]);
      const totals = result.reconciliation.totals;
      expect(totals.missing).toBe(0);
      expect(totals.double).toBe(0);
      expect(totals.queued).toBe(0);
      expect(totals.unlogged).toBe(0);
      expect(totals.counted).toBe(totals.played);
      expect(totals.played).toBeGreaterThan((YEARS / DAY) * 46);
      // Retention removed most of them from the player long before the end: they were read before it did.
      expect(result.database.archivedPlays).toBeGreaterThan(totals.played * 0.9);

      // Bounded: 28 days of answered history and the longest backlog (six weeks) at 48 plays a day, whatever the year.
      const samples = result.database.samples;
      expect(samples.length).toBeGreaterThan(YEARS / (30 * DAY));
      for (const sample of samples) expect(sample.recordsKept).toBeLessThan((28 + 45) * 60);
      expect(result.database.largest!.bytes).toBeLessThan(12 * MB);
      const lastYear = samples.filter((s) => Date.parse(s.at) > start + YEARS - 365 * DAY);
      const firstYear = samples.filter(
        (s) => Date.parse(s.at) < start + 365 * DAY && Date.parse(s.at) > start,
      );
      const largest = (list: typeof samples) => Math.max(...list.map((s) => s.fileBytes));
      if (firstYear.length > 0 && lastYear.length > 0) {
        expect(largest(lastYear)).toBeLessThan(largest(firstYear) * 2 + MB);
      }

      if (YEARS > CLEANED_AT * DAY) {
        // The disk all but full: after the next disk check nothing but the gov notice was shown, until it was
        // cleaned; after it, the advertisers' spots again.
        const player = result.reconciliation.players[0]!.id;
        const shown = (from: number, to: number) =>
          result.groundTruth
            .plays(player)
            .filter((play) => Date.parse(play.start) >= from && Date.parse(play.start) < to)
            .map((play) => play.relativePath);
        const during = shown(start + FULL_AT * DAY + 2 * HOUR, start + CLEANED_AT * DAY);
        expect(during.length).toBeGreaterThan(40 * 40);
        expect(during.filter((path) => !path.startsWith('gov/'))).toEqual([]);
        const after = shown(start + CLEANED_AT * DAY + 2 * HOUR, start + (CLEANED_AT + 10) * DAY);
        expect(after.filter((path) => !path.startsWith('gov/')).length).toBeGreaterThan(200);
        const states = samples.map((s) => s.disk);
        expect(states).toContain('full');
        expect(states.at(-1)).toBe('ok');
      }
    } finally {
      await platform.close();
    }
  },
);
