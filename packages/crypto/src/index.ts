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
  sha256HexAsync,
} from './bytes.js';
export { cmsSign } from './cms.js';
export { CryptoError, type CryptoErrorCode, isCryptoError } from './errors.js';
export {
  es256Sign,
  es256Verify,
  es256VerifyAsync,
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
  type TimeStampRequest,
  type TimeStampResponse,
  type TimeStampTokenClaims,
  timeStampReply,
} from './tsp.js';
export {
  type CertificateInfo,
  type CertificateUsage,
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
} from './x509.js';
