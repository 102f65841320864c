import { daysInMonth, isCalendarDate } from './time-formats.js';

/*
 * The Almaty calendar (DESIGN.md §8): "All calendar logic is Asia/Almaty through the platform's tz database
 * (UTC+5 since 2024-03-01, UTC+6 before) ... Never compute a local date by adding a fixed offset."
 * Local wall time comes from Intl.DateTimeFormat with timeZone 'Asia/Almaty'; the offset of an instant is the
 * difference between its wall time read as UTC and the instant itself.
 */

export { isCalendarDate };

export const ALMATY_TZ = 'Asia/Almaty';

// Creating a DateTimeFormat is slow; one instance serves every call.
let wallClockFormat: Intl.DateTimeFormat | undefined;
function wallClock(): Intl.DateTimeFormat {
  wallClockFormat ??= new Intl.DateTimeFormat('en-US', {
    timeZone: ALMATY_TZ,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
    era: 'short',
  });
  return wallClockFormat;
}

interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

/** An instant: a Date, or milliseconds since the epoch as Date.now() gives them (the browser's console counts so). */
export type Instant = Date | number;

function instantMs(instant: Instant): number {
  const ms = typeof instant === 'number' ? instant : instant.getTime();
  if (Number.isNaN(ms)) throw new RangeError('invalid instant');
  return ms;
}

function wallTime(ms: number): WallTime {
  const parts: Partial<Record<Intl.DateTimeFormatPartTypes, string>> = {};
  for (const part of wallClock().formatToParts(ms)) parts[part.type] = part.value;
  const yearOfEra = Number(parts.year);
  // 'BC' years count backwards from 1; proleptic year 0 is 1 BC.
  const year = parts.era === 'BC' ? 1 - yearOfEra : yearOfEra;
  return {
    year,
    month: Number(parts.month),
    day: Number(parts.day),
    // Some ICU versions write midnight as 24 even with h23.
    hour: Number(parts.hour) % 24,
    minute: Number(parts.minute),
    second: Number(parts.second),
  };
}

function utcMs(year: number, month: number, day: number, hour = 0, minute = 0, second = 0): number {
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  return date.getTime();
}

function pad(value: number, width = 2): string {
  const text = String(Math.abs(value)).padStart(width, '0');
  return value < 0 ? '-' + text : text;
}

function formatDay(year: number, month: number, day: number): string {
  return `${pad(year, 4)}-${pad(month)}-${pad(day)}`;
}

function offsetMinutesAt(ms: number): number {
  const wall = wallTime(ms);
  const wholeSecondMs = Math.floor(ms / 1000) * 1000;
  const wallAsUtc = utcMs(wall.year, wall.month, wall.day, wall.hour, wall.minute, wall.second);
  return Math.round((wallAsUtc - wholeSecondMs) / 60_000);
}

function parseDay(day: string): { year: number; month: number; day: number } {
  if (!isCalendarDate(day)) throw new RangeError(`not a calendar date YYYY-MM-DD: ${JSON.stringify(day)}`);
  return { year: Number(day.slice(0, 4)), month: Number(day.slice(5, 7)), day: Number(day.slice(8, 10)) };
}

const CALENDAR_MONTH = /^(\d{4})-(\d{2})$/;

/** Strict YYYY-MM with a month 01..12. */
export function isCalendarMonth(text: string): boolean {
  if (typeof text !== 'string') return false;
  const match = CALENDAR_MONTH.exec(text);
  if (match === null) return false;
  const month = Number(match[2]);
  return month >= 1 && month <= 12;
}

function parseMonth(month: string): { year: number; month: number } {
  if (!isCalendarMonth(month)) throw new RangeError(`not a calendar month YYYY-MM: ${JSON.stringify(month)}`);
  return { year: Number(month.slice(0, 4)), month: Number(month.slice(5, 7)) };
}

/** The Almaty calendar day of an instant, 'YYYY-MM-DD'. */
export function almatyDate(instant: Instant): string {
  const wall = wallTime(instantMs(instant));
  return formatDay(wall.year, wall.month, wall.day);
}

/** The Almaty month of an instant, 'YYYY-MM'. */
export function almatyMonth(instant: Instant): string {
  const wall = wallTime(instantMs(instant));
  return `${pad(wall.year, 4)}-${pad(wall.month)}`;
}

/** Local hour 0..23 in Almaty. */
export function almatyHour(instant: Instant): number {
  return wallTime(instantMs(instant)).hour;
}

/** Offset of Almaty local time from UTC at that instant, in minutes (360 before 2024-03-01, 300 since). */
export function almatyOffsetMinutes(instant: Instant): number {
  return offsetMinutesAt(instantMs(instant));
}

/**
 * First instant of an Almaty day. Local midnight is tried under the offsets in force a day before and a day after
 * (a day holds at most one change); when midnight does not exist (clocks jumped over it) the day begins at the
 * first instant whose local date is that day.
 */
