import {
  ALMATY_TZ,
  addCalendarYears,
  addDays,
  addMonths,
  almatyDate,
  almatyDayEnd,
  almatyDayStart,
  almatyHour,
  almatyMonth,
  almatyMonthEnd,
  almatyMonthStart,
  almatyOffsetMinutes,
  almatyWeekday,
  DAYPARTS,
  daypartOf,
  daysInCalendarMonth,
  formatAlmaty,
  isCalendarDate,
  isCalendarMonth,
  parseDateTime,
  parseDateTimeMs,
} from '@ooh/protocol';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';

const at = (iso: string) => new Date(iso);
// The offset change: 2024-03-01 00:00 at UTC+6 (2024-02-29T18:00Z) became 2024-02-29 23:00 at UTC+5, so the Almaty
// day 2024-02-29 has 25 hours and its 23:00-24:00 hour happens twice.
const CHANGE = at('2024-02-29T18:00:00Z');

test('the zone is Asia/Almaty', () => {
  expect(ALMATY_TZ).toBe('Asia/Almaty');
});

describe('around the 2024-03-01 offset change', () => {
  test('2024-02-29 23:30 +06:00 is still February 29th, at UTC+6', () => {
    const instant = parseDateTime('2024-02-29T23:30:00+06:00')!;
    expect(instant.toISOString()).toBe('2024-02-29T17:30:00.000Z');
    expect(almatyDate(instant)).toBe('2024-02-29');
    expect(almatyHour(instant)).toBe(23);
    expect(almatyOffsetMinutes(instant)).toBe(360);
    expect(formatAlmaty(instant)).toBe('2024-02-29T23:30:00+06:00');
  });

  test('the repeated hour: 23:30 again, now at UTC+5', () => {
    const instant = parseDateTime('2024-02-29T23:30:00+05:00')!;
    expect(instant.toISOString()).toBe('2024-02-29T18:30:00.000Z');
    expect(almatyDate(instant)).toBe('2024-02-29');
    expect(almatyHour(instant)).toBe(23);
    expect(almatyOffsetMinutes(instant)).toBe(300);
    expect(formatAlmaty(instant)).toBe('2024-02-29T23:30:00+05:00');
  });

  test('formatAlmaty on either side of the change', () => {
    expect(formatAlmaty(new Date(CHANGE.getTime() - 1), { milliseconds: true })).toBe(
      '2024-02-29T23:59:59.999+06:00',
    );
    expect(formatAlmaty(CHANGE, { milliseconds: true })).toBe('2024-02-29T23:00:00.000+05:00');
    expect(formatAlmaty(CHANGE)).toBe('2024-02-29T23:00:00+05:00');
    expect(almatyOffsetMinutes(new Date(CHANGE.getTime() - 1))).toBe(360);
    expect(almatyOffsetMinutes(CHANGE)).toBe(300);
  });

  test('almatyDayStart and almatyDayEnd', () => {
    expect(almatyDayStart('2024-02-29').toISOString()).toBe('2024-02-28T18:00:00.000Z');
    expect(almatyDayEnd('2024-02-29').toISOString()).toBe('2024-02-29T19:00:00.000Z');
    expect(almatyDayStart('2024-03-01').toISOString()).toBe('2024-02-29T19:00:00.000Z');
    expect(formatAlmaty(almatyDayStart('2024-03-01'))).toBe('2024-03-01T00:00:00+05:00');
    expect(almatyDayEnd('2024-03-01').toISOString()).toBe('2024-03-01T19:00:00.000Z');
    // 25 hours
    expect(almatyDayEnd('2024-02-29').getTime() - almatyDayStart('2024-02-29').getTime()).toBe(
      25 * 3_600_000,
    );
    expect(almatyDate(new Date(almatyDayStart('2024-03-01').getTime() - 1))).toBe('2024-02-29');
  });

  test('months around the change', () => {
    expect(almatyMonthStart('2024-02').toISOString()).toBe('2024-01-31T18:00:00.000Z');
    expect(almatyMonthEnd('2024-02').toISOString()).toBe('2024-02-29T19:00:00.000Z');
    expect(almatyMonthStart('2024-03').toISOString()).toBe('2024-02-29T19:00:00.000Z');
    expect(almatyMonth(at('2024-02-29T18:59:59.999Z'))).toBe('2024-02');
    expect(almatyMonth(at('2024-02-29T19:00:00Z'))).toBe('2024-03');
  });

  test('dayparts follow local time on both sides', () => {
    expect(daypartOf(at('2024-02-29T00:00:00Z'))).toBe('morning'); // 06:00 +06
    expect(daypartOf(at('2024-02-28T23:59:59Z'))).toBe('night'); // 05:59:59 +06
    expect(daypartOf(at('2024-03-01T00:59:59Z'))).toBe('night'); // 05:59:59 +05
    expect(daypartOf(at('2024-03-01T01:00:00Z'))).toBe('morning'); // 06:00 +05
  });
});

