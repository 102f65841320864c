export {
  type BlockLeaf,
  blockDigest,
  blockLeaves,
  digestEndedLedgerDays,
  digestLedgerDay,
  digestLedgerUpTo,
  LEDGER_GRACE_MS,
  LedgerError,
  type LedgerErrorCode,
  ledgerInfoOfLeaf,
  ledgerLeafHash,
  ZERO_SHA256,
} from './digest.js';
export {
  type LedgerLeafInput,
  type LedgerLeafObject,
  type LedgerLeafRow,
  ledgerLeafObject,
  ledgerLeavesOfDay,
  recordLedgerLeaf,
} from './leaves.js';
export { type BlockRow, findBlock, lastBlock } from './repository.js';
export { createLedgerFeature, type LedgerOptions, ledgerFeature } from './routes.js';
export {
  APPROVAL_PUBLIC_STATUSES,
  type ApprovalPublicState,
  ApprovalPublicStatus,
  LedgerBlock,
  LedgerBlockHead,
} from './schema.js';
