import { almatyDate } from '@ooh/protocol';
import { REVOCATION_LIST_LOCK } from '../approvals/revocations.js';
import { type Db, withTransaction } from '../db/pool.js';

/*
 * After a restore the database has forgotten everything made after its backup, but the world has not: players hold
 * the revocation lists published since (and compare versions only: "Versions never repeat, so equal versions mean
 * equal facts", pop-ingestion.md), envelopes that verify carry the approval numbers issued since, integrators hold
 * the submission numbers. Reusing any of them gives one number two meanings, both signed. So the restore skips
 * each past anything that lost interval could have used, in one transaction, and records it (restore_advances):
 *
 * - Serials (number_counters, series `approval` and `submission`, of every Almaty year from the backup's to the
 *   restore's): `last` += per_day × lost_days, where lost_days counts the days from the backup to the restore
 *   (rounded up, at least 1: the old platform cannot have run past the restore) and per_day is twice the busiest
 *   Almaty day the backup holds for that series, at least MIN_NUMBERS_PER_DAY, rounded up to a thousand. The
 *   numbers stay APR-/SUB-<Almaty year>-<serial>; a serial is at least six digits and grows wider past 999 999
 *   (docs/approvals.md), so a gap never makes a malformed number, and a year's six digits hold 999 skipped days.
 * - The revocation list's version: each version is published by one revocation, of an approval not revoked yet,
 *   so the lost interval published at most (approvals not revoked in the backup) + (approvals it could issue, the
 *   approval gap above) versions. The floor is the newest version (or an earlier restore's floor) plus that bound,
 *   rounded up to a thousand; publishRevocationList takes the next version above it.
 *
 * The ledger is not touched: an approval's leaf names its number, so a skipped number is simply one no leaf names,
 * while a reused one would have had two leaves with different manifests (one in blocks witnesses already hold).
 */

/** At least this many numbers of each series are skipped per lost day, however quiet the backup's history. */
export const MIN_NUMBERS_PER_DAY = 1000;
const ROUND_TO = 1000;
const DAY_MS = 86_400_000;

const roundUp = (n: number) => Math.ceil(n / ROUND_TO) * ROUND_TO;

export type SerialSeries = 'approval' | 'submission';

/** The busiest Almaty day of each series in the database: the count of numbers taken that day. */
const BUSIEST_DAY: Record<SerialSeries, string> = {
  approval: `SELECT coalesce(max(n), 0)::int AS busiest FROM (
               SELECT count(*) AS n FROM approvals GROUP BY (issued_at AT TIME ZONE 'Asia/Almaty')::date) days`,
  submission: `SELECT coalesce(max(n), 0)::int AS busiest FROM (
                 SELECT count(*) AS n FROM submissions GROUP BY (created_at AT TIME ZONE 'Asia/Almaty')::date) days`,
};

export interface SerialAdvance {
  series: SerialSeries;
  year: number;
  /** number_counters' last before the advance (0 for a year the backup had not used). */
  before: number;
  after: number;
}

export interface RestoreAdvance {
  backupTakenAt: Date;
  restoredAt: Date;
  lostDays: number;
  serials: SerialAdvance[];
  revocationList: {
    /** The newest version the backup held (0: none). */
    before: number;
    /** The next list is published as floor + 1. */
    floor: number;
  };
}

/**
 * Skips the serials and the revocation list's version of a restored database past the interval from
 * `backupTakenAt` to `restoredAt` (see above), and records it in restore_advances. One transaction, under the
 * revocation list's advisory lock and the counters' row locks, so nothing is issued or published meanwhile.
 */
