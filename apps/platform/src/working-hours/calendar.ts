import { readFileSync } from 'node:fs';
import { almatyWeekday, isCalendarDate } from '@ooh/protocol';

/**
 * Kazakhstan's working calendar (DESIGN.md section 8: "excluding Kazakhstan's public holidays and moved
 * days, kept as a dated data file in the platform"): data/kz-working-calendar.json.
 */
export const CALENDAR_FILE = new URL('../../data/kz-working-calendar.json', import.meta.url);

export const DAY_KINDS = ['holiday', 'religious', 'moved_holiday', 'transfer_rest', 'transfer_work'] as const;
export type DayKind = (typeof DAY_KINDS)[number];

export interface CalendarDay {
  date: string;
  kind: DayKind;
  name: string;
  source: string;
}

export class CalendarError extends Error {
  readonly code = 'calendar_invalid';
  constructor(message: string) {
    super(message);
    this.name = 'CalendarError';
  }
}

export class WorkingCalendar {
  private readonly byDate: Map<string, CalendarDay>;

  constructor(
    readonly covers: { from: string; until: string },
    readonly days: readonly CalendarDay[],
  ) {
    this.byDate = new Map(days.map((d) => [d.date, d]));
  }

  /** Parses the data file, refusing anything malformed rather than counting hours on a wrong calendar. */
  static parse(json: unknown): WorkingCalendar {
    const doc = json as { covers?: { from?: unknown; until?: unknown }; days?: unknown; sources?: unknown };
    const from = doc?.covers?.from;
    const until = doc?.covers?.until;
    if (
      typeof from !== 'string' ||
      typeof until !== 'string' ||
      !isCalendarDate(from) ||
      !isCalendarDate(until)
    ) {
      throw new CalendarError('covers.from and covers.until must be dates');
    }
    if (!Array.isArray(doc.days)) throw new CalendarError('days must be an array');
    const sources = (doc.sources ?? {}) as Record<string, unknown>;
    const seen = new Set<string>();
    const days = doc.days.map((raw: unknown, i): CalendarDay => {
      const d = raw as Partial<CalendarDay>;
      const where = `days[${i}]`;
      if (typeof d.date !== 'string' || !isCalendarDate(d.date))
        throw new CalendarError(`${where}.date is not a date`);
      if (d.date < from || d.date > until) throw new CalendarError(`${where}: ${d.date} is outside covers`);
      if (!DAY_KINDS.includes(d.kind as DayKind))
        throw new CalendarError(`${where}.kind is not one of ${DAY_KINDS.join(', ')}`);
      if (typeof d.name !== 'string' || d.name === '') throw new CalendarError(`${where}.name is missing`);
      if (typeof d.source !== 'string' || !(d.source in sources))
        throw new CalendarError(`${where}.source names no source`);
      const weekend = almatyWeekday(d.date) >= 6;
      if (d.kind === 'transfer_work' && !weekend)
        throw new CalendarError(`${where}: a transfer_work day must be a weekend day`);
      if ((d.kind === 'moved_holiday' || d.kind === 'transfer_rest') && weekend) {
        throw new CalendarError(`${where}: a ${d.kind} day must be a weekday`);
      }
      if (seen.has(d.date) && d.kind !== 'religious' && d.kind !== 'holiday') {
        throw new CalendarError(`${where}: ${d.date} is listed twice`);
      }
      seen.add(d.date);
      return { date: d.date, kind: d.kind as DayKind, name: d.name, source: d.source };
    });
    return new WorkingCalendar({ from, until }, days);
  }

  static load(file: URL = CALENDAR_FILE): WorkingCalendar {
    return WorkingCalendar.parse(JSON.parse(readFileSync(file, 'utf8')));
  }

  /** Whether the data file speaks for this day; outside it only weekends count as rest. */
  covered(day: string): boolean {
    return day >= this.covers.from && day <= this.covers.until;
  }

  entry(day: string): CalendarDay | undefined {
    return this.byDate.get(day);
  }

  isWorkingDay(day: string): boolean {
    const entry = this.byDate.get(day);
    if (entry?.kind === 'transfer_work') return true;
    if (entry) return false;
    return almatyWeekday(day) <= 5;
  }
}

let shared: WorkingCalendar | null = null;
/** The platform's calendar, read once from the data file. */
export function workingCalendar(): WorkingCalendar {
  shared ??= WorkingCalendar.load();
  return shared;
}
