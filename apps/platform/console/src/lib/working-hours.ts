/**
 * Working hours left until a fast-track review deadline (spec review_due_at: "counted in working hours"; DESIGN.md
 * section 8: Monday to Friday 09:00-18:00 Almaty, excluding Kazakhstan's public holidays and moved days). Almaty
 * wall-clock times come from the browser's tz database (Intl), never from a fixed offset.
 */
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
const DAY_MS = 24 * HOUR_MS;

const parts = new Intl.DateTimeFormat('en-US', {
  timeZone: 'Asia/Almaty',
  hourCycle: 'h23',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});

function wall(instant: number): { y: number; mo: number; d: number; h: number; mi: number; s: number } {
  const out: Record<string, number> = {};
  for (const p of parts.formatToParts(new Date(instant)))
    if (p.type !== 'literal') out[p.type] = Number(p.value);
  return {
    y: out['year']!,
    mo: out['month']!,
    d: out['day']!,
    h: out['hour']!,
    mi: out['minute']!,
    s: out['second']!,
  };
}

/** Minutes Almaty is ahead of UTC at `instant`. */
export function almatyOffsetMinutes(instant: number): number {
  const w = wall(instant);
  const asUtc = Date.UTC(w.y, w.mo - 1, w.d, w.h, w.mi, w.s);
  return Math.round((asUtc - Math.floor(instant / 1000) * 1000) / 60_000);
}

export function almatyDate(instant: number): string {
  const w = wall(instant);
  return `${w.y}-${String(w.mo).padStart(2, '0')}-${String(w.d).padStart(2, '0')}`;
}

function addDays(day: string, days: number): string {
  const [y, m, d] = day.split('-').map(Number) as [number, number, number];
  return new Date(Date.UTC(y, m - 1, d) + days * DAY_MS).toISOString().slice(0, 10);
}

/** The instant of hour:00 Almaty time on `day` (offset changes in Almaty happen at midnight, never in the day). */
export function almatyWallClock(day: string, hour: number): number {
  const [y, m, d] = day.split('-').map(Number) as [number, number, number];
  const asUtc = Date.UTC(y, m - 1, d, hour);
  return asUtc - almatyOffsetMinutes(asUtc - 5 * HOUR_MS) * 60_000;
}

function weekday(day: string): number {
  const [y, m, d] = day.split('-').map(Number) as [number, number, number];
  const w = new Date(Date.UTC(y, m - 1, d)).getUTCDay();
  return w === 0 ? 7 : w;
}

export function isWorkingDay(byDate: Map<string, string>, day: string): boolean {
  const kind = byDate.get(day);
  if (kind === 'transfer_work') return true;
  if (kind !== undefined) return false;
  return weekday(day) <= 5;
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