export async function advancePastLostInterval(
  db: Db,
  backupTakenAt: Date,
  restoredAt: Date,
): Promise<RestoreAdvance> {
  const lostDays = Math.max(1, Math.ceil((restoredAt.getTime() - backupTakenAt.getTime()) / DAY_MS));
  const firstYear = Number(almatyDate(backupTakenAt).slice(0, 4));
  const lastYear = Math.max(firstYear, Number(almatyDate(restoredAt).slice(0, 4)));
  return withTransaction(db, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [REVOCATION_LIST_LOCK]);
    const serials: SerialAdvance[] = [];
    let approvalsSkipped = 0;
    for (const series of ['approval', 'submission'] as const) {
      const { rows } = await client.query<{ busiest: number }>(BUSIEST_DAY[series]);
      const gap = roundUp(Math.max(MIN_NUMBERS_PER_DAY, 2 * rows[0]!.busiest)) * lostDays;
      for (let year = firstYear; year <= lastYear; year++) {
        const { rows: advanced } = await client.query<{ last: number }>(
          `INSERT INTO number_counters (series, year, last) VALUES ($1, $2, $3)
           ON CONFLICT (series, year) DO UPDATE SET last = number_counters.last + $3
           RETURNING last`,
          [series, year, gap],
        );
        const after = advanced[0]!.last;
        serials.push({ series, year, before: after - gap, after });
        if (series === 'approval') approvalsSkipped += gap;
      }
    }
    const { rows: state } = await client.query<{ version: number; floor: number; unrevoked: number }>(
      `SELECT (SELECT coalesce(max(version), 0) FROM revocation_lists)::int AS version,
              (SELECT coalesce(max(revocation_list_version_floor), 0) FROM restore_advances)::int AS floor,
              (SELECT count(*) FROM approvals WHERE revoked_at IS NULL)::int AS unrevoked`,
    );
    const { version, floor: earlierFloor, unrevoked } = state[0]!;
    const floor = roundUp(Math.max(version, earlierFloor) + unrevoked + approvalsSkipped);
    await client.query(
      `INSERT INTO restore_advances (backup_taken_at, restored_at, revocation_list_version_before,
         revocation_list_version_floor, serials)
       VALUES ($1, $2, $3, $4, $5)`,
      [backupTakenAt, restoredAt, version, floor, JSON.stringify(serials)],
    );
    return { backupTakenAt, restoredAt, lostDays, serials, revocationList: { before: version, floor } };
  });
}

/** The restore's account of an advance, for the operator (stderr) and the log. */
export function describeAdvance(advance: RestoreAdvance): string[] {
  const taken = advance.backupTakenAt.toISOString();
  return [
    `numbers advanced past the ${advance.lostDays} day(s) since the backup (recorded in restore_advances):`,
    ...advance.serials.map(
      (s) =>
        `  ${s.series === 'approval' ? 'APR' : 'SUB'}-${s.year}: serial ${s.before} -> ${s.after} ` +
        `(the next is ${s.after + 1})`,
    ),
    `  revocation list: version ${advance.revocationList.before} -> the next is ${advance.revocationList.floor + 1}`,
    `APPROVALS, REVOCATIONS AND SUBMISSIONS MADE AFTER ${taken} ARE NOT IN THIS DATABASE. Players and integrators may`,
    '  hold them. Re-do every revocation made after that time first (players keep what they were told, but a player',
    '  installed now learns only from the platform), then re-issue the approvals: their old numbers are not reused,',
    '  the new ones differ, and media must be sent out again with their new envelopes.',
    'The ledger blocks of the days after the backup will be digested again with other contents: a witness that',
    "  cosigned them before refuses the new ones (a fork). Tell the witnesses' operators (docs/backup-restore.md).",
  ];
}

/**
 * The newest approval, revocation or submission the database holds: its backup was taken at or after it. Where the
 * backup's own time is not known (a database restored with the server's tools, a backup made before the manifest
 * recorded pg_backup_stop's time), the earlier of this and the backup's time is taken: skipping more is safe.
 */
export async function newestRecordedActivity(db: Db): Promise<Date | null> {
  const { rows } = await db.query<{ newest: Date | null }>(
    `SELECT greatest((SELECT max(issued_at) FROM approvals), (SELECT max(revoked_at) FROM approvals),
                     (SELECT max(created_at) FROM submissions), (SELECT max(issued_at) FROM revocation_lists)) AS newest`,
  );
  return rows[0]?.newest ?? null;
}