export function almatyDayStart(day: string): Date {
  const { year, month, day: dayOfMonth } = parseDay(day);
  const midnightAsUtc = utcMs(year, month, dayOfMonth);
  const offsets = new Set([
    offsetMinutesAt(midnightAsUtc - 86_400_000),
    offsetMinutesAt(midnightAsUtc),
    offsetMinutesAt(midnightAsUtc + 86_400_000),
  ]);
  const starts = [...offsets]
    .map((offset) => midnightAsUtc - offset * 60_000)
    .filter((candidate) => {
      const wall = wallTime(candidate);
      return (
        wall.year === year &&
        wall.month === month &&
        wall.day === dayOfMonth &&
        wall.hour === 0 &&
        wall.minute === 0 &&
        wall.second === 0
      );
    });
  if (starts.length > 0) return new Date(Math.min(...starts));
  return new Date(firstInstantOnOrAfter(day, midnightAsUtc));
}

// Binary search, to the second, for the first instant whose Almaty date is `day` or later, in a window of
// ±26 hours around the day's midnight read as UTC (wider than any UTC offset).
function firstInstantOnOrAfter(day: string, midnightAsUtc: number): number {
  let low = midnightAsUtc - 26 * 3_600_000; // date before `day`
  let high = midnightAsUtc + 26 * 3_600_000; // date after or on `day`
  while (high - low > 1000) {
    const middle = Math.floor((low + high) / 2000) * 1000;
    const wall = wallTime(middle);
    if (formatDay(wall.year, wall.month, wall.day) >= day) high = middle;
    else low = middle;
  }
  return high;
}

/** First instant of the NEXT Almaty day: the exclusive end of `day`. */
export function almatyDayEnd(day: string): Date {
  return almatyDayStart(addDays(day, 1));
}

/** First instant of an Almaty month 'YYYY-MM'. */
export function almatyMonthStart(month: string): Date {
  const { year, month: monthOfYear } = parseMonth(month);
  return almatyDayStart(formatDay(year, monthOfYear, 1));
}

/** First instant of the next Almaty month: the exclusive end of `month`. */
export function almatyMonthEnd(month: string): Date {
  return almatyMonthStart(addMonths(month, 1));
}

/** Calendar arithmetic on 'YYYY-MM-DD' (no time zone involved). */
export function addDays(day: string, days: number): string {
  if (!Number.isInteger(days)) throw new RangeError('days must be an integer');
  const { year, month, day: dayOfMonth } = parseDay(day);
  const date = new Date(utcMs(year, month, dayOfMonth) + days * 86_400_000);
  return formatDay(date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate());
}

/** Calendar arithmetic on 'YYYY-MM'. */
export function addMonths(month: string, months: number): string {
  if (!Number.isInteger(months)) throw new RangeError('months must be an integer');
  const { year, month: monthOfYear } = parseMonth(month);
  const index = year * 12 + (monthOfYear - 1) + months;
  const newYear = Math.floor(index / 12);
  return `${pad(newYear, 4)}-${pad(index - newYear * 12 + 1)}`;
}

/** Number of days in a month 'YYYY-MM'. */
export function daysInCalendarMonth(month: string): number {
  const { year, month: monthOfYear } = parseMonth(month);
  return daysInMonth(year, monthOfYear);
}

/** Day of the week of a calendar day: 1 = Monday .. 7 = Sunday (a fact of the calendar, no time zone needed). */
export function almatyWeekday(day: string): number {
  const { year, month, day: dayOfMonth } = parseDay(day);
  const weekday = new Date(utcMs(year, month, dayOfMonth)).getUTCDay();
  return weekday === 0 ? 7 : weekday;
}

/** RFC 3339 in Almaty local time, e.g. '2026-11-21T09:00:00+05:00' (with `.mmm` when milliseconds is set). */
export function formatAlmaty(instant: Instant, options: { milliseconds?: boolean } = {}): string {
  const ms = instantMs(instant);
  const wall = wallTime(ms);
  const offset = offsetMinutesAt(ms);
  const sign = offset < 0 ? '-' : '+';
  const absolute = Math.abs(offset);
  const fraction = options.milliseconds === true ? '.' + pad(((ms % 1000) + 1000) % 1000, 3) : '';
  return (
    `${formatDay(wall.year, wall.month, wall.day)}T${pad(wall.hour)}:${pad(wall.minute)}:${pad(wall.second)}` +
    `${fraction}${sign}${pad(Math.floor(absolute / 60))}:${pad(absolute % 60)}`
  );
}

/** A part of the day in Almaty local hours: start_hour inclusive, end_hour exclusive (spec open data "codes"). */
export interface Daypart {
  code: string;
  start_hour: number;
  end_hour: number;
}

/** The open-data dayparts; together they cover 0..24 without overlap. */
export const DAYPARTS: readonly Daypart[] = Object.freeze([
  Object.freeze({ code: 'night', start_hour: 0, end_hour: 6 }),
  Object.freeze({ code: 'morning', start_hour: 6, end_hour: 10 }),
  Object.freeze({ code: 'day', start_hour: 10, end_hour: 17 }),
  Object.freeze({ code: 'evening', start_hour: 17, end_hour: 21 }),
  Object.freeze({ code: 'late', start_hour: 21, end_hour: 24 }),
]);

/** Code of the daypart holding the instant's Almaty hour; RangeError if the dayparts leave that hour uncovered. */
export function daypartOf(instant: Instant, dayparts: readonly Daypart[] = DAYPARTS): string {
  const hour = almatyHour(instant);
  const daypart = dayparts.find((candidate) => candidate.start_hour <= hour && hour < candidate.end_hour);
  if (daypart === undefined) throw new RangeError(`no daypart covers hour ${hour}`);
  return daypart.code;
}
