/**
 * Proof-of-play vocabulary: the closed word lists of the record table (spec "Proof-of-play record") and the
 * refusal reasons and flags that DESIGN.md §5 decides where the spec says "not shown".
 */

/** spec: "Batch format version is the schema value service.pop/1". */
export const POP_SCHEMA = 'service.pop/1';

/** DESIGN.md §5 "Per-record refusal reasons (not counted)". */
export const REFUSAL_REASONS = [
  'invalid_record',
  'kind_not_allowed',
  'player_unknown',
  'time_in_future',
  'too_old',
  'too_short',
  'end_before_start',
  'approval_missing',
  // Issue "Trust under attack", item 6: a play whose play_id was already counted for its player (within the 90 days
  // of too_old), e.g. resent under a new seq by a CMS that renumbered after a crash.
  'play_id_counted',
] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/** DESIGN.md §5 "Flags (accepted and counted, listed in items)". */
export const RECORD_FLAGS = [
  'structure_mismatch',
  'approval_unknown',
  'approval_not_valid_on_day',
  'approval_not_for_structure',
  'approval_revoked',
  'media_mismatch',
  'screen_off',
  'timing_missing',
  // Issue "The spec to the letter, second pass", item 2: duration_ms and end - start both given, far apart.
  'timing_mismatch',
] as const;
export type RecordFlag = (typeof RECORD_FLAGS)[number];

/** spec: "kind: play, reject, mode_change, tamper (agent channel); only play from a CMS". */
export const RECORD_KINDS = ['play', 'reject', 'mode_change', 'tamper'] as const;
export type RecordKind = (typeof RECORD_KINDS)[number];

/** spec: "code: Why a file was refused, on reject". */
export const REJECT_CODES = [
  'NO_SIGNATURE',
  'BAD_SIGNATURE',
  'HASH_MISMATCH',
  'EXPIRED_APPROVAL',
  'REVOKED',
] as const;
export type RejectCode = (typeof REJECT_CODES)[number];

/** spec: "slot: Authority content: gov or emergency; no approval number, never billed, counted apart". */
export const SLOTS = ['gov', 'emergency'] as const;
export type Slot = (typeof SLOTS)[number];

/** spec: "screen.power is on, off or unknown". */
export const SCREEN_POWER = ['on', 'off', 'unknown'] as const;
export type ScreenPower = (typeof SCREEN_POWER)[number];

/** spec PopAnswer: "items[].status: duplicate, refused or flagged". */
export const ITEM_STATUSES = ['duplicate', 'refused', 'flagged'] as const;
export type ItemStatus = (typeof ITEM_STATUSES)[number];

/** spec Creative entry "status". */
export const CREATIVE_STATUSES = [
  'valid',
  'not_yet_valid',
  'expired',
  'revoked',
  'pending',
  'rejected',
] as const;
export type CreativeStatusValue = (typeof CREATIVE_STATUSES)[number];

/** spec Submission "channel: direct or programmatic". */
export const SUBMISSION_CHANNELS = ['direct', 'programmatic'] as const;
export type SubmissionChannel = (typeof SUBMISSION_CHANNELS)[number];

/** spec StatsSeal "body.env: test or prod". */
export const SEAL_ENVS = ['test', 'prod'] as const;
export type SealEnv = (typeof SEAL_ENVS)[number];

/** DESIGN.md §6 "Status values: digested, anchored" (the spec: "Allowed values of ledger.status: not shown"). */
export const LEDGER_STATUSES = ['digested', 'anchored'] as const;
export type LedgerStatus = (typeof LEDGER_STATUSES)[number];

/** DESIGN.md §6: ledger leaves for approvals issued, approvals revoked and seals made that day. */
export const LEDGER_LEAF_KINDS = ['approval', 'revocation', 'stats_seal'] as const;
export type LedgerLeafKind = (typeof LEDGER_LEAF_KINDS)[number];

/** Side of the sibling hash in a Merkle inclusion path (same words as @ooh/crypto's ProofSide). */
export const PROOF_SIDES = ['left', 'right'] as const;
export type ProofSideValue = (typeof PROOF_SIDES)[number];
