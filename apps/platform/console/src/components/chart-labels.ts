import { intlKnowsKazakh, KK_MONTHS } from '../i18n/formats.js';
import type { Language } from '../i18n/index.js';

/** The locale of a console language, for Intl formats of the charts. */
const LOCALES: Record<Language, string> = { en: 'en-GB', ru: 'ru-RU', kk: 'kk-KZ' };

/** Kazakh written by hand ("20 қар."), as CLDR's "d MMM", where the browser cannot. */
function kazakhByHand(language: Language): boolean {
  if (language !== 'kk') return false;
  kazakhKnown ??= intlKnowsKazakh(LOCALES.kk);
  return !kazakhKnown;
}
let kazakhKnown: boolean | undefined;

/** A calendar date 'YYYY-MM-DD' as a short tick label ("20 Nov"), never shifted by a time zone. */
export function shortDay(language: Language, day: string): string {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day);
  if (!m) return day;
  if (kazakhByHand(language)) return `${Number(m[3])} ${KK_MONTHS[Number(m[2]) - 1]}`;
  return new Intl.DateTimeFormat(LOCALES[language], {
    timeZone: 'UTC',
    day: 'numeric',
    month: 'short',
  }).format(new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))));
}

/** An instant's hour in a time zone as a tick label ("14:00"). */
export function shortHour(language: Language, instant: string, timeZone = 'Asia/Almaty'): string {
  return new Intl.DateTimeFormat(LOCALES[language], {
    timeZone,
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  }).format(new Date(instant));
}

/** An instant's date and hour in a time zone ("20 Nov, 14:00"). */
export function dayAndHour(language: Language, instant: string, timeZone = 'Asia/Almaty'): string {
  if (kazakhByHand(language)) {
    const parts = new Intl.DateTimeFormat('en-GB', {
      timeZone,
      month: 'numeric',
      day: 'numeric',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    }).formatToParts(new Date(instant));
    const part = (type: string) => parts.find((p) => p.type === type)?.value ?? '';
    return `${Number(part('day'))} ${KK_MONTHS[Number(part('month')) - 1]}, ${part('hour')}:${part('minute')}`;
  }
  return new Intl.DateTimeFormat(LOCALES[language], {
    timeZone,
    day: 'numeric',
    month: 'short',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  }).format(new Date(instant));
}

/** An instant's date and time in a time zone ("20 Nov 2026, 14:00"; in Kazakh as CLDR writes it, "2026 ж. 20 қар., 14:00"). */
export function dateTimeInZone(language: Language, instant: string, timeZone: string): string {
  const options: Intl.DateTimeFormatOptions = {
    timeZone,
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  };
  if (kazakhByHand(language)) {
    const parts = new Intl.DateTimeFormat('en-GB', { ...options, month: 'numeric' }).formatToParts(
      new Date(instant),
    );
    const part = (type: string) => parts.find((p) => p.type === type)?.value ?? '';
    return `${part('year')} ж. ${Number(part('day'))} ${KK_MONTHS[Number(part('month')) - 1]}, ${part('hour')}:${part('minute')}`;
  }
  return new Intl.DateTimeFormat(LOCALES[language], options).format(new Date(instant));
}

/** Percent with one decimal at most, in the language's number format. */
export function percent(language: Language, value: number): string {
  return new Intl.NumberFormat(LOCALES[language], { maximumFractionDigits: 2 }).format(value);
}
