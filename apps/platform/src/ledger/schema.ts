import { ApprovalManifest, LedgerInfo, LedgerLeaf, LEDGER_STATUSES } from '@ooh/protocol';
import { type Static, Type } from '@sinclair/typebox';

// Public ledger documents of the verify host (the spec leaves them open: DESIGN.md section 6 "Public endpoints on
// the verify host also serve the ledger blocks and proofs").

const Sha256Hex = Type.String({ pattern: '^[0-9a-f]{64}$' });
const Day = Type.String({ format: 'date' });
const Status = Type.Union(LEDGER_STATUSES.map((s) => Type.Literal(s)));

/** A digested block without its leaves: GET /v1/ledger/head. */
export const LedgerBlockHead = Type.Object({
  day: Day,
  block_height: Type.Integer({ minimum: 1 }),
  status: Status,
  leaf_count: Type.Integer({ minimum: 0 }),
  merkle_root: Sha256Hex,
  // DESIGN.md section 6: "anchor_sha256 is the previous block's digest (64 zeros for the first)".
  anchor_sha256: Sha256Hex,
  digest: Sha256Hex,
  digested_at: Type.String({ format: 'date-time' }),
  // Issue 23: the checkpoint (GET /v1/ledger/checkpoints/{size}) whose witness quorum anchored the block; null while
  // the block is only digested. A hint where to look: verifiers check the cosignatures themselves.
  anchored_by: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
});
export type LedgerBlockHead = Static<typeof LedgerBlockHead>;

/** A digested block with its leaves in block order: GET /v1/ledger/blocks/{day}. */
export const LedgerBlock = Type.Object({
  ...LedgerBlockHead.properties,
  leaves: Type.Array(
    Type.Object({ index: Type.Integer({ minimum: 0 }), leaf: LedgerLeaf, leaf_sha256: Sha256Hex }),
  ),
  // Issue 23: the block's RFC 3161 timestamp once it has one (src/ledger/timestamp.ts); `url` serves the token.
  timestamp: Type.Optional(
    Type.Object({
      gen_time: Type.String({ format: 'date-time' }),
      tsa: Type.Union([Type.String(), Type.Null()]),
      url: Type.String(),
    }),
  ),
});
export type LedgerBlock = Static<typeof LedgerBlock>;

export const APPROVAL_PUBLIC_STATUSES = ['valid', 'not_yet_valid', 'expired', 'revoked'] as const;
export type ApprovalPublicState = (typeof APPROVAL_PUBLIC_STATUSES)[number];

/**
 * GET /v1/approvals/{number}: what a citizen scanning the code on a billboard sees. The manifest is the signed body
 * of the envelope (its SHA-256 is the ledger leaf's manifest_sha256); the envelope's signature stays with the
 * credentialed route. No party names.
 */
export const ApprovalPublicStatus = Type.Object({
  approval_number: Type.String(),
  status: Type.Union(APPROVAL_PUBLIC_STATUSES.map((s) => Type.Literal(s))),
  valid_from: Day,
  valid_until: Day,
  structures: Type.Array(Type.String()),
  media_sha256: Sha256Hex,
  issued_at: Type.String({ format: 'date-time' }),
  revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  manifest_sha256: Type.Union([Sha256Hex, Type.Null()]),
  manifest: Type.Union([ApprovalManifest, Type.Null()]),
  ledger: Type.Object({
    approval: Type.Union([LedgerInfo, Type.Null()]),
    revocation: Type.Union([LedgerInfo, Type.Null()]),
  }),
});
export type ApprovalPublicStatus = Static<typeof ApprovalPublicStatus>;

/** GET /v1/ledger/witnesses: the ledger's checkpoint key, the witnesses it submits to and how far each has cosigned. */
export const LedgerWitnesses = Type.Object({
  origin: Type.String(),
  /** The ledger key as a C2SP vkey (type 0x01): it signs every checkpoint. */
  ledger_vkey: Type.String(),
  quorum: Type.Integer({ minimum: 0 }),
  checkpoint: Type.Union([
    Type.Object({
      size: Type.Integer({ minimum: 1 }),
      /** The newest anchored block height, or null. */
      anchored_size: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
      url: Type.String(),
    }),
    Type.Null(),
  ]),
  witnesses: Type.Array(
    Type.Object({
      name: Type.String(),
      vkey: Type.String(),
      url: Type.String(),
      cosigned_size: Type.Integer({ minimum: 0 }),
      last_cosigned_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
      /** ok: cosigned the newest checkpoint; behind: not yet; failing: its last submission failed. */
      state: Type.Union([Type.Literal('ok'), Type.Literal('behind'), Type.Literal('failing')]),
    }),
  ),
});
export type LedgerWitnesses = Static<typeof LedgerWitnesses>;
