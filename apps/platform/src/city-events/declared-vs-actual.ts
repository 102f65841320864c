import { randomUUID } from 'node:crypto';
import { addDays, almatyDate, almatyDayEnd, formatAlmaty } from '@ooh/protocol';
import type { PlatformContext } from '../context.js';
import { withTransaction } from '../db/pool.js';
import {
  checkedDays,
  type DeclaredFact,
  declaredFacts,
  insertEvent,
  markChecked,
  readBandPct,
} from './repository.js';

/*
 * spec Events: "A city event named declared_vs_actual compares the plays of a full day with declared_daily_plays
 * (default band 30 %); its payload and delivery: not shown." The payload and the delivery are documented in
 * docs/city-events.md.
 */

export const DECLARED_VS_ACTUAL = 'declared_vs_actual';

/** How many full days back the check looks for days not yet compared (after a stop, for instance). */
export const LOOKBACK_DAYS = 7;

export interface BandVerdict {
  outside: boolean;
  /** (actual − declared) / declared in percent, rounded to 2 decimals; null when declared is 0. */
  deviationPct: number | null;
}

/**
 * Outside the band when |actual − declared| / declared is MORE than band percent: exactly at the band is inside.
 * Integers only (|a − d| × 100 > band × d), so 30 % of 100 is never taken for 30.000000001 %. Declared 0: any
 * counted play is outside (it is infinitely far off), none is inside.
 */
export function bandVerdict(declared: number, actual: number, bandPct: number): BandVerdict {
  const outside = Math.abs(actual - declared) * 100 > bandPct * declared;
  const deviationPct = declared === 0 ? null : Math.round(((actual - declared) * 10_000) / declared) / 100;
  return { outside, deviationPct };
}

/** The event document, as listed in the console and sent as the webhook body (docs/city-events.md). */
export interface DeclaredVsActualEvent {
  id: string;
  type: typeof DECLARED_VS_ACTUAL;
  day: string;
  created_at: string;
  data: {
    submission_id: string;
    submission_number: string;
    organisation_id: string;
    advertiser_name: string;
    approval_numbers: string[];
    structure_id: string;
    structure_code: string | null;
    declared_plays: number;
    actual_plays: number;
    deviation_pct: number | null;
    direction: 'over' | 'under';
    band_pct: number;
  };
}

export function declaredVsActualEvent(
  fact: DeclaredFact,
  day: string,
  bandPct: number,
  id: string,
  createdAt: Date,
): DeclaredVsActualEvent {
  const verdict = bandVerdict(fact.declared, fact.actual, bandPct);
  return {
    id,
    type: DECLARED_VS_ACTUAL,
    day,
    created_at: formatAlmaty(createdAt),
    data: {
      submission_id: fact.submissionId,
      submission_number: fact.submissionNumber,
      organisation_id: fact.organisationId,
      advertiser_name: fact.advertiserName,
      approval_numbers: fact.approvalNumbers,
      structure_id: fact.structureId,
      structure_code: fact.structureCode,
      declared_plays: fact.declared,
      actual_plays: fact.actual,
      deviation_pct: verdict.deviationPct,
      direction: fact.actual > fact.declared ? 'over' : 'under',
      band_pct: bandPct,
    },
  };
}

/** The last full Almaty day at `now`: the day before today in Almaty (DESIGN.md section 8). */
export function lastFullDay(now: Date): string {
  return addDays(almatyDate(now), -1);
}

/**
 * Compares every full Almaty day of the last LOOKBACK_DAYS not yet compared. Each day is compared once, in one
 * transaction under an advisory lock, by whichever instance takes it; the events are unique by submission,
 * structure and day, so even a repeated comparison raises none twice. Returns the days compared and the number of
 * events raised.
 */
export async function checkDeclaredVsActual(
  ctx: PlatformContext,
  now: Date = ctx.clock.now(),
): Promise<{ days: string[]; events: number }> {
  const last = lastFullDay(now);
  const first = addDays(last, -(LOOKBACK_DAYS - 1));
  const done = await checkedDays(ctx.db, DECLARED_VS_ACTUAL, first, last);
  const days: string[] = [];
  let events = 0;
  for (let day = first; day <= last; day = addDays(day, 1)) {
    if (done.has(day)) continue;
    const raised = await withTransaction(ctx.db, async (client) => {
      const { rows } = await client.query<{ locked: boolean }>(
        `SELECT pg_try_advisory_xact_lock(hashtext('ooh:declared_vs_actual:' || $1)) AS locked`,
        [day],
      );
      if (!rows[0]?.locked) return null;
      const again = await checkedDays(client, DECLARED_VS_ACTUAL, day, day);
      if (again.has(day)) return null;
      const { bandPct } = await readBandPct(client);
      let count = 0;
      for (const fact of await declaredFacts(client, day, almatyDayEnd(day))) {
        if (!bandVerdict(fact.declared, fact.actual, bandPct).outside) continue;
        const event = declaredVsActualEvent(fact, day, bandPct, randomUUID(), now);
        const stored = await insertEvent(client, {
          id: event.id,
          type: DECLARED_VS_ACTUAL,
          subjectKey: `${fact.submissionId}/${fact.structureId}/${day}`,
          day,
          payload: event.data,
          body: JSON.stringify(event),
          createdAt: now,
        });
        if (stored) count += 1;
      }
      await markChecked(client, DECLARED_VS_ACTUAL, day, now, count);
      return count;
    });
    if (raised === null) continue;
    days.push(day);
    events += raised;
    if (raised > 0) ctx.log.info({ day, events: raised }, 'declared_vs_actual events raised');
  }
  return { days, events };
}
