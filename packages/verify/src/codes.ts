import type { VerificationErrorCode } from './errors.js';
import type { TimestampRefusal } from './timestamp.js';

/*
 * Every machine word this package answers with, listed, so a page that translates them can test that it has a text
 * for each (the console's en, ru and kk). The two typed unions are listed through a record keyed by the union, so a
 * code added to errors.ts or timestamp.ts without a line here fails the typecheck; the check reasons are plain
 * strings in seal.ts, block.ts and anchoring.ts, listed by hand.
 */

const ERROR_CODES: { readonly [C in VerificationErrorCode]: null } = {
  malformed: null,
  not_canonicalizable: null,
  invalid_argument: null,
  unsupported_algorithm: null,
  chain_no_issuer: null,
  chain_bad_signature: null,
  chain_issuer_not_ca: null,
  chain_path_length: null,
  chain_not_yet_valid: null,
  chain_expired: null,
  chain_unknown_critical_extension: null,
  chain_too_long: null,
  chain_purpose: null,
  cms_not_attached: null,
  cms_signer_count: null,
  cms_algorithm: null,
  cms_signer_not_included: null,
  cms_signer_key_usage: null,
  cms_content_type: null,
  cms_message_digest: null,
  cms_bad_signature: null,
  signer_role: null,
  document_malformed: null,
  document_unsigned: null,
  document_content_differs: null,
  document_body_invalid: null,
  vkey_malformed: null,
  vkey_name: null,
  vkey_key_id: null,
  vkey_key_id_differs: null,
};

/** Every VerificationError code (errors.ts); a failed seal signature check carries one as its reason. */
export const VERIFICATION_ERROR_CODES = Object.keys(ERROR_CODES) as readonly VerificationErrorCode[];

const REFUSALS: { readonly [C in TimestampRefusal]: null } = {
  not_granted: null,
  other_digest: null,
  changed: null,
  signature: null,
  not_pinned: null,
  not_for_timestamping: null,
  not_valid_then: null,
  before_day_end: null,
  malformed: null,
};

/** Every refusal of verifyBlockTimestamp. */
export const TIMESTAMP_REFUSALS = Object.keys(REFUSALS) as readonly TimestampRefusal[];

/** What verifyLedgerInfo answers when a ledger position does not prove what was expected. */
export const LEDGER_PROOF_REASONS = [
  'leaf_kind',
  'leaf_not_this_approval',
  'leaf_not_this_manifest',
  'leaf_hash_differs',
  'proof_does_not_reach_root',
  'digest_differs',
] as const;

/**
 * The reasons of verifySeal's checks besides the VerificationError codes of a failed signature: ok, pending and
 * failed; the ledger check's ok reason is the ledger's status (digested, anchored).
 */
export const SEAL_CHECK_REASONS = [
  'verified',
  'signed_at_differs',
  'matches',
  'signature_failed',
  'content_differs',
  'first_seal',
  'links_previous',
  'previous_unavailable',
  'previous_not_day_before',
  'previous_differs',
  'env_differs',
  'another_day',
  'signed_before_day_end',
  'leaf_before_day_end',
  'not_digested',
  'leaf_kind',
  'leaf_not_this_seal',
  'leaf_signed_at_differs',
  'leaf_hash_differs',
  'proof_does_not_reach_root',
  'digest_differs',
  'digested',
  'anchored',
] as const;

/** The reasons of verifySealBatches's checks (`ooh-verify --batches`). */
export const BATCH_CHECK_REASONS = [
  'bodies_match',
  'not_a_batch_line',
  'body_sha256_differs',
  'received_another_day',
  'out_of_order',
  'body_not_a_batch',
  'body_differs_from_leaf',
  'listed_twice',
  'root_recomputed',
  'root_differs',
  'batch_count_recounted',
  'batch_count_differs',
  'record_count_recounted',
  'record_count_differs',
] as const;

/** The reasons of verifyBlock's and verifyHead's checks. */
export const BLOCK_CHECK_REASONS = [
  'leaves_match',
  'leaf_hash_differs',
  'root_matches',
  'root_differs',
  'digest_matches',
  'digest_differs',
  'first_block',
  'links_previous_block',
  'previous_block_unavailable',
  'anchor_differs',
] as const;

/** The reasons of verifyAnchoring. */
export const ANCHOR_REASONS = [
  'anchored',
  'ledger_signed',
  'not_anchored',
  'no_checkpoint',
  'no_witnesses',
  'ledger_key_refused',
  'cosignature_invalid',
  'cosignature_future',
  'root_differs',
] as const;
