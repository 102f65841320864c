import { type Static, Type } from '@sinclair/typebox';
import { LEDGER_LEAF_KINDS, LEDGER_STATUSES, PROOF_SIDES, SEAL_ENVS } from '../vocabulary.js';
import { CalendarDate, DateTime, Nullable, Sha256Hex, StringEnum } from './common.js';

/** spec StatsSeal "body": "Signed content, canonical JSON (RFC 8785)". */
export const StatsSealBody = Type.Object({
  v: Type.Literal(1),
  env: StringEnum(SEAL_ENVS),
  day: CalendarDate,
  batch_count: Type.Integer({ minimum: 0 }),
  record_count: Type.Integer({ minimum: 0 }),
  // spec: "Hex Merkle root over batch leaves ordered by receive time then batch number"
  root: Sha256Hex,
  // spec: "Hex SHA-256 of the previous seal's body; 64 zeros for the first seal"
  prev_seal_sha256: Sha256Hex,
});
export type StatsSealBody = Static<typeof StatsSealBody>;

/** DESIGN.md §6: ledger leaves `{kind, approval_number, manifest_sha256, signed_at, revoked_at}`. */
export const LedgerLeaf = Type.Object({
  kind: StringEnum(LEDGER_LEAF_KINDS),
  // null on a stats_seal leaf (DESIGN.md §6)
  approval_number: Nullable(Type.String()),
  manifest_sha256: Sha256Hex,
  signed_at: DateTime,
  revoked_at: Nullable(DateTime),
});
export type LedgerLeaf = Static<typeof LedgerLeaf>;

export const LedgerProofStep = Type.Object({ side: StringEnum(PROOF_SIDES), hash: Sha256Hex });
export type LedgerProofStep = Static<typeof LedgerProofStep>;

/**
 * spec: "proof fields: v (integer), day (date), leaf {kind, approval_number, manifest_sha256, signed_at, revoked_at},
 * leaf_sha256, index (integer), leaf_count (integer), path (array of {side, hash}), merkle_root, anchor_sha256, digest".
 */
export const LedgerProof = Type.Object({
  v: Type.Integer(),
  day: CalendarDate,
  leaf: LedgerLeaf,
  leaf_sha256: Sha256Hex,
  index: Type.Integer({ minimum: 0 }),
  leaf_count: Type.Integer({ minimum: 1 }),
  path: Type.Array(LedgerProofStep),
  merkle_root: Sha256Hex,
  anchor_sha256: Sha256Hex,
  digest: Sha256Hex,
});
export type LedgerProof = Static<typeof LedgerProof>;

/** spec: "ledger fields: day (date), status (string), block_height (integer), digest (hex string), proof (object)". */
export const LedgerInfo = Type.Object({
  day: CalendarDate,
  status: StringEnum(LEDGER_STATUSES),
  block_height: Type.Integer({ minimum: 1 }),
  digest: Sha256Hex,
  proof: LedgerProof,
});
export type LedgerInfo = Static<typeof LedgerInfo>;

/** spec "Stats seal (StatsSeal)". */
export const StatsSeal = Type.Object({
  day: CalendarDate,
  // spec: "When the seal was made, Asia/Almaty time" (RFC 3339 with the Almaty offset, see formatAlmaty)
  signed_at: DateTime,
  body: StatsSealBody,
  // spec: "CMS signature (PKCS#7, body attached), base64"
  signature: Type.String(),
  // spec: "null until the ledger day that holds the seal has been digested"
  ledger: Nullable(LedgerInfo),
});
export type StatsSeal = Static<typeof StatsSeal>;
