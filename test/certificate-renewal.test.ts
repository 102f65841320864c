import { readFileSync } from 'node:fs';
import { almatyDate, almatyDayStart } from '@ooh/protocol';
import { expect, test } from 'vitest';
import { Fleet } from '../hardware-sim/src/index.js';
import { startE2ePlatform, testDir } from './support/e2e-platform.js';
import { BEHIND_PROXY_ENV, drainAndReconcile, timer } from './support/fleet-run.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const PLAYERS = 100;

test(
  `(5) certificate renewal of ${PLAYERS} players, spread over the window, with one lost answer`,
  { timeout: 480_000 },
  async () => {
    const dir = testDir('renewal');
    // Certificates are checked against the machine's real clock by TLS: enrol 355 days back, so both the old
    // certificates (one year) and the renewed ones (issued in their last 30 days) are valid today.
    const enrolDay = almatyDate(new Date(Date.now() - 355 * DAY));
    const enrolAt = almatyDayStart(enrolDay).getTime();
    const platform = await startE2ePlatform({ dir, now: new Date(enrolAt), env: BEHIND_PROXY_ENV });
    const fleet = await Fleet.create({
      dir,
      platform: { urls: platform.urls, adminKey: platform.adminKey },
      time: { startMs: enrolAt, platformClock: platform.platformClock, minStepMs: HOUR },
      placement: { mode: 'children', count: 2 },
      // The proxy terminates TLS on the devices host, so the one lost renewal answer can be picked out.
      network: { devicesMode: 'terminate', clientCertHeader: BEHIND_PROXY_ENV.DEVICES_CLIENT_CERT_HEADER },
      settings: {
        // Few plays and batches: this test is about certificates, and the platform behind the terminating proxy
        // checks each client certificate's chain on every request.
        image_duration_ms: 4 * HOUR,
        media_recheck_ms: 7 * DAY,
        revocation_refresh_ms: DAY,
        renewal_check_ms: HOUR,
        shipping: { idle_interval_ms: 12 * HOUR },
      },
    });
    const phase = timer();
    try {
      const runFrom = enrolAt + 335 * DAY - 2 * HOUR;
      await fleet.provision({
        players: PLAYERS,
        creatives: [{ name: 'kaspi-red' }, { name: 'astana-opera' }],
        validFrom: almatyDate(new Date(runFrom - DAY)),
        validUntil: almatyDate(new Date(runFrom + 30 * DAY)),
      });
      phase('provisioned');
      const notAfter = Math.min(
        ...[...fleet.players.values()].map((p) => Date.parse(p.files.certificateNotAfter ?? '')),
      );
      expect(notAfter - enrolAt).toBeGreaterThan(364 * DAY);

      // Eleven months later, two hours before the certificates have 30 days left, the players are switched on.
      await fleet.jumpTo(runFrom);
      await fleet.startAll();
      phase('started');
      // Exactly one renewal answer is lost after the platform issued the certificate.
      fleet.segment!.dropAnswers({ link: 'devices', pathPrefix: '/d/v1/renew', count: 1 });
      await fleet.advance(15 * DAY + 14 * HOUR);
      phase('fifteen and a half days');
      // Steps left with a player still busy are where a Date header of the next step can reach a player (README of
      // hardware-sim, "Virtual time"): shown for a failure's reader.
      console.log(`steps ${fleet.driver!.stats.steps}, unsettled ${fleet.driver!.stats.unsettledSteps}`);
      expect(fleet.segment!.stats.droppedByPath['/d/v1/renew']).toBe(1);

      // Every player renewed on its own, at a point drawn in the first half of its last 30 days.
      const renewedAt: number[] = [];
      for (const player of fleet.players.values()) {
        const device = await fleet.admin.device(player.files.deviceId);
        // Exactly one new certificate each, also for the player whose answer was lost (it sent the same CSR again).
        expect(device.certificates, player.id).toHaveLength(2);
        const [current, old] = device.certificates;
        expect(current!.state).toBe('current');
        expect(current!.first_used_at, `${player.id} used its new certificate`).not.toBeNull();
        expect(['previous-until', 'superseded']).toContain(old!.state);
        const issued = Date.parse(current!.issued_at);
        expect(issued).toBeGreaterThanOrEqual(notAfter - 30 * DAY - HOUR);
        expect(issued).toBeLessThanOrEqual(notAfter - 15 * DAY + 2 * HOUR);
        renewedAt.push(issued);
        const status = await fleet.status(player.id);
        expect(status!.identity.certificate!.serial.toLowerCase()).toBe(current!.serial.toLowerCase());
        expect(status!.identity.renewal?.state ?? 'none').toBe('none');
      }
      // Spread over the window, not in one burst.
      const days = new Set(renewedAt.map((t) => almatyDate(new Date(t))));
      expect(days.size).toBeGreaterThanOrEqual(10);
      expect(Math.max(...renewedAt) - Math.min(...renewedAt)).toBeGreaterThan(10 * DAY);

      // The player whose answer was lost tried again with the same request and got the certificate already issued.
      const retried = [...fleet.players.values()].filter((p) =>
        readFileSync(`${p.files.dir}/agent.log`, 'utf8').includes('renewal call failed'),
      );
      expect(retried.map((p) => p.id)).toHaveLength(1);

      await drainAndReconcile(fleet, { drainMs: DAY });
      phase('drained and reconciled');
    } finally {
      await fleet.close();
      await platform.close();
    }
  },
);
