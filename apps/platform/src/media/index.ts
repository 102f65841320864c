export { MediaError, type MediaErrorCode } from './errors.js';
export { isMediaType, MEDIA_TYPES, type MediaFacts, type MediaType, probeMedia } from './probe.js';
export { type ReleaseOutcome, releaseMedia } from './release.js';
export { lockMediaHash } from './repository.js';
export { discardUpload, keepUpload, mediaDir, mediaPath, type ReceivedFile, receiveUpload } from './store.js';
