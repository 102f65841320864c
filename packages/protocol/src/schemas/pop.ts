import { type Static, Type } from '@sinclair/typebox';
import {
  LIMITS,
  PLAY_ID_PATTERN,
  PREV_SHA256_PATTERN,
  SRC_CHANNEL_PATTERN,
  SRC_ID_PATTERN,
} from '../limits.js';
import {
  ITEM_STATUSES,
  POP_SCHEMA,
  RECORD_FLAGS,
  RECORD_KINDS,
  REFUSAL_REASONS,
  REJECT_CODES,
  SCREEN_POWER,
  SLOTS,
} from '../vocabulary.js';
import { DateTime, Sha256Hex, StringEnum, Uuid } from './common.js';

// Numbers that are stored and compared exactly: never beyond 2^53 (DESIGN.md §4 "Integers beyond 2^53 never appear").
const MAX_EXACT_INTEGER = Number.MAX_SAFE_INTEGER;

/**
 * spec: src "an attribution tag {channel, seller_id, deal_id, imp_id}: channel a lowercase word, seller_id the id of
 * the selling platform's organisation, deal_id and imp_id optional (characters A-Za-z0-9._:-, up to 64)".
 * Extra keys make it "a tag of another shape", which is ignored (see parseSrc).
 */
export const Src = Type.Object(
  {
    channel: Type.String({ pattern: SRC_CHANNEL_PATTERN }),
    seller_id: Type.String({ minLength: 1 }),
    deal_id: Type.Optional(Type.String({ pattern: SRC_ID_PATTERN })),
    imp_id: Type.Optional(Type.String({ pattern: SRC_ID_PATTERN })),
  },
  { additionalProperties: false },
);
export type Src = Static<typeof Src>;

/**
 * spec "Proof-of-play record": the fields of one element of `events` (agent) or `records` (CMS). What is required
 * depends on the kind and the channel (checkPopRecord); the schema holds the rules every record shares. Unknown
 * fields are allowed: the body is kept as received, and a newer player may send more.
 */
export const PopRecord = Type.Object({
  kind: StringEnum(RECORD_KINDS),
  // spec: "Record number for this player, +1 for every record across batches, from 1"
  seq: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_EXACT_INTEGER })),
  play_id: Type.Optional(Type.String({ pattern: PLAY_ID_PATTERN })),
  approval_number: Type.Optional(Type.String({ minLength: 1 })),
  slot: Type.Optional(StringEnum(SLOTS)),
  // spec: "SHA-256 of the file played, 64 lowercase hex characters"
  media_sha256: Type.Optional(Sha256Hex),
  start: Type.Optional(DateTime),
  end: Type.Optional(DateTime),
  duration_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_EXACT_INTEGER })),
  structure: Type.Optional(Type.String()),
  screen: Type.Optional(Type.Object({ power: StringEnum(SCREEN_POWER) })),
  at: Type.Optional(DateTime),
  code: Type.Optional(StringEnum(REJECT_CODES)),
  detail: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  player: Type.Optional(Type.String({ minLength: 1 })),
});
export type PopRecord = Static<typeof PopRecord>;

const BatchSeq = Type.Integer({ minimum: 0, maximum: MAX_EXACT_INTEGER });
// spec: "hex SHA-256 of the previous batch body; empty for the first"
const PrevSha256 = Type.String({ pattern: PREV_SHA256_PATTERN });

/**
 * Body of POST {agents_url}/s/v1/telemetry (and of the certificate channel, DESIGN.md §5), schema service.pop/1.
 * Records are judged one by one (spec CMS rule 2, DESIGN.md §5), so `events` holds anything and a bad record never
 * refuses the batch: apply checkPopRecord to each element.
 * device_id and ts are required on the signed channel only (SignedTelemetryBatch); the certificate channel knows the
 * device from its certificate.
 */
export const TelemetryBatch = Type.Object({
  schema: Type.Literal(POP_SCHEMA),
  device_id: Type.Optional(Uuid),
  ts: Type.Optional(DateTime),
  batch_seq: BatchSeq,
  prev_sha256: Type.Optional(PrevSha256),
  sent_at: Type.Optional(DateTime),
  events: Type.Array(Type.Unknown(), { maxItems: LIMITS.telemetryEventsMax }),
});
export type TelemetryBatch = Static<typeof TelemetryBatch>;

/** TelemetryBatch as the signed channel needs it: spec "device_id ... signed channel", "ts ... signed channel". */
export const SignedTelemetryBatch = Type.Object({
  ...TelemetryBatch.properties,
  device_id: Uuid,
  ts: DateTime,
});
export type SignedTelemetryBatch = Static<typeof SignedTelemetryBatch>;

/** Body of POST {base_url}/api/v1/pop/batches (spec "CMS batch for many players"). */
export const CmsBatch = Type.Object({
  schema: Type.Literal(POP_SCHEMA),
  // spec: "inside the signed bytes; must equal X-Service-Source"
  source_id: Uuid,
  // spec: "whole number, 0 or more, taken once per installation"
  batch_seq: BatchSeq,
  prev_sha256: Type.Optional(PrevSha256),
  sent_at: Type.Optional(DateTime),
  // spec: "at most 10 000"
  records: Type.Array(Type.Unknown(), { maxItems: LIMITS.cmsRecordsMax }),
});
export type CmsBatch = Static<typeof CmsBatch>;

/** spec: "items: Only records not plainly accepted". */
export const PopAnswerItem = Type.Object({
  index: Type.Integer({ minimum: 0 }),
  status: StringEnum(ITEM_STATUSES),
  reason: Type.Optional(StringEnum(REFUSAL_REASONS)),
  flags: Type.Optional(Type.Array(StringEnum(RECORD_FLAGS))),
});
export type PopAnswerItem = Static<typeof PopAnswerItem>;

/** spec "Batch answer (PopAnswer, both proof-of-play endpoints)". */
export const PopAnswer = Type.Object({
  batch_seq: Type.Integer({ minimum: 0 }),
  received: Type.Integer({ minimum: 0 }),
  accepted: Type.Integer({ minimum: 0 }),
  duplicates: Type.Integer({ minimum: 0 }),
  refused: Type.Integer({ minimum: 0 }),
  flagged: Type.Integer({ minimum: 0 }),
  duplicate: Type.Boolean(),
  items: Type.Array(PopAnswerItem),
});
export type PopAnswer = Static<typeof PopAnswer>;
