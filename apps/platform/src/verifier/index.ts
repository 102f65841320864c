export { type CliIo, main } from './cli.js';
export { httpSource, type PublicSource, SourceError } from './source.js';
export {
  type Check,
  type CheckKind,
  type VerifyReport,
  type VerifySealOptions,
  verifySeal,
} from './verify-seal.js';
export { checkCosignedCheckpoint, type CosignedCheckpoint } from './anchoring.js';
