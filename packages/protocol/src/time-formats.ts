/**
 * Text forms of dates and instants (spec "Endpoints": "Date fields are YYYY-MM-DD; date-time fields are RFC 3339").
 * These checks back the "date", "date-time", "uuid" and "uri" formats of the schemas (see schemas/common.ts) and
 * are stricter than ajv-formats where ajv-formats accepts text a JavaScript Date cannot represent faithfully:
 * a date-time needs "T" and an offset "Z" or "±HH:MM" (RFC 3339 §5.6 time-numoffset has the colon), and a leap
 * second (":60") is refused.
 */

const CALENDAR_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const URI = /^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$/;

function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

export function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

function dateExists(year: number, month: number, day: number): boolean {
  return month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth(year, month);
}

/**
 * Strict YYYY-MM-DD naming a day that exists ('2026-02-30', '2026-2-01' and '2026-13-01' are refused); year 0000
 * is refused too (no such year in the Gregorian calendar, and PostgreSQL cannot store it).
 */
export function isCalendarDate(text: string): boolean {
  if (typeof text !== 'string') return false;
  const match = CALENDAR_DATE.exec(text);
  if (match === null) return false;
  const year = Number(match[1]);
  return year >= 1 && dateExists(year, Number(match[2]), Number(match[3]));
}

/** Value of the two decimal digits at `at`, or -1. */
function twoDigits(text: string, at: number): number {
  const a = text.charCodeAt(at) - 48;
  const b = text.charCodeAt(at + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
}

/**
 * The instant of the canonical form 'YYYY-MM-DDTHH:MM:SS.sssZ' (Date#toISOString, what players and CMSs send: the
 * proof-of-play channels read two of them per record, up to 10 000 records a batch), in epoch milliseconds; NaN
 * when the text is not in that form or names no instant (then the general parser decides).
 */
function canonicalUtcMs(text: string): number {
  if (
    text.length !== 24 ||
    text.charCodeAt(4) !== 45 || // -
    text.charCodeAt(7) !== 45 ||
    text.charCodeAt(10) !== 84 || // T
    text.charCodeAt(13) !== 58 || // :
    text.charCodeAt(16) !== 58 ||
    text.charCodeAt(19) !== 46 || // .
    text.charCodeAt(23) !== 90 // Z
  ) {
    return Number.NaN;
  }
  const century = twoDigits(text, 0);
  const yy = twoDigits(text, 2);
  const month = twoDigits(text, 5);
  const day = twoDigits(text, 8);
  const hour = twoDigits(text, 11);
  const minute = twoDigits(text, 14);
  const second = twoDigits(text, 17);
  const ms10 = twoDigits(text, 20);
  const ms1 = text.charCodeAt(22) - 48;
  if ((century | yy | month | day | hour | minute | second | ms10) < 0 || ms1 < 0 || ms1 > 9)
    return Number.NaN;
  const year = century * 100 + yy;
  // Years 0..99 are left to the general parser (Date.UTC would read them as 1900..1999).
  if (year < 100 || !dateExists(year, month, day) || hour > 23 || minute > 59 || second > 59)
    return Number.NaN;
  return (
    daysFromCivil(year, month, day) * 86_400_000 +
    hour * 3_600_000 +
    minute * 60_000 +
    second * 1_000 +
    ms10 * 10 +
    ms1
  );
}

/**
 * Days from 1970-01-01 to a proleptic Gregorian date (year >= 0), by integer arithmetic: what Date.UTC computes,
 * without its call and its checks, for the two instants of each of up to 10 000 records a batch (H. Hinnant,
 * "chrono-Compatible Low-Level Date Algorithms", days_from_civil).
 */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/** Instant named by an RFC 3339 date-time, or null when the text is not one. Digits beyond milliseconds are cut. */
export function parseDateTime(text: string): Date | null {
  const ms = parseDateTimeMs(text);
  return Number.isNaN(ms) ? null : new Date(ms);
}

/**
 * parseDateTime in epoch milliseconds, NaN when the text is not an RFC 3339 date-time: no Date is made for the
 * canonical form, which is what the proof-of-play channels read twice per record.
 */
export function parseDateTimeMs(text: string): number {
  if (typeof text !== 'string') return Number.NaN;
  const canonical = canonicalUtcMs(text);
  if (!Number.isNaN(canonical)) return canonical;
  return generalDateTimeMs(text);
}

function generalDateTimeMs(text: string): number {
  const match = DATE_TIME.exec(text);
  if (match === null) return Number.NaN;
  const [, y, mo, d, h, mi, s, fraction, zulu, sign, offsetHours, offsetMinutes] = match;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (!dateExists(year, month, day) || hour > 23 || minute > 59 || second > 59) return Number.NaN;
  let offset = 0;
  if (zulu === undefined) {
    const oh = Number(offsetHours);
    const om = Number(offsetMinutes);
    if (oh > 23 || om > 59) return Number.NaN;
    offset = (sign === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const milliseconds = fraction === undefined ? 0 : Number(fraction.slice(0, 3).padEnd(3, '0'));
  const instant = new Date(0);
  // setUTCFullYear keeps years 0..99 as they are (Date.UTC would read them as 1900..1999).
  instant.setUTCFullYear(year, month - 1, day);
  instant.setUTCHours(hour, minute - offset, second, milliseconds);
  return instant.getTime();
}

export function isDateTime(text: string): boolean {
  return !Number.isNaN(parseDateTimeMs(text));
}

export function isUuid(text: string): boolean {
  return typeof text === 'string' && UUID.test(text);
}

export function isUri(text: string): boolean {
  return typeof text === 'string' && URI.test(text);
}

/**
 * The same instant `years` calendar years later, in UTC (X.509 validity is UTC): 2027-09-25T10:00Z plus one year is
 * 2028-09-25T10:00Z, a leap day included, where 365 days would end a day short. February 29 in a year that has none
 * is February 28, so the result never passes the calendar year it names.
 */
export function addCalendarYears(instant: Date, years: number): Date {
  const year = instant.getUTCFullYear() + years;
  const month = instant.getUTCMonth();
  const day = Math.min(instant.getUTCDate(), daysInMonth(year, month + 1));
  const result = new Date(instant.getTime());
  result.setUTCFullYear(year, month, day);
  return result;
}