describe('today (UTC+5)', () => {
  test('formatAlmaty gives RFC 3339 with +05:00', () => {
    expect(formatAlmaty(at('2026-11-21T04:00:00Z'))).toBe('2026-11-21T09:00:00+05:00');
    expect(formatAlmaty(at('2026-11-21T04:00:00.007Z'), { milliseconds: true })).toBe(
      '2026-11-21T09:00:00.007+05:00',
    );
    expect(almatyOffsetMinutes(at('2026-11-21T04:00:00Z'))).toBe(300);
  });

  test('the Almaty date turns at 19:00 UTC', () => {
    expect(almatyDate(at('2026-11-21T18:59:59.999Z'))).toBe('2026-11-21');
    expect(almatyDate(at('2026-11-21T19:00:00Z'))).toBe('2026-11-22');
    expect(almatyHour(at('2026-11-21T19:00:00Z'))).toBe(0);
    expect(almatyHour(at('2026-11-21T18:59:59Z'))).toBe(23);
  });

  test('month ends', () => {
    expect(almatyDayEnd('2026-01-31').toISOString()).toBe('2026-01-31T19:00:00.000Z');
    expect(almatyDate(almatyDayEnd('2026-01-31'))).toBe('2026-02-01');
    expect(almatyMonthEnd('2026-12').toISOString()).toBe('2026-12-31T19:00:00.000Z');
    expect(almatyMonth(at('2026-12-31T18:59:59Z'))).toBe('2026-12');
    expect(almatyMonth(at('2026-12-31T19:00:00Z'))).toBe('2027-01');
    expect(almatyMonthStart('2027-01').getTime()).toBe(almatyMonthEnd('2026-12').getTime());
  });
});

describe('calendar arithmetic', () => {
  test.each([
    ['2026-01-31', 1, '2026-02-01'],
    ['2024-02-28', 1, '2024-02-29'],
    ['2024-02-29', 1, '2024-03-01'],
    ['2025-02-28', 1, '2025-03-01'],
    ['2026-12-31', 1, '2027-01-01'],
    ['2027-01-01', -1, '2026-12-31'],
    ['2024-03-01', -1, '2024-02-29'],
    ['2026-11-21', 0, '2026-11-21'],
    ['2024-01-01', 366, '2025-01-01'],
    ['2026-11-21', -90, '2026-08-23'],
  ])('addDays(%s, %i) = %s', (day, days, expected) => {
    expect(addDays(day, days)).toBe(expected);
  });

  test.each([
    ['2026-12', 1, '2027-01'],
    ['2026-01', -1, '2025-12'],
    ['2026-01', -13, '2024-12'],
    ['2024-02', 12, '2025-02'],
    ['2026-11', 0, '2026-11'],
  ])('addMonths(%s, %i) = %s', (month, months, expected) => {
    expect(addMonths(month, months)).toBe(expected);
  });

  test('days in a month', () => {
    expect(daysInCalendarMonth('2024-02')).toBe(29);
    expect(daysInCalendarMonth('2026-02')).toBe(28);
    expect(daysInCalendarMonth('2100-02')).toBe(28);
    expect(daysInCalendarMonth('2000-02')).toBe(29);
    expect(daysInCalendarMonth('2026-04')).toBe(30);
    expect(daysInCalendarMonth('2026-12')).toBe(31);
  });

  test('weekday: 1 = Monday .. 7 = Sunday', () => {
    expect(almatyWeekday('2026-11-16')).toBe(1);
    expect(almatyWeekday('2024-03-01')).toBe(5);
    expect(almatyWeekday('2026-11-21')).toBe(6);
    expect(almatyWeekday('2026-11-22')).toBe(7);
  });

  test('misuse throws', () => {
    expect(() => addDays('2026-02-30', 1)).toThrow(RangeError);
    expect(() => addDays('2026-02-01', 0.5)).toThrow(RangeError);
    expect(() => addMonths('2026-13', 1)).toThrow(RangeError);
    expect(() => almatyDayStart('2026-2-01')).toThrow(RangeError);
    expect(() => almatyMonthStart('2026-00')).toThrow(RangeError);
    expect(() => almatyDate(new Date(Number.NaN))).toThrow(RangeError);
    expect(() => formatAlmaty(new Date('nope'))).toThrow(RangeError);
    expect(() => almatyDate(Number.NaN)).toThrow(RangeError);
    expect(() => almatyOffsetMinutes(Number.NaN)).toThrow(RangeError);
  });
});

