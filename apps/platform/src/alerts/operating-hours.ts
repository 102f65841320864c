import { addDays, almatyDate } from '@ooh/protocol';
import { almatyWallClock } from '../working-hours/index.js';
import type { OperatingHours } from './settings.js';

const MINUTE_MS = 60_000;

/** The instant of a local Almaty time of day (minutes after midnight, up to 24:00), through the tz database. */
function almatyMinute(day: string, minute: number): Date {
  if (minute >= 24 * 60) return almatyWallClock(addDays(day, 1), 0);
  return new Date(almatyWallClock(day, Math.floor(minute / 60)).getTime() + (minute % 60) * MINUTE_MS);
}

export interface OperatingWindow {
  /** Whether `now` is inside the screens' operating hours. */
  open: boolean;
  /** When the window holding `now` opened; null outside it, and round the clock (it never opened). */
  opensAt: Date | null;
  /** When it closes; null outside it, and round the clock. */
  closesAt: Date | null;
}

/**
 * The operating window at `now` (DESIGN.md section 8: all calendar logic is Asia/Almaty through the tz database, never
 * a fixed offset). Every day has the same hours; a window that closes after midnight (18:00-02:00) belongs to the day
 * it opened, so at 01:00 the window of the day before is the one in force.
 */
export function operatingWindowAt(now: Date, hours: OperatingHours): OperatingWindow {
  if (hours.always) return { open: true, opensAt: null, closesAt: null };
  const today = almatyDate(now);
  for (const day of [addDays(today, -1), today]) {
    const opensAt = almatyMinute(day, hours.opensMinute);
    const closesAt =
      hours.closesMinute > hours.opensMinute
        ? almatyMinute(day, hours.closesMinute)
        : almatyMinute(addDays(day, 1), hours.closesMinute);
    if (now.getTime() >= opensAt.getTime() && now.getTime() < closesAt.getTime()) {
      return { open: true, opensAt, closesAt };
    }
  }
  return { open: false, opensAt: null, closesAt: null };
}
