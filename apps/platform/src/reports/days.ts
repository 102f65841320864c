import {
  addDays,
  almatyDate,
  almatyDayEnd,
  almatyDayStart,
  formatAlmaty,
  type ReportZone,
} from '@ooh/protocol';
import { validationFailed } from '../http/problem.js';

/*
 * Days of a report in the time zone its reader chose. DESIGN.md section 8: "All calendar logic is Asia/Almaty
 * through the platform's tz database ... Never compute a local date by adding a fixed offset": Almaty days come from
 * the protocol's calendar; UTC days need no zone rules at all.
 */

/** The zone of a report's days: @ooh/protocol's, as its answer states it. */
export type { ReportZone };

/** The `tz` query parameter: `almaty` (the default) or `utc`. */
export function parseZone(value: string | undefined): ReportZone {
  if (value === undefined || value === 'almaty') return 'Asia/Almaty';
  if (value === 'utc') return 'UTC';
  throw validationFailed([{ path: 'querystring:/tz', code: 'not_allowed', message: 'almaty or utc' }]);
}

const DAY_MS = 86_400_000;

const utcDayStart = (day: string): Date => new Date(`${day}T00:00:00.000Z`);

/** First instant of `day` in the zone. */
export function dayStart(zone: ReportZone, day: string): Date {
  return zone === 'UTC' ? utcDayStart(day) : almatyDayStart(day);
}

/** First instant of the next day: the exclusive end of `day`. */
export function dayEnd(zone: ReportZone, day: string): Date {
  return zone === 'UTC' ? new Date(utcDayStart(day).getTime() + DAY_MS) : almatyDayEnd(day);
}

/** The calendar day of an instant in the zone. */
export function dayOf(zone: ReportZone, instant: Date): string {
  return zone === 'UTC' ? instant.toISOString().slice(0, 10) : almatyDate(instant);
}

/** An instant as RFC 3339 in the zone: `...+05:00` in Almaty, `...Z` in UTC. */
export function formatInstant(zone: ReportZone, instant: Date): string {
  return zone === 'UTC' ? `${instant.toISOString().slice(0, 19)}Z` : formatAlmaty(instant);
}

/** How many calendar days from `from` to `to`, both included (0 when `to` is before `from`), by arithmetic. */
export function daySpan(from: string, to: string): number {
  const ms = Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`);
  return Number.isFinite(ms) && ms >= 0 ? ms / 86_400_000 + 1 : 0;
}

/** Every calendar day from `from` to `to`, both included (callers bound the span first). */
export function daysFromTo(from: string, to: string): string[] {
  const span = daySpan(from, to);
  const out: string[] = [];
  let day = from;
  for (let i = 0; i < span; i += 1) {
    out.push(day);
    if (i + 1 < span) day = addDays(day, 1);
  }
  return out;
}

/** A stretch of time [from, until) during which an approval was live on a structure. */
export interface LiveInterval {
  from: Date;
  until: Date;
}

/**
 * When an approval is live: from the first instant of valid_from to the end of valid_until (Almaty dates, inclusive:
 * DESIGN.md section 4), cut short by its revocation.
 */
export function liveInterval(approval: {
  validFrom: string;
  validUntil: string;
  revokedAt: Date | null;
}): LiveInterval | null {
  const from = almatyDayStart(approval.validFrom);
  let until = almatyDayEnd(approval.validUntil);
  if (approval.revokedAt && approval.revokedAt < until) until = approval.revokedAt;
  return until > from ? { from, until } : null;
}

/** How many milliseconds of [start, end) the intervals cover (overlapping intervals count once). */
export function coveredMs(intervals: readonly LiveInterval[], start: Date, end: Date): number {
  const cut = intervals
    .map((i) => ({
      from: Math.max(i.from.getTime(), start.getTime()),
      until: Math.min(i.until.getTime(), end.getTime()),
    }))
    .filter((i) => i.until > i.from)
    .sort((a, b) => a.from - b.from);
  let total = 0;
  let reach = Number.NEGATIVE_INFINITY;
  for (const i of cut) {
    const from = Math.max(i.from, reach);
    if (i.until > from) total += i.until - from;
    reach = Math.max(reach, i.until);
  }
  return total;
}

/**
 * The declared plays of a structure on a day, how much of the day the campaign was live there, and whether the day is
 * over at `now`. A day is compared with its declared plays only when the campaign was live all of it and the day has
 * ended, as the declared_vs_actual city event does ("compares the plays of a full day with declared_daily_plays"): a
 * first or last day cut by the time zone, a revocation during the day, or a day not over yet is not compared.
 */
export function declaredOnDay(
  zone: ReportZone,
  day: string,
  intervals: readonly LiveInterval[],
  declared: number | null,
  now: Date,
): { declared: number | null; liveHours: number; compared: boolean } {
  const start = dayStart(zone, day);
  const end = dayEnd(zone, day);
  const covered = coveredMs(intervals, start, end);
  const full = covered > 0 && covered === end.getTime() - start.getTime();
  const value = full && declared !== null ? declared : null;
  return {
    declared: value,
    liveHours: Math.round((covered / 3_600_000) * 100) / 100,
    compared: value !== null && end.getTime() <= now.getTime(),
  };
}

/** The days of the zone that the intervals touch, in order. */
export function daysTouched(zone: ReportZone, intervals: readonly LiveInterval[]): string[] {
  const days = new Set<string>();
  for (const i of intervals) {
    const last = dayOf(zone, new Date(i.until.getTime() - 1));
    for (let day = dayOf(zone, i.from); day <= last; day = addDays(day, 1)) days.add(day);
  }
  return [...days].sort();
}

/** Declared plays per structure (keys lower-cased structure ids); entries that are not whole numbers are left out. */
export function declaredMap(value: unknown): Map<string, number> {
  const out = new Map<string, number>();
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return out;
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    if (typeof v === 'number' && Number.isInteger(v) && v >= 0) out.set(key.toLowerCase(), v);
  }
  return out;
}
