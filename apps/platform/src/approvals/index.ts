export { APPROVAL_NUMBER_PATTERN, approvalNumber } from './decisions.js';
export { documentText, envelopeUrl, manifestSha256, type SignedDocument, signDocument } from './envelope.js';
export { lookupCreatives, type Viewer } from './lookup.js';
export { latestRevocationListText } from './revocations.js';
export { approvalsFeature, createApprovalsFeature } from './routes.js';
export { type ApprovalSettings, approvalSettings, DEFAULT_SETTINGS, SETTINGS_ENV } from './settings.js';
