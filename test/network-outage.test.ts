import { addDays, almatyDate, almatyDayStart } from '@ooh/protocol';
import { expect, test } from 'vitest';
import { Fleet } from '../hardware-sim/src/index.js';
import { startE2ePlatform, testDir } from './support/e2e-platform.js';
import { BEHIND_PROXY_ENV, drainAndReconcile, timer } from './support/fleet-run.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const PLAYERS = 10;

test(
  '(2) a network outage of a virtual week, then answers lost on the way back, and a platform restart',
  { timeout: 360_000 },
  async () => {
    const dir = testDir('outage');
    const firstDay = almatyDate(new Date(Date.now() - 12 * DAY));
    const start = almatyDayStart(firstDay).getTime();
    const platform = await startE2ePlatform({ dir, now: new Date(start), env: BEHIND_PROXY_ENV });
    const fleet = await Fleet.create({
      dir,
      platform: { urls: platform.urls, adminKey: platform.adminKey },
      time: { startMs: start, platformClock: platform.platformClock, minStepMs: 5 * 60_000 },
      placement: { mode: 'children', count: 2 },
      // The proxy terminates the devices host's TLS, so answers on the certificate channel can be told apart too.
      network: { devicesMode: 'terminate', clientCertHeader: BEHIND_PROXY_ENV.DEVICES_CLIENT_CERT_HEADER },
      settings: {
        image_duration_ms: 10 * 60_000,
        media_recheck_ms: 12 * HOUR,
        revocation_refresh_ms: 6 * HOUR,
        shipping: { idle_interval_ms: 30 * 60_000 },
      },
    });
    const phase = timer();
    try {
      await fleet.provision({
        players: PLAYERS,
        creatives: [{ name: 'kazakh-air' }, { name: 'shymkent-beer' }],
        validFrom: addDays(firstDay, -1),
        validUntil: addDays(firstDay, 30),
        // Half the players ship over the certificate channel, half over the signed channel.
        certificates: (i) => i % 2 === 0,
      });
      await fleet.startAll();
      const network = fleet.segment!;
      phase('provisioned and started');

      // Half a day of normal play, then the network goes down for a week.
      await fleet.advance(12 * HOUR);
      const beforeOutage = await fleet.reconcile();
      expect(beforeOutage.totals.counted).toBeGreaterThan(PLAYERS * 60);
      network.setDown(true);
      await fleet.advance(7 * DAY);
      phase('a week offline');
      const queues = await fleet.queues();
      // Every player kept playing and logging: a week of plays waits on each one's disk.
      for (const depth of Object.values(queues)) expect(depth).toBeGreaterThan(7 * 24 * 6 - 10);
      expect(network.stats.refused).toBeGreaterThan(PLAYERS * 100);

      // Back, slow, and half the answers to batches lost after the platform stored them.
      network.setDown(false);
      network.setLatency(50);
      network.dropAnswers({ pathPrefix: '/s/v1/telemetry', probability: 0.5 });
      network.dropAnswers({ pathPrefix: '/d/v1/telemetry', probability: 0.5 });
      await fleet.advance(6 * HOUR);
      network.clearDrops();
      network.setLatency(0);
      phase('back with lost answers');
      expect(network.stats.droppedByPath['/s/v1/telemetry'] ?? 0).toBeGreaterThan(0);
      expect(network.stats.droppedByPath['/d/v1/telemetry'] ?? 0).toBeGreaterThan(0);

      // And the platform restarts (a deployment) while the backlog is still draining.
      await platform.restart();
      await fleet.advance(2 * HOUR);
      phase('platform restarted');

      const result = await drainAndReconcile(fleet);
      phase('drained and reconciled');
      // A batch resent after its answer was lost is recognised and counted once.
      expect(result.totals.duplicates).toBeGreaterThan(0);
      expect(result.totals.played).toBeGreaterThan(PLAYERS * 7.5 * 24 * 6);
      // The players told the platform they had gone offline.
      const modes = fleet.ids().map((id) => fleet.readLog(id).modeChanges);
      for (const count of modes) expect(count).toBeGreaterThanOrEqual(2);
    } finally {
      await fleet.close();
      await platform.close();
    }
  },
);
