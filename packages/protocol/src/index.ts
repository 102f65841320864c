export { type BackoffPolicy, backoffDelayMs, retryAfterMs } from './backoff.js';
/**
 * @ooh/protocol: the wire types of the interface specification, problem codes, the proof-of-play vocabulary,
 * limits, and the Almaty calendar. No I/O, no Node module: the console and the public page import it too. Bundlers
 * may drop what a bundle does not use ("sideEffects": false in package.json), so the browser pages that take only
 * the calendar carry no TypeBox (test/browser-bundle.test.ts); the formats schemas/common.ts registers matter only to
 * the schemas, which import it.
 */
export {
  ALMATY_TZ,
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
  type Daypart,
  daypartOf,
  daysInCalendarMonth,
  formatAlmaty,
  type Instant,
  isCalendarDate,
  isCalendarMonth,
} from './almaty.js';
export {
  type AjvErrorLike,
  collectFieldErrors,
  compiledCheck,
  fieldErrorsFromAjv,
} from './field-errors.js';
export {
  ADVERTISER_BIN_PATTERN,
  DOMAIN_MAX_CHARS,
  DOMAIN_PATTERN,
  LIMITS,
  type Limits,
  PLAY_ID_PATTERN,
  PREV_SHA256_PATTERN,
  SHA256_HEX_PATTERN,
  SRC_CHANNEL_PATTERN,
  SRC_ID_PATTERN,
  SUBMISSION_NUMBER_PATTERN,
  UUID_PATTERN,
} from './limits.js';
export {
  checkPopRecord,
  freeFormWithinLimits,
  type PopChannel,
  type PopRecordCheck,
  parseSrc,
} from './pop-record.js';
export {
  type FieldError,
  FieldErrorSchema,
  isProblemCode,
  PROBLEM_CODES,
  PROBLEM_MEDIA_TYPE,
  PROBLEM_TYPE_PREFIX,
  PROBLEMS,
  type ProblemCode,
  type ProblemDocument,
  ProblemDocumentSchema,
  ProblemError,
  problemDocument,
} from './problems.js';
export { CalendarDate, DateTime, LocalizedText, Sha256Hex, Uuid } from './schemas/common.js';
// The answers of the platform's console routes (not in the spec): every schema and type of the module.
export * from './schemas/console.js';
export { FLEET_SORTS, FLEET_STATES, type FleetSort, type FleetState } from './fleet.js';
export {
  CreativeEntry,
  CreativeLookupItem,
  CreativeLookupRequest,
  CreativeLookupResponse,
  CreativeStatus,
} from './schemas/creative.js';
export {
  ApprovalEnvelope,
  ApprovalManifest,
  Envelope,
  EnvelopeOf,
  RevocationList,
  RevocationListBody,
} from './schemas/envelope.js';
export { DictionaryCode, DictionaryEntry, OpenDataDictionary } from './schemas/open-data.js';
export {
  CmsBatch,
  PopAnswer,
  PopAnswerItem,
  PopRecord,
  SignedTelemetryBatch,
  Src,
  TelemetryBatch,
} from './schemas/pop.js';
export { RenewAnswer, RenewRequest } from './schemas/renew.js';
export {
  LedgerInfo,
  LedgerLeaf,
  LedgerProof,
  LedgerProofStep,
  StatsSeal,
  StatsSealBody,
} from './schemas/seal.js';
export {
  Category,
  CategoryName,
  checkSubmissionCreateRules,
  DeclaredDailyPlays,
  ExternalRefs,
  Submission,
  SubmissionChannelSchema,
  SubmissionCreateRequest,
} from './schemas/submission.js';
export { hasLoneSurrogate } from './text.js';
export { addCalendarYears, isDateTime, isUuid, parseDateTime, parseDateTimeMs } from './time-formats.js';
export {
  CREATIVE_STATUSES,
  type CreativeStatusValue,
  ITEM_STATUSES,
  type ItemStatus,
  LEDGER_LEAF_KINDS,
  LEDGER_STATUSES,
  type LedgerLeafKind,
  type LedgerStatus,
  POP_SCHEMA,
  PROOF_SIDES,
  type ProofSideValue,
  RECORD_FLAGS,
  RECORD_KINDS,
  REFUSAL_REASONS,
  REJECT_CODES,
  type RecordFlag,
  type RecordKind,
  type RefusalReason,
  type RejectCode,
  SCREEN_POWER,
  SEAL_ENVS,
  SLOTS,
  SUBMISSION_CHANNELS,
  type ScreenPower,
  type SealEnv,
  type Slot,
  type SubmissionChannel,
} from './vocabulary.js';
