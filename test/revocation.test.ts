import { addDays, almatyDate, almatyDayStart } from '@ooh/protocol';
import { expect, test } from 'vitest';
import { Fleet } from '../hardware-sim/src/index.js';
import { startE2ePlatform, testDir } from './support/e2e-platform.js';
import { drainAndReconcile, timer } from './support/fleet-run.js';

const HOUR = 3_600_000;
const MINUTE = 60_000;
const PLAYERS = 5;
const REFRESH = HOUR;
const STEP = MINUTE;

test(
  '(6) revocation mid-run: each player stops within one revocation-list refresh and logs REVOKED',
  { timeout: 300_000 },
  async () => {
    const dir = testDir('revocation');
    const day = almatyDate(new Date(Date.now() - 3 * 24 * HOUR));
    const start = almatyDayStart(day).getTime() + 20 * HOUR;
    const platform = await startE2ePlatform({ dir, now: new Date(start) });
    const fleet = await Fleet.create({
      dir,
      platform: { urls: platform.urls, adminKey: platform.adminKey },
      time: { startMs: start, platformClock: platform.platformClock, minStepMs: STEP },
      placement: { mode: 'in-process' },
      settings: {
        image_duration_ms: 5 * MINUTE,
        revocation_refresh_ms: REFRESH,
        media_recheck_ms: HOUR,
        shipping: { idle_interval_ms: 15 * MINUTE },
      },
    });
    const phase = timer();
    try {
      await fleet.provision({
        players: PLAYERS,
        creatives: [
          { name: 'to-be-revoked' },
          { name: 'stays' },
          // An approval whose last day is today: it expires at Almaty midnight, mid-run.
          { name: 'expires-tonight', validUntil: day },
        ],
        validFrom: addDays(day, -1),
        validUntil: addDays(day, 5),
      });
      const [revoked, stays, expiring] = fleet.creatives;
      await fleet.startAll();
      await fleet.advance(2 * HOUR);
      phase('two hours');

      // The authority revokes an approval at 22:00 Almaty.
      const revokedAt = fleet.now();
      const answer = await fleet.admin.revokeApproval(revoked!.approvalNumber, 'court order (simulated)');
      expect(answer.revocation_list_version).toBeGreaterThanOrEqual(1);
      await fleet.advance(5 * HOUR);
      phase('five more hours, past midnight');

      const midnight = almatyDayStart(addDays(day, 1)).getTime();
      for (const id of fleet.ids()) {
        const log = fleet.readLog(id);
        const stopBy = revokedAt + REFRESH + 2 * STEP;
        // The player logged REVOKED for the file, within one refresh of the revocation...
        const revokedReject = log.rejects.find((r) => r.code === 'REVOKED');
        expect(revokedReject, id).toBeDefined();
        expect(Date.parse(revokedReject!.at!)).toBeLessThanOrEqual(stopBy);
        expect(revokedReject!.approvalNumber).toBe(revoked!.approvalNumber);
        // ...and started no play of it after that.
        const lateStarts = log.plays.filter(
          (p) => p.approvalNumber === revoked!.approvalNumber && Date.parse(p.start) > stopBy,
        );
        expect(lateStarts, id).toEqual([]);
        // The approval that ended today stopped too, after midnight (EXPIRED_APPROVAL), within one media recheck.
        const expiredReject = log.rejects.find((r) => r.code === 'EXPIRED_APPROVAL');
        expect(expiredReject, id).toBeDefined();
        expect(Date.parse(expiredReject!.at!)).toBeGreaterThanOrEqual(midnight);
        expect(
          log.plays.filter(
            (p) =>
              p.approvalNumber === expiring!.approvalNumber &&
              Date.parse(p.start) > midnight + HOUR + 2 * STEP,
          ),
        ).toEqual([]);
        // The other creative played on.
        expect(
          log.plays.filter(
            (p) => p.approvalNumber === stays!.approvalNumber && Date.parse(p.start) > midnight,
          ).length,
        ).toBeGreaterThan(20);
      }
      // The platform received the REVOKED rejects.
      for (const player of fleet.players.values()) {
        const { items } = await fleet.admin.deviceEvents(player.files.deviceId, 'reject');
        expect(items.map((e) => e.code)).toContain('REVOKED');
      }

      const result = await drainAndReconcile(fleet);
      phase('drained and reconciled');
      // Plays shown between the revocation and the refresh were counted, flagged approval_revoked.
      const revokedTally = result.approvals.find((a) => a.approval === revoked!.approvalNumber)!;
      expect(revokedTally.flagged).toBeGreaterThan(0);
    } finally {
      await fleet.close();
      await platform.close();
    }
  },
);
