import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { en, type MessageKey } from './en.js';
import { kk } from './kk.js';
import { intlFormats, intlKnowsKazakh, kazakhFormats } from './formats.js';
import { ru } from './ru.js';

/** The console's languages (issue "The console": en, ru and kk, switchable, every string translated). */
export const LANGUAGES = ['en', 'ru', 'kk'] as const;
export type Language = (typeof LANGUAGES)[number];

export const DICTIONARIES: Record<Language, Record<MessageKey, string>> = { en, ru, kk };

/** Intl locales: dates, times and numbers in each language's own format. */
const LOCALES: Record<Language, string> = { en: 'en-GB', ru: 'ru-RU', kk: 'kk-KZ' };
export { TIME_ZONE } from './formats.js';

const STORAGE_KEY = 'ooh-console-language';

export function initialLanguage(): Language {
  const stored = window.localStorage.getItem(STORAGE_KEY);
  if (stored && (LANGUAGES as readonly string[]).includes(stored)) return stored as Language;
  const browser = navigator.language.slice(0, 2);
  return (LANGUAGES as readonly string[]).includes(browser) ? (browser as Language) : 'en';
}

export function rememberLanguage(language: Language): void {
  window.localStorage.setItem(STORAGE_KEY, language);
  document.documentElement.lang = language;
}

export type Params = Record<string, string | number>;

export interface I18n {
  language: Language;
  setLanguage(language: Language): void;
  t(key: MessageKey, params?: Params): string;
  /** An instant (RFC 3339) as a date and time in Almaty. */
  dateTime(value: string | Date | null | undefined): string;
  /** A calendar date YYYY-MM-DD. */
  date(value: string | null | undefined): string;
  /** From one calendar date to another, both included. */
  dateRange(from: string | null | undefined, to: string | null | undefined): string;
  number(value: number | null | undefined): string;
  /** A length of time (milliseconds) as hours and minutes. */
  hours(ms: number): string;
}

export function makeI18n(language: Language, setLanguage: (language: Language) => void): I18n {
  const dictionary = DICTIONARIES[language];
  const locale = LOCALES[language];
  const formats = language === 'kk' && !intlKnowsKazakh(locale) ? kazakhFormats() : intlFormats(locale);
  const t = (key: MessageKey, params?: Params) => {
    const text = dictionary[key] ?? en[key] ?? key;
    if (!params) return text;
    return text.replace(/\{(\w+)\}/g, (whole, name: string) => {
      const value = params[name];
      if (value === undefined) return whole;
      return typeof value === 'number' ? formats.number(value) : value;
    });
  };
  const date = (value: string | null | undefined): string => {
    if (!value) return '—';
    const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
    if (!m) return value;
    return formats.date(new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))));
  };
  return {
    language,
    setLanguage,
    t,
    dateTime: (value) => {
      if (value === null || value === undefined || value === '') return '—';
      const d = value instanceof Date ? value : new Date(value);
      return Number.isNaN(d.getTime()) ? String(value) : formats.dateTime(d);
    },
    date,
    dateRange: (from, to) => `${date(from)} – ${date(to)}`,
    number: (value) => (value === null || value === undefined ? '—' : formats.number(value)),
    hours: (ms) => {
      const minutes = Math.max(0, Math.round(ms / 60_000));
      return t('time.hoursMinutes', { h: Math.floor(minutes / 60), m: minutes % 60 });
    },
  };
}

export const I18nContext = createContext<I18n>(makeI18n('en', () => {}));
export const useI18n = () => useContext(I18nContext);
export type { MessageKey };