describe('an instant in epoch milliseconds (Date.now(), as the console counts) is read as its Date', () => {
  test('on both sides of the offset change and of midnight', () => {
    expect(almatyDate(Date.parse('2026-11-20T19:30:00Z'))).toBe('2026-11-21');
    expect(almatyDate(Date.parse('2026-11-20T18:59:59.999Z'))).toBe('2026-11-20');
    expect(almatyOffsetMinutes(Date.parse('2024-02-28T12:00:00Z'))).toBe(360);
    expect(almatyOffsetMinutes(Date.parse('2026-11-20T12:00:00Z'))).toBe(300);
    expect(formatAlmaty(CHANGE.getTime())).toBe('2024-02-29T23:00:00+05:00');
    expect(daypartOf(Date.parse('2026-11-21T04:00:00Z'))).toBe('morning');
  });

  test('every function gives what it gives for the Date', () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(1990, 0, 1), max: Date.UTC(2060, 0, 1) }), (ms) => {
        const date = new Date(ms);
        expect(almatyDate(ms)).toBe(almatyDate(date));
        expect(almatyMonth(ms)).toBe(almatyMonth(date));
        expect(almatyHour(ms)).toBe(almatyHour(date));
        expect(almatyOffsetMinutes(ms)).toBe(almatyOffsetMinutes(date));
        expect(formatAlmaty(ms, { milliseconds: true })).toBe(formatAlmaty(date, { milliseconds: true }));
      }),
      { numRuns: 300 },
    );
  });
});

describe('isCalendarDate', () => {
  test.each([
    '2026-01-01',
    '2024-02-29',
    '2000-02-29',
    '2026-12-31',
    '2026-04-30',
    '0001-01-01',
  ])('%s is a date', (text) => {
    expect(isCalendarDate(text)).toBe(true);
  });

  test.each([
    '2026-02-30',
    '2026-2-01',
    '2026-13-01',
    '2026-00-10',
    '2026-01-00',
    '2026-01-32',
    '2026-04-31',
    '2025-02-29',
    '1900-02-29',
    '0000-01-01',
    '26-01-01',
    ' 2026-01-01',
    '2026-01-01\n',
    '2026-01-01T00:00:00Z',
    '2026/01/01',
    '',
  ])('%j is not a date', (text) => {
    expect(isCalendarDate(text)).toBe(false);
  });

  test('isCalendarMonth', () => {
    expect(isCalendarMonth('2026-12')).toBe(true);
    expect(isCalendarMonth('2026-13')).toBe(false);
    expect(isCalendarMonth('2026-1')).toBe(false);
    expect(isCalendarMonth('2026-12-01')).toBe(false);
  });
});

