export { type ExportLine, exportDayBatches } from './export.js';
export { LEAF_JSON_SQL, RECEIVED_AT_SQL, type SealLeaf } from './leaf.js';
export {
  DEFAULT_PUBLIC_RATE_LIMIT,
  type PublicRateLimit,
  PublicRateLimiter,
} from '../http/public-rate-limit.js';
export { createSealsFeature, type SealsOptions, sealsFeature } from './routes.js';
export {
  DEFAULT_SEAL_INTERVAL_MS,
  runSealScheduler,
  type SchedulerRun,
  startSealScheduler,
} from './scheduler.js';
export {
  computeDayLeaves,
  type DayLeaves,
  SCHEDULER_GRACE_MS,
  SealError,
  type SealErrorCode,
  sealBody,
  sealDay,
  sealEndedDays,
  sealUpTo,
} from './seal.js';
export { sealView } from './view.js';
