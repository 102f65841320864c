import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { intlFormats, intlKnowsKazakh, kazakhFormats } from '../../i18n/formats.js';
import { en, type PublicMessageKey } from './en.js';
import { kk } from './kk.js';
import { ru } from './ru.js';

/** The page's languages (issue 22, item 1): en, ru and kk, switchable, the browser's choice first. */
export const LANGUAGES = ['en', 'ru', 'kk'] as const;
export type Language = (typeof LANGUAGES)[number];

export const DICTIONARIES: Record<Language, Record<PublicMessageKey, string>> = { en, ru, kk };

const LOCALES: Record<Language, string> = { en: 'en-GB', ru: 'ru-RU', kk: 'kk-KZ' };
const STORAGE_KEY = 'ooh-public-language';

const isLanguage = (value: unknown): value is Language =>
  typeof value === 'string' && (LANGUAGES as readonly string[]).includes(value);

/**
 * The reader's own earlier choice, else the language the verify host chose from Accept-Language (written into
 * <html lang> by src/public-page), else English.
 */
export function initialLanguage(): Language {
  let stored: string | null = null;
  try {
    stored = window.localStorage.getItem(STORAGE_KEY);
  } catch {
    // Storage can be switched off; the host's choice stands.
  }
  if (isLanguage(stored)) return stored;
  const served = document.documentElement.lang;
  return isLanguage(served) ? served : 'en';
}

export function rememberLanguage(language: Language): void {
  try {
    window.localStorage.setItem(STORAGE_KEY, language);
  } catch {
    // Not kept: the page still switches.
  }
  document.documentElement.lang = language;
}

export type Params = Record<string, string | number>;

export interface I18n {
  language: Language;
  setLanguage(language: Language): void;
  t(key: PublicMessageKey, params?: Params): string;
  /** A translated text when `key` is one, else null (for machine words of the verifier). */
  known(key: string): PublicMessageKey | null;
  dateTime(value: string | null | undefined): string;
  date(value: string | null | undefined): string;
  number(value: number | null | undefined): string;
}

export function makeI18n(language: Language, setLanguage: (language: Language) => void): I18n {
  const dictionary = DICTIONARIES[language];
  const locale = LOCALES[language];
  const formats = language === 'kk' && !intlKnowsKazakh(locale) ? kazakhFormats() : intlFormats(locale);
  const t = (key: PublicMessageKey, params?: Params) => {
    const text = dictionary[key] ?? en[key] ?? key;
    if (!params) return text;
    return text.replace(/\{(\w+)\}/g, (whole, name: string) => {
      const value = params[name];
      if (value === undefined) return whole;
      return typeof value === 'number' ? formats.number(value) : value;
    });
  };
  return {
    language,
    setLanguage,
    t,
    known: (key) => (key in en ? (key as PublicMessageKey) : null),
    dateTime: (value) => {
      if (!value) return '—';
      const d = new Date(value);
      return Number.isNaN(d.getTime()) ? value : formats.dateTime(d);
    },
    date: (value) => {
      if (!value) return '—';
      const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
      return m ? formats.date(new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])))) : value;
    },
    number: (value) => (value === null || value === undefined ? '—' : formats.number(value)),
  };
}

export const I18nContext = createContext<I18n>(makeI18n('en', () => {}));
export const useI18n = (): I18n => useContext(I18nContext);
export type { PublicMessageKey };
