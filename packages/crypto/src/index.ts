// @ooh/crypto: the project's cryptography. No I/O, no clock of its own (times are arguments).
// Keys are node:crypto KeyObjects.

export {
  base64Decode,
  base64Encode,
  base64urlDecode,
  base64urlEncode,
  bytesEqual,
  hexDecode,
  hexEncode,
  sha256,
  sha256Hex,
} from './bytes.js';
export { type CmsVerifyResult, cmsSign, cmsVerify } from './cms.js';
export { CryptoError, type CryptoErrorCode, isCryptoError } from './errors.js';
export {
  es256Sign,
  es256Verify,
  exportPrivateKeyPem,
  exportPublicKeyPem,
  exportPublicKeySpki,
  generateEs256KeyPair,
  importPrivateKey,
  importPublicKey,
  publicKeyFingerprint,
  publicKeySpkiDer,
} from './es256.js';
export { type CanonicalizeOptions, canonicalBytes, canonicalize } from './jcs.js';
export {
  expectedSides,
  hashChildren,
  inclusionPath,
  merkleRoot,
  type ProofSide,
  type ProofStep,
  verifyInclusion,
} from './merkle.js';
export {
  createTimeStampRequest,
  parseTimeStampResponse,
  readTimeStampToken,
  type TimeStampInfo,
  type TimeStampRequest,
  type TimeStampResponse,
  type TimeStampTokenClaims,
  type TimeStampVerifyResult,
  timeStampReply,
  verifyTimeStampToken,
} from './tsp.js';
export {
  type CertificateInfo,
  type CertificateUsage,
  type ChainResult,
  type CsrInfo,
  certificateFingerprint,
  createCsr,
  createIntermediateCa,
  createRootCa,
  issueCertificate,
  parseCsr,
  randomSerialHex,
  readCertificate,
  splitPemChain,
  verifyChain,
} from './x509.js';
