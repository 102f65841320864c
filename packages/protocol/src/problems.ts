import { Type } from '@sinclair/typebox';

/**
 * Problem documents (spec "Errors"): "Problem documents use media type application/problem+json with a stable
 * code." One registry maps each code to its HTTP status; callers and tests rely on the code, never on the title.
 */
export const PROBLEM_MEDIA_TYPE = 'application/problem+json';

/** Prefix of a problem document's `type`; the full value is `urn:ooh:problem:<code>`. */
export const PROBLEM_TYPE_PREFIX = 'urn:ooh:problem:';

const REGISTRY = {
  // spec: "400 invalid_json; schema_unknown: body is not JSON; schema unknown (agent channel)"
  invalid_json: { status: 400, title: 'Body is not JSON' },
  schema_unknown: { status: 400, title: 'Unknown batch schema' },
  // spec: "401 unauthenticated, session_expired, invalid_api_key: no valid session or API key"
  unauthenticated: { status: 401, title: 'Authentication required' },
  session_expired: { status: 401, title: 'Session expired' },
  invalid_api_key: { status: 401, title: 'Invalid API key' },
  // spec: "401 bad_signature: signature does not verify; nothing stored"
  bad_signature: { status: 401, title: 'Signature does not verify' },
  // spec: "401 device_unauthorized: device unknown or revoked"
  device_unauthorized: { status: 401, title: 'Device unknown or revoked' },
  // spec: "401 stale_request: ts out of range (agent channel)"
  stale_request: { status: 401, title: 'Request time out of range' },
  // spec: "401 source_unauthorized: rotated-out CMS key after its 24 hours"
  source_unauthorized: { status: 401, title: 'CMS source not authorised' },
  // Not in the spec: X-Service-Source names no CMS installation of the caller's organisation (unknown, or another
  // organisation's: the answer does not tell which). source_unauthorized keeps its one meaning, the rotated-out key.
  source_unknown: { status: 401, title: 'CMS installation unknown' },
  // spec: "403 forbidden, key_scope_denied, key_route_denied: role or key scope does not allow the call"
  forbidden: { status: 403, title: 'Role does not allow this call' },
  key_scope_denied: { status: 403, title: 'Key scope does not allow this call' },
  key_route_denied: { status: 403, title: 'Key may not call this route' },
  // spec: "404 not_published: open data switched off"
  not_published: { status: 404, title: 'Not published' },
  // spec: "404 not_found: month or file not published or not existing (open data); seal nothing there or not visible"
  not_found: { status: 404, title: 'Not found' },
  // spec: "409 batch_conflict: batch_seq already taken by a batch with other content"
  batch_conflict: { status: 409, title: 'Batch number taken by other content' },
  // spec: "409 legacy_after_pop: batch in the earlier format from a device that has had a service.pop/1 batch accepted"
  legacy_after_pop: { status: 409, title: 'Earlier batch format no longer accepted from this device' },
  // spec: "409 renewal_refused: renewal not due, not the newest certificate, or the key already held"
  renewal_refused: { status: 409, title: 'Renewal refused' },
  // spec: "413 body_too_large, batch_too_large: body over size limits or too many events/records"
  body_too_large: { status: 413, title: 'Body too large' },
  batch_too_large: { status: 413, title: 'Too many events or records' },
  // spec: "415 unsupported_media_type: not JSON, or an encoding other than gzip (CMS channel)"
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  // spec: "422 validation_failed: field errors"
  validation_failed: { status: 422, title: 'Validation failed' },
  // spec: "429 rate_limited: rate limit exceeded; Retry-After gives seconds to wait"
  rate_limited: { status: 429, title: 'Rate limit exceeded' },
  // Not in the spec's table; the platform needs them. spec: "default: an error as a problem document".
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  state_conflict: { status: 409, title: 'Not allowed in the current state' },
  internal_error: { status: 500, title: 'Internal error' },
  service_unavailable: { status: 503, title: 'Service unavailable' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ProblemCode = keyof typeof REGISTRY;

export const PROBLEMS: Readonly<Record<ProblemCode, { readonly status: number; readonly title: string }>> =
  Object.freeze(REGISTRY);

export const PROBLEM_CODES: readonly ProblemCode[] = Object.freeze(Object.keys(REGISTRY) as ProblemCode[]);

export function isProblemCode(value: unknown): value is ProblemCode {
  return typeof value === 'string' && Object.hasOwn(REGISTRY, value);
}

/** One field error of a 422 answer. `path` is a JSON pointer into the body, e.g. '/external_refs/crid'. */
export interface FieldError {
  path: string;
  code: string;
  message: string;
}

export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  code: ProblemCode;
  detail?: string;
  errors?: FieldError[];
}

export function problemDocument(code: ProblemCode, detail?: string, errors?: FieldError[]): ProblemDocument {
  const { status, title } = PROBLEMS[code];
  const document: ProblemDocument = { type: PROBLEM_TYPE_PREFIX + code, title, status, code };
  if (detail !== undefined) document.detail = detail;
  if (errors !== undefined) document.errors = errors;
  return document;
}

export const FieldErrorSchema = Type.Object({
  path: Type.String(),
  code: Type.String(),
  message: Type.String(),
});

/** Response schema of every problem document (spec: "default: an error as a problem document"). */
export const ProblemDocumentSchema = Type.Object({
  type: Type.String(),
  title: Type.String(),
  status: Type.Integer({ minimum: 100, maximum: 599 }),
  code: Type.Union(PROBLEM_CODES.map((code) => Type.Literal(code))),
  detail: Type.Optional(Type.String()),
  errors: Type.Optional(Type.Array(FieldErrorSchema)),
});

/**
 * A refusal as a value: thrown by handlers, turned into a problem document by one error handler.
 * `retryAfterSeconds` is set on rate_limited (spec: "Retry-After gives seconds to wait").
 */
export class ProblemError extends Error {
  readonly code: ProblemCode;
  readonly status: number;
  readonly detail: string | undefined;
  readonly errors: FieldError[] | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(
    code: ProblemCode,
    detail?: string,
    options?: { errors?: FieldError[]; retryAfterSeconds?: number; cause?: unknown },
  ) {
    super(
      detail ?? PROBLEMS[code].title,
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
    this.name = 'ProblemError';
    this.code = code;
    this.status = PROBLEMS[code].status;
    this.detail = detail;
    this.errors = options?.errors;
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }

  toDocument(): ProblemDocument {
    return problemDocument(this.code, this.detail, this.errors);
  }
}
