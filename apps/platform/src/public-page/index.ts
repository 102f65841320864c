export {
  createPublicPageFeature,
  DEFAULT_PUBLIC_LOOKUP_RATE_LIMIT,
  DEFAULT_PUBLIC_PAGE_DIST,
  PUBLIC_PAGE_DIST_ENV,
  type PublicPageOptions,
  publicPageFeature,
} from './routes.js';
export { languageFromAcceptLanguage, PAGE_LANGUAGES, type PageLanguage } from './language.js';
export { PUBLIC_LOOKUP_MAX_ITEMS } from './lookup.js';
