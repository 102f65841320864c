/**
 * Dates, instants and numbers as each language writes them (no Preact here: the Node tests read it too). Every
 * instant is shown in Almaty time (DESIGN.md section 8).
 */
export const TIME_ZONE = 'Asia/Almaty';

/** How dates, instants and numbers are written in one language. */
export interface Formats {
  /** An instant, in Almaty time. */
  dateTime(instant: Date): string;
  /** A calendar date, given as the UTC midnight of that date. */
  date(utcMidnight: Date): string;
  number(value: number): string;
}

export function intlFormats(locale: string): Formats {
  const dateTimeFormat = new Intl.DateTimeFormat(locale, {
    timeZone: TIME_ZONE,
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
  });
  // A calendar date is not an instant: formatted as the UTC midnight of that date, so no zone can shift it.
  const dateFormat = new Intl.DateTimeFormat(locale, {
    timeZone: 'UTC',
    year: 'numeric',
    month: 'short',
    day: 'numeric',
  });
  const numberFormat = new Intl.NumberFormat(locale);
  return {
    dateTime: (instant) => dateTimeFormat.format(instant),
    date: (utcMidnight) => dateFormat.format(utcMidnight),
    number: (value) => numberFormat.format(value),
  };
}

/** CLDR's abbreviated Kazakh month names (format context); the charts' labels use them too. */
export const KK_MONTHS: readonly string[] = [
  'қаң.',
  'ақп.',
  'нау.',
  'сәу.',
  'мам.',
  'мау.',
  'шіл.',
  'там.',
  'қыр.',
  'қаз.',
  'қар.',
  'жел.',
];

/**
 * Kazakh written by hand, as CLDR writes it ("2026 ж. 24 қар.", "2026 ж. 24 қар., 14:05", "1 540,5"), for browsers
 * whose Intl has no Kazakh data: Chromium built without it prints "2026 M11 24" and "1,540", which read wrong.
 */
export function kazakhFormats(): Formats {
  const almaty = new Intl.DateTimeFormat('en-GB', {
    timeZone: TIME_ZONE,
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  });
  const digits = new Intl.NumberFormat('en-US', { maximumFractionDigits: 3 });
  const ymd = (year: number, month: number, day: number) => `${year} ж. ${day} ${KK_MONTHS[month - 1]}`;
  return {
    dateTime: (instant) => {
      const part = (type: string) => almaty.formatToParts(instant).find((p) => p.type === type)?.value ?? '';
      return `${ymd(Number(part('year')), Number(part('month')), Number(part('day')))}, ${part('hour')}:${part('minute')}`;
    },
    date: (utcMidnight) =>
      ymd(utcMidnight.getUTCFullYear(), utcMidnight.getUTCMonth() + 1, utcMidnight.getUTCDate()),
    number: (value) =>
      digits
        .formatToParts(value)
        .map((p) => (p.type === 'group' ? '\u00a0' : p.type === 'decimal' ? ',' : p.value))
        .join(''),
  };
}

/** Whether this browser's Intl writes Kazakh dates and numbers (a month name in Kazakh; no comma grouping). */
export function intlKnowsKazakh(locale = 'kk-KZ'): boolean {
  try {
    const month = new Intl.DateTimeFormat(locale, { timeZone: 'UTC', month: 'short' }).format(
      new Date(Date.UTC(2026, 10, 15)),
    );
    const number = new Intl.NumberFormat(locale).format(1540);
    return month.toLowerCase().startsWith('қар') && !number.includes(',');
  } catch {
    return false;
  }
}
