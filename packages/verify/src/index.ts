// @ooh/verify: every verification rule of the project, once, on WebCrypto only (no node: import), so the same code
// checks signatures, chains, proofs and seals in Node 20+ and in the browser. Signing and issuing (the private-key
// side) are @ooh/crypto's. No clock of its own: times are arguments.

export {
  type AnchorCheck,
  type AnchorSource,
  type AnchorState,
  type AnchorTarget,
  type BlockFields,
  verifyAnchoring,
} from './anchoring.js';
export {
  type Block,
  type BlockCheck,
  type BlockCheckName,
  type BlockCheckState,
  type BlockDigestFields,
  type BlockHead,
  blockDigest,
  blockDigestInput,
  blockVerdict,
  type LedgerInfo,
  type LedgerLeafObject,
  leafHash,
  verifyBlock,
  verifyHead,
  verifyLedgerInfo,
} from './block.js';
export {
  base64Decode,
  base64Encode,
  base64urlDecode,
  bytesEqual,
  concatBytes,
  hexDecode,
  hexEncode,
  sha256,
  sha256Hex,
  toArrayBuffer,
  utf8,
} from './bytes.js';
export { type CmsOptions, type CmsResult, verifyCms } from './cms.js';
export {
  ANCHOR_REASONS,
  BATCH_CHECK_REASONS,
  BLOCK_CHECK_REASONS,
  LEDGER_PROOF_REASONS,
  SEAL_CHECK_REASONS,
  TIMESTAMP_REFUSALS,
  VERIFICATION_ERROR_CODES,
} from './codes.js';
export {
  algorithmOid,
  children,
  expectTag,
  octets,
  oidText,
  readDer,
  readTlv,
  type Tlv,
  timeValue,
} from './der.js';
export { isVerificationError, VerificationError, type VerificationErrorCode } from './errors.js';
export { type Es256PublicKey, es256Verify, importEs256PublicKey } from './es256.js';
export { type CanonicalizeOptions, canonicalBytes, canonicalize } from './jcs.js';
export {
  expectedSides,
  hashChildren,
  MerkleRootBuilder,
  merkleRoot,
  type ProofSide,
  type ProofStep,
  proofSiblings,
  rootFromProof,
  type SyncSha256,
  verifyInclusion,
} from './merkle.js';
export {
  COSIGNATURE_SKEW_SECONDS,
  type Checkpoint,
  type CosignedCheckpoint,
  checkCosignedCheckpoint,
  checkSignature,
  cosignatureMessage,
  isKeyName,
  keyIdHex,
  keyIdInput,
  type NoteSignature,
  parseCheckpoint,
  parseNote,
  parseVkey,
  readVkey,
  rootIs,
  SIG_COSIGNATURE_V1,
  SIG_ED25519,
  type SignatureState,
  signedByLedgerKey,
  type Vkey,
  type VkeyResult,
} from './note.js';
export {
  type BatchCheckName,
  type BatchExportLine,
  type Check,
  type CheckName,
  type CheckState,
  parseBatchExportLine,
  type SealCheckName,
  type SealDocument,
  type SealExpectations,
  verdictOf,
  verifySeal,
  verifySealBatches,
} from './seal.js';
export { type BodyValidator, type SignedDocumentResult, verifySignedDocument } from './signed-document.js';
export { SIGNER_ROLE_NAMES, type SignerRole, signerRoleOf } from './signer-role.js';
export { type TimestampRefusal, type TimestampResult, verifyBlockTimestamp } from './timestamp.js';
export {
  type Certificate,
  type ChainPurpose,
  type ChainResult,
  issuedBy,
  KEY_USAGE,
  keyUsageAllows,
  OID,
  parseCertificate,
  parsePem,
  parsePems,
  type ValidityWindow,
  verifyChain,
  verifySignature,
} from './x509.js';
