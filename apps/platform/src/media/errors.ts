export type MediaErrorCode = 'too_large' | 'content_mismatch' | 'unsupported_type';

/** A refused upload: too large (413), of another media type (415), or not what its type says (422). */
export class MediaError extends Error {
  constructor(
    readonly code: MediaErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'MediaError';
  }
}
