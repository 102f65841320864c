/**
 * Working hours left until a fast-track review deadline (spec review_due_at: "counted in working hours"; DESIGN.md
 * section 8: Monday to Friday 09:00-18:00 Almaty, excluding Kazakhstan's public holidays and moved days). Almaty
 * wall-clock times come from the browser's tz database (Intl), never from a fixed offset: @ooh/protocol's Almaty
 * calendar, the platform's own.
 */
import { addDays, almatyDate, almatyOffsetMinutes, almatyWeekday } from '@ooh/protocol';

export interface CalendarEntry {
  date: string;
  kind: string;
}

export interface WorkingCalendar {
  covers: { from: string; until: string };
  days: readonly CalendarEntry[];
}

export const OPENS_HOUR = 9;
export const CLOSES_HOUR = 18;
const HOUR_MS = 3_600_000;

/** The instant of hour:00 Almaty time on `day` (offset changes in Almaty happen at midnight, never in the day). */
export function almatyWallClock(day: string, hour: number): number {
  const [y, m, d] = day.split('-').map(Number) as [number, number, number];
  const asUtc = Date.UTC(y, m - 1, d, hour);
  return asUtc - almatyOffsetMinutes(asUtc - 5 * HOUR_MS) * 60_000;
}

export function isWorkingDay(byDate: Map<string, string>, day: string): boolean {
  const kind = byDate.get(day);
  if (kind === 'transfer_work') return true;
  if (kind !== undefined) return false;
  return almatyWeekday(day) <= 5;
}

/** Working milliseconds from `from` to `to` (0 when `to` is not after `from`). */
export function workingMsBetween(calendar: WorkingCalendar, from: number, to: number): number {
  if (!(to > from)) return 0;
  const byDate = new Map<string, string>();
  // A date can be listed twice (a holiday and a religious day): any entry makes it a rest day unless transfer_work.
  for (const entry of calendar.days)
    if (byDate.get(entry.date) !== 'transfer_work') byDate.set(entry.date, entry.kind);
  let total = 0;
  let day = almatyDate(from);
  const last = almatyDate(to);
  for (let i = 0; i < 3700 && day <= last; i += 1) {
    if (isWorkingDay(byDate, day)) {
      const opens = almatyWallClock(day, OPENS_HOUR);
      const closes = almatyWallClock(day, CLOSES_HOUR);
      const start = Math.max(opens, from);
      const end = Math.min(closes, to);
      if (end > start) total += end - start;
    }
    day = addDays(day, 1);
  }
  return total;
}
