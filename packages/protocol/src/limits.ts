/**
 * Every number of the spec's "Limits" table (and the few numbers of DESIGN.md §5 and the endpoint rules) as one
 * named constant, plus the character patterns the spec gives for identifiers.
 * Sizes are decimal: the spec writes "1 MB", "4 MB", "16 MB".
 */
export const LIMITS = Object.freeze({
  /** spec: "advertiser_name: up to 300 characters". */
  advertiserNameMaxChars: 300,
  /** spec: "advertiser_bin: 12 digits". */
  advertiserBinDigits: 12,
  /** spec: "operators up to 200 own structures; agencies up to 2000 of any operators". */
  operatorStructuresMax: 200,
  agencyStructuresMax: 2000,
  /** spec: "creatives lookup: up to 500 hashes per call". */
  lookupHashesMax: 500,
  /** spec: "agent telemetry body: at most 1 MB; at most 1000 events". */
  telemetryBodyMaxBytes: 1_000_000,
  telemetryEventsMax: 1000,
  /** spec: "10 batches a minute per device; 429 for more than one batch every 10 seconds (burst of 3 allowed)". */
  agentBatchesPerMinute: 10,
  agentBurst: 3,
  agentMinIntervalSeconds: 10,
  /** spec: "agent ts tolerance: 300 seconds against the platform clock". */
  agentTsToleranceSeconds: 300,
  /** spec: "CMS batch records: at most 10 000". */
  cmsRecordsMax: 10_000,
  /** spec: "4 MB on the wire, 16 MB after decompression; ... not inflate to more than 20 times its size". */
  cmsWireMaxBytes: 4_000_000,
  cmsInflatedMaxBytes: 16_000_000,
  cmsInflateRatioMax: 20,
  /** spec: "2 batches a second per installation (burst 10); 10 calls a second per key (burst 30)". */
  cmsBatchesPerSecondPerInstallation: 2,
  cmsInstallationBurst: 10,
  cmsCallsPerSecondPerKey: 10,
  cmsKeyBurst: 30,
  /** spec: "2 000 000 records an hour per organisation". */
  cmsRecordsPerHourPerOrganisation: 2_000_000,
  /** spec: "a play counts from duration_ms 1000". */
  playMinDurationMs: 1000,
  /** spec: "src deal_id and imp_id characters A-Za-z0-9._:- up to 64". */
  idMaxChars: 64,
  /** spec: "refused with more than 60 days left unless force is allowed (24 hours)". */
  renewalMaxDaysLeft: 60,
  /** spec: "old certificate accepted 24 hours after renewal". */
  renewalOldCertGraceHours: 24,
  renewalForceGrantHours: 24,
  /** spec: "player self-renews under 30 days left". */
  selfRenewDaysLeft: 30,
  /** spec: "rotated CMS key: accepted 24 hours after the new key is registered". */
  cmsKeyRotationGraceHours: 24,
  /** spec renew rule 3: "validity one year": a calendar year (addCalendarYears), not 365 days. */
  certificateValidityYears: 1,
  /** spec: "min 3 operators and 3 advertisers per cell ..., at most 70 percent of plays by one party, release lag 1 full month". */
  openDataMinOperators: 3,
  openDataMinAdvertisers: 3,
  openDataMaxPartySharePct: 70,
  openDataLagMonths: 1,
  /** DESIGN.md §5: time_in_future is "more than 300 s after receipt". */
  futureToleranceSeconds: 300,
  /** DESIGN.md §5: too_old is "more than 90 days before receipt". */
  tooOldDays: 90,
  /** spec: "The declared_vs_actual city event compares ... default band 30 %". */
  declaredBandPct: 30,
  /**
   * A record's free-form objects (detail, its src, screen), refused as invalid_record beyond these (issue "Trust
   * under attack", item 4): nesting depth, and bytes of their JSON text. The agent bounds its own detail to 4096
   * bytes; a deeper or larger object is no fact of a play, only work for whoever stores and reads it.
   */
  recordObjectMaxDepth: 16,
  recordObjectMaxBytes: 16_384,
} as const);
export type Limits = typeof LIMITS;

/** spec: "play_id characters A-Za-z0-9_-". */
export const PLAY_ID_PATTERN = '^[A-Za-z0-9_-]+$';
/** spec: "src deal_id and imp_id characters A-Za-z0-9._:- up to 64". */
export const SRC_ID_PATTERN = '^[A-Za-z0-9._:-]{1,64}$';
/** spec: "SHA-256 of the file played, 64 lowercase hex characters". */
export const SHA256_HEX_PATTERN = '^[0-9a-f]{64}$';
/**
 * spec: prev_sha256 "hex SHA-256 of the previous batch body; empty for the first". Hex of either case: where the
 * spec means lowercase it says so (media_sha256, the lookup's hashes), and the platform never compares this field,
 * so refusing capitals would lose a whole batch's plays for nothing.
 */
export const PREV_SHA256_PATTERN = '^(?:[0-9a-fA-F]{64})?$';
/** spec: "advertiser_bin: 12 digits". */
export const ADVERTISER_BIN_PATTERN = '^[0-9]{12}$';
/** spec: submission "number: shape SUB-<year>-<serial>". */
export const SUBMISSION_NUMBER_PATTERN = '^SUB-[0-9]{4}-[0-9]+$';
/** spec: src "channel a lowercase word". */
export const SRC_CHANNEL_PATTERN = '^[a-z]+$';
/** A UUID as ajv-formats' "uuid" format reads it (case-insensitive), for places where a format cannot be used (keys). */
export const UUID_PATTERN = '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$';
/**
 * spec external_refs: "adomain (array of string, advertiser domains as in OpenRTB adomain)": a DNS name of at least
 * two labels (e.g. "ford.com"), letters, digits and inner hyphens, at most 253 characters (maxLength on the schema).
 */
export const DOMAIN_PATTERN =
  '^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)+[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$';
export const DOMAIN_MAX_CHARS = 253;
