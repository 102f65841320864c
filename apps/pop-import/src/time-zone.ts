/*
 * Local wall times of a CMS export read as instants. Neither Xibo nor Broadsign writes an offset: Xibo's export
 * formats FromDT/ToDT as "Y-m-d H:i:s" in the CMS's time zone (or UTC when "output in UTC" was ticked), so the
 * operator must say which zone the file is in (issue 20 item 2: "refuse ... exports without a time zone unless one is
 * given"). A time that carries its own offset ("Z", "+05:00") needs no zone. Offsets come from the tz database
 * through Intl (DESIGN.md section 8: "Never compute a local date by adding a fixed offset").
 */

/** "2026-11-19 10:00:15", "2026-11-19T10:00:15.250", optionally followed by "Z" or "+05:00". */
const LOCAL_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?\s*(Z|[+-]\d{2}:?\d{2})?$/i;

export interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  millisecond: number;
}

export interface ParsedTime {
  wall: WallTime;
  /** Minutes east of UTC written in the text, or null when the text has no offset. */
  offsetMinutes: number | null;
}

/** Parses the text of a time; null when it is not one (a bad month, 25 o'clock, February 30th). */
export function parseTimeText(text: string): ParsedTime | null {
  const match = LOCAL_TIME.exec(text.trim());
  if (!match) return null;
  const [, y, mo, d, h, mi, s, fraction, zone] = match;
  const wall: WallTime = {
    year: Number(y),
    month: Number(mo),
    day: Number(d),
    hour: Number(h),
    minute: Number(mi),
    second: Number(s),
    millisecond: fraction ? Number(fraction.padEnd(3, '0').slice(0, 3)) : 0,
  };
  const probe = new Date(utcOf(wall));
  if (
    wall.month < 1 ||
    wall.month > 12 ||
    wall.hour > 23 ||
    wall.minute > 59 ||
    wall.second > 59 ||
    probe.getUTCDate() !== wall.day ||
    probe.getUTCMonth() !== wall.month - 1
  ) {
    return null;
  }
  let offsetMinutes: number | null = null;
  if (zone) {
    if (zone.toUpperCase() === 'Z') offsetMinutes = 0;
    else {
      const digits = zone.replace(':', '');
      const sign = digits.startsWith('-') ? -1 : 1;
      const hours = Number(digits.slice(1, 3));
      const minutes = Number(digits.slice(3, 5));
      if (hours > 23 || minutes > 59) return null;
      offsetMinutes = sign * (hours * 60 + minutes);
    }
  }
  return { wall, offsetMinutes };
}

function utcOf(wall: WallTime): number {
  const date = new Date(0);
  date.setUTCFullYear(wall.year, wall.month - 1, wall.day);
  date.setUTCHours(wall.hour, wall.minute, wall.second, wall.millisecond);
  return date.getTime();
}

const formats = new Map<string, Intl.DateTimeFormat>();
function formatFor(timeZone: string): Intl.DateTimeFormat {
  let format = formats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    });
    formats.set(timeZone, format);
  }
  return format;
}

/** Whether Intl knows the zone (an IANA name such as Asia/Almaty, or UTC). */
export function isTimeZone(timeZone: string): boolean {
  try {
    formatFor(timeZone);
    return true;
  } catch {
    return false;
  }
}

/** Minutes east of UTC of `timeZone` at the instant `ms`. */
function offsetAt(timeZone: string, ms: number): number {
  // The wall clock shows whole seconds: compare it with the instant's whole second.
  const second = Math.floor(ms / 1000) * 1000;
  const parts: Partial<Record<Intl.DateTimeFormatPartTypes, string>> = {};
  for (const part of formatFor(timeZone).formatToParts(second)) parts[part.type] = part.value;
  const asUtc = Date.UTC(
    Number(parts.year),
    Number(parts.month) - 1,
    Number(parts.day),
    Number(parts.hour) % 24,
    Number(parts.minute),
    Number(parts.second),
  );
  return Math.round((asUtc - second) / 60_000);
}

export type InstantResult =
  | { ok: true; ms: number }
  /** no_time_zone: the text has no offset and no zone was given; time_not_in_zone: a local time skipped by a DST jump. */
  | { ok: false; reason: 'no_time_zone' | 'time_not_in_zone' };

/**
 * The instant of a parsed time: its own offset when it has one, else the wall time in `timeZone`. A wall time that
 * happens twice (a clock set back) is read as its first occurrence, so the same text always gives the same instant.
 */
export function instantOf(time: ParsedTime, timeZone: string | null): InstantResult {
  const asUtc = utcOf(time.wall);
  if (time.offsetMinutes !== null) return { ok: true, ms: asUtc - time.offsetMinutes * 60_000 };
  if (timeZone === null) return { ok: false, reason: 'no_time_zone' };
  // Every offset the zone has around this wall time; each candidate instant is kept if it reads back as the wall time.
  const offsets = new Set([
    offsetAt(timeZone, asUtc - 86_400_000),
    offsetAt(timeZone, asUtc),
    offsetAt(timeZone, asUtc + 86_400_000),
  ]);
  const candidates = [...offsets]
    .map((offset) => asUtc - offset * 60_000)
    .filter((ms) => offsetAt(timeZone, ms) * 60_000 === asUtc - ms)
    .sort((a, b) => a - b);
  if (candidates.length === 0) return { ok: false, reason: 'time_not_in_zone' };
  return { ok: true, ms: candidates[0]! };
}
