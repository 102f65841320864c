/** The public page's languages (issue 22, item 1: en, ru and kk). */
export const PAGE_LANGUAGES = ['en', 'ru', 'kk'] as const;
export type PageLanguage = (typeof PAGE_LANGUAGES)[number];

/**
 * The page's default language from an Accept-Language header (RFC 9110 section 12.5.4): the supported language
 * with the highest weight (ties: the first named), by its primary subtag (`ru-RU` is `ru`); English when none is
 * named or the header cannot be read. A reader's own choice on the page (kept in the browser) comes before this.
 */
export function languageFromAcceptLanguage(header: string | undefined): PageLanguage {
  if (!header || header.length > 1000) return 'en';
  let best: { language: PageLanguage; q: number } | null = null;
  for (const part of header.split(',')) {
    const [range, ...params] = part.trim().split(';');
    const primary = range?.trim().toLowerCase().split('-')[0] ?? '';
    if (!(PAGE_LANGUAGES as readonly string[]).includes(primary)) continue;
    let q = 1;
    for (const param of params) {
      const m = /^\s*q\s*=\s*([01](?:\.\d{0,3})?)\s*$/i.exec(param);
      if (m) q = Number(m[1]);
    }
    if (q > 0 && q <= 1 && (best === null || q > best.q)) best = { language: primary as PageLanguage, q };
  }
  return best?.language ?? 'en';
}
