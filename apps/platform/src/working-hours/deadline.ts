import { addDays, almatyDate, almatyDayStart, almatyOffsetMinutes } from '@ooh/protocol';
import type { WorkingCalendar } from './calendar.js';

/** DESIGN.md section 8: "Monday to Friday 09:00–18:00 Almaty" (and transfer working days). */
export const WORKDAY_OPENS_HOUR = 9;
export const WORKDAY_CLOSES_HOUR = 18;

const HOUR_MS = 3_600_000;
// A deadline further than ten years of rest days away is a broken calendar, not a deadline.
const MAX_DAYS = 3660;

/** The instant of `hour`:00 local time on an Almaty day, through the tz database (never a fixed offset). */
export function almatyWallClock(day: string, hour: number): Date {
  const [y, m, d] = day.split('-').map(Number) as [number, number, number];
  const asUtc = Date.UTC(y, m - 1, d, hour);
  // The offset at the guessed instant; Almaty's changes happen at midnight, never inside working hours.
  const guess = almatyDayStart(day).getTime() + hour * HOUR_MS;
  return new Date(asUtc - almatyOffsetMinutes(new Date(guess)) * 60_000);
}

export interface Deadline {
  due: Date;
  /** False when the count ran past the years the calendar file covers (weekends only were skipped there). */
  calendarCovered: boolean;
}

/**
 * The instant by which `hours` working hours have passed since `start`: time counts only inside 09:00–18:00
 * Almaty on working days. A start outside working hours begins counting at the next opening; a count
 * that ends exactly at closing time is due at 18:00 that day.
 */
export function addWorkingHours(start: Date, hours: number, calendar: WorkingCalendar): Deadline {
  if (!Number.isFinite(hours) || hours <= 0) throw new RangeError('hours must be a positive number');
  let remaining = Math.round(hours * HOUR_MS);
  let cursor = start.getTime();
  let calendarCovered = true;
  let day = almatyDate(start);
  for (let i = 0; i < MAX_DAYS; i += 1) {
    if (!calendar.covered(day)) calendarCovered = false;
    if (calendar.isWorkingDay(day)) {
      const opens = almatyWallClock(day, WORKDAY_OPENS_HOUR).getTime();
      const closes = almatyWallClock(day, WORKDAY_CLOSES_HOUR).getTime();
      if (cursor < opens) cursor = opens;
      if (cursor < closes) {
        const available = closes - cursor;
        if (remaining <= available) return { due: new Date(cursor + remaining), calendarCovered };
        remaining -= available;
      }
    }
    day = addDays(day, 1);
    cursor = almatyDayStart(day).getTime();
  }
  throw new RangeError(`no deadline within ${MAX_DAYS} days of ${start.toISOString()}`);
}
