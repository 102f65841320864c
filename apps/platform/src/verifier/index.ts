export { type CliIo, main } from './cli.js';
export { type CheckLine, describeCheck, type LineKind, lineKind, reportLines } from './messages.js';
export { httpSource, type PublicSource, SourceError } from './source.js';
export { checkBlockTimestamp, type TimestampChecker, timestampChecker, tsaPemProblem } from './timestamps.js';
export { type SealCheck, type VerifyReport, type VerifySealOptions, verifySeal } from './verify-seal.js';
export { type VerifyApprovalOptions, verifyApproval } from './verify-approval.js';
