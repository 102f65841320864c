export {
  buildDictionary,
  DICTIONARY_VERSION,
  STATUSES,
  TABLES,
  COLUMNS,
  type CellStatus,
} from './dictionary.js';
export {
  type DisclosureRules,
  primaryStatus,
  suppressComplementary,
  type MarginTable,
} from './disclosure.js';
export { buildDueReleases, buildReleaseFiles, isDue, latestDueMonth } from './release.js';
export { createOpenDataFeature, openDataFeature, type OpenDataFeatureOptions } from './routes.js';