describe('addCalendarYears', () => {
  test('a year across a leap day is 366 days (issue 21 item 7: renewed 2027-09-25, valid to 2028-09-25)', () => {
    expect(addCalendarYears(at('2027-09-25T10:11:12.345Z'), 1).toISOString()).toBe(
      '2028-09-25T10:11:12.345Z',
    );
    expect(addCalendarYears(at('2026-11-24T00:00:00Z'), 1).toISOString()).toBe('2027-11-24T00:00:00.000Z');
  });
  test('February 29 plus a year is February 28, never March 1', () => {
    expect(addCalendarYears(at('2028-02-29T23:59:59Z'), 1).toISOString()).toBe('2029-02-28T23:59:59.000Z');
    expect(addCalendarYears(at('2028-02-29T12:00:00Z'), 4).toISOString()).toBe('2032-02-29T12:00:00.000Z');
  });
  test('the result is the same UTC time of day, the same month, and never more than a calendar year later', () => {
    fc.assert(
      fc.property(
        fc.date({ min: at('2000-01-01T00:00:00Z'), max: at('2199-12-31T00:00:00Z'), noInvalidDate: true }),
        (d) => {
          const next = addCalendarYears(d, 1);
          expect(next.getUTCFullYear()).toBe(d.getUTCFullYear() + 1);
          expect(next.getUTCMonth()).toBe(d.getUTCMonth());
          expect(next.toISOString().slice(10)).toBe(d.toISOString().slice(10));
          const days = (next.getTime() - d.getTime()) / 86_400_000;
          expect(days).toBeGreaterThanOrEqual(365);
          expect(days).toBeLessThanOrEqual(366);
        },
      ),
    );
  });
});

describe('dayparts', () => {
  test('the open-data dayparts cover 0..24 without gap or overlap', () => {
    let hour = 0;
    for (const daypart of DAYPARTS) {
      expect(daypart.start_hour).toBe(hour);
      expect(daypart.end_hour).toBeGreaterThan(daypart.start_hour);
      hour = daypart.end_hour;
    }
    expect(hour).toBe(24);
  });

  test.each([
    ['2026-11-20T19:00:00Z', 'night'], // 00:00
    ['2026-11-21T00:59:59Z', 'night'], // 05:59:59
    ['2026-11-21T01:00:00Z', 'morning'], // 06:00
    ['2026-11-21T04:59:59Z', 'morning'], // 09:59:59
    ['2026-11-21T05:00:00Z', 'day'], // 10:00
    ['2026-11-21T11:59:59Z', 'day'], // 16:59:59
    ['2026-11-21T12:00:00Z', 'evening'], // 17:00
    ['2026-11-21T15:59:59Z', 'evening'], // 20:59:59
    ['2026-11-21T16:00:00Z', 'late'], // 21:00
    ['2026-11-21T18:59:59Z', 'late'], // 23:59:59
  ])('%s is %s', (iso, code) => {
    expect(daypartOf(at(iso))).toBe(code);
  });

  test('custom dayparts; an uncovered hour throws', () => {
    const halves = [
      { code: 'am', start_hour: 0, end_hour: 12 },
      { code: 'pm', start_hour: 12, end_hour: 24 },
    ];
    expect(daypartOf(at('2026-11-21T06:59:59Z'), halves)).toBe('am');
    expect(daypartOf(at('2026-11-21T07:00:00Z'), halves)).toBe('pm');
    expect(() => daypartOf(at('2026-11-21T07:00:00Z'), halves.slice(0, 1))).toThrow(RangeError);
  });
});

describe('history from the tz database', () => {
  test('a day whose midnight did not exist (1981-04-01, clocks 00:00 +06 -> 01:00 +07) starts at 01:00', () => {
    expect(almatyDayStart('1981-04-01').toISOString()).toBe('1981-03-31T18:00:00.000Z');
    expect(formatAlmaty(almatyDayStart('1981-04-01'))).toBe('1981-04-01T01:00:00+07:00');
    expect(almatyDayEnd('1981-03-31').getTime()).toBe(almatyDayStart('1981-04-01').getTime());
    expect(almatyDate(new Date(almatyDayStart('1981-04-01').getTime() - 1))).toBe('1981-03-31');
  });
});

