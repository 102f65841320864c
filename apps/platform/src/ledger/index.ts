export {
  type BlockLeaf,
  blockLeaves,
  digestEndedLedgerDays,
  digestLedgerDay,
  digestLedgerUpTo,
  LEDGER_GRACE_MS,
  LedgerError,
  type LedgerErrorCode,
  ledgerInfoOfLeaf,
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
export {
  type BlockHeader,
  type CheckpointRow,
  cosignaturesOf,
  findCheckpoint,
  makeCheckpoints,
  markAnchored,
  newestCheckpoint,
  proofLine,
  publishedNote,
} from './checkpoint.js';
export { LEDGER_KEY_ENV, type LedgerKey, ledgerKeyPath, ledgerVkey, loadLedgerKey } from './key.js';
export { LEDGER_ENV, type LedgerSettings, ledgerSettings, type WitnessConfig } from './settings.js';
export {
  addCheckpointBody,
  DEFAULT_WITNESS_INTERVAL_MS,
  fetchTransport,
  MAX_PROOF_LINES,
  runWitnessJob,
  startWitnessJob,
  type Submission,
  submitToWitness,
  WITNESS_BACKOFF,
  type WitnessRow,
  type WitnessRun,
  type WitnessTransport,
  witnessRows,
} from './witnesses.js';
export { createLedgerFeature, type LedgerOptions, ledgerFeature } from './routes.js';
export {
  APPROVAL_PUBLIC_STATUSES,
  type ApprovalPublicState,
  ApprovalPublicStatus,
  LedgerBlock,
  LedgerBlockHead,
  LedgerWitnesses,
} from './schema.js';