describe('properties', () => {
  const instants = fc.date({
    min: at('2005-06-01T00:00:00Z'),
    max: at('2040-01-01T00:00:00Z'),
    noInvalidDate: true,
  });

  test('an instant lies inside its Almaty day, and its month', () => {
    fc.assert(
      fc.property(instants, (instant) => {
        const day = almatyDate(instant);
        expect(almatyDayStart(day).getTime()).toBeLessThanOrEqual(instant.getTime());
        expect(instant.getTime()).toBeLessThan(almatyDayEnd(day).getTime());
        const month = almatyMonth(instant);
        expect(day.startsWith(month)).toBe(true);
        expect(almatyMonthStart(month).getTime()).toBeLessThanOrEqual(instant.getTime());
        expect(instant.getTime()).toBeLessThan(almatyMonthEnd(month).getTime());
      }),
    );
  });

  test('formatAlmaty reads back to the same instant; the offset is +06 before the change, +05 after', () => {
    fc.assert(
      fc.property(instants, (instant) => {
        const text = formatAlmaty(instant, { milliseconds: true });
        expect(parseDateTime(text)?.getTime()).toBe(instant.getTime());
        expect(text.slice(0, 10)).toBe(almatyDate(instant));
        expect(Number(text.slice(11, 13))).toBe(almatyHour(instant));
        const offset = instant.getTime() < CHANGE.getTime() ? 360 : 300;
        expect(almatyOffsetMinutes(instant)).toBe(offset);
        expect(text.endsWith(offset === 360 ? '+06:00' : '+05:00')).toBe(true);
      }),
    );
  });

  test('addDays agrees with stepping one day at a time', () => {
    fc.assert(
      fc.property(instants, fc.integer({ min: -400, max: 400 }), (instant, days) => {
        const day = almatyDate(instant);
        let stepped = day;
        for (let i = 0; i < Math.abs(days); i++) stepped = addDays(stepped, Math.sign(days));
        expect(addDays(day, days)).toBe(stepped);
        expect(isCalendarDate(stepped)).toBe(true);
      }),
      { numRuns: 50 },
    );
  });
});

describe('parseDateTimeMs, the canonical form read by arithmetic', () => {
  // Every instant from year 100 to 9999, the range the canonical fast path reads itself (Date#toISOString's form).
  const canonical = fc.date({
    min: new Date('0100-01-01T00:00:00.000Z'),
    max: new Date('9999-12-31T23:59:59.999Z'),
    noInvalidDate: true,
  });

  test('agrees with Date on every canonical instant', () => {
    fc.assert(
      fc.property(canonical, (instant) => {
        const text = instant.toISOString();
        expect(parseDateTimeMs(text)).toBe(instant.getTime());
        expect(parseDateTime(text)?.getTime()).toBe(instant.getTime());
      }),
      { numRuns: 2000 },
    );
  });

  test('leap days, month ends and the first and last instants of a year', () => {
    for (const text of [
      '2024-02-29T23:59:59.999Z',
      '2000-02-29T00:00:00.000Z',
      '1970-01-01T00:00:00.000Z',
      '1969-12-31T23:59:59.999Z',
      '2026-12-31T23:59:59.999Z',
      '2027-01-01T00:00:00.000Z',
      '0100-03-01T00:00:00.000Z',
    ]) {
      expect(parseDateTimeMs(text)).toBe(Date.parse(text));
    }
  });

  test('refuses what is not a date-time, as parseDateTime does', () => {
    for (const text of [
      '2023-02-29T00:00:00.000Z', // no such day
      '1900-02-29T00:00:00.000Z',
      '2026-13-01T00:00:00.000Z',
      '2026-01-01T24:00:00.000Z',
      '2026-01-01T00:60:00.000Z',
      '2026-01-01T00:00:60.000Z', // no leap second
      '2026-01-01T00:00:00.00aZ',
      '2026-01-01 00:00:00.000Z',
      '2026-01-01T00:00:00.000',
      '',
    ]) {
      expect(parseDateTimeMs(text), text).toBeNaN();
      expect(parseDateTime(text), text).toBeNull();
    }
    expect(parseDateTimeMs(42 as unknown as string)).toBeNaN();
  });

  test('other RFC 3339 forms go through the general parser', () => {
    expect(parseDateTimeMs('2026-11-25T12:00:00+05:00')).toBe(Date.parse('2026-11-25T07:00:00Z'));
    expect(parseDateTimeMs('2026-11-25t12:00:00.123456z')).toBe(Date.parse('2026-11-25T12:00:00.123Z'));
    // Years 0..99: Date.UTC would read them as 1900..1999.
    expect(parseDateTimeMs('0050-01-01T00:00:00.000Z')).toBe(new Date('0050-01-01T00:00:00.000Z').getTime());
  });
});
