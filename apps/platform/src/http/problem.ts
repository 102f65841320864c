import { type FieldError, PROBLEM_MEDIA_TYPE, type ProblemCode, problemDocument } from '@ooh/protocol';
import type { FastifyReply } from 'fastify';

/**
 * An error that is an answer: thrown anywhere in a route, the error handler
 * turns it into the problem document of its code (STYLE.md practice 3).
 */
export class ProblemError extends Error {
  readonly code: ProblemCode;
  readonly detail: string | undefined;
  readonly errors: FieldError[] | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(
    code: ProblemCode,
    detail?: string,
    options: { errors?: FieldError[]; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(detail ?? code, { cause: options.cause });
    this.name = 'ProblemError';
    this.code = code;
    this.detail = detail;
    this.errors = options.errors;
    this.headers = options.headers;
  }
}

export function validationFailed(errors: FieldError[], detail?: string): ProblemError {
  return new ProblemError('validation_failed', detail ?? `${errors.length} field error(s)`, { errors });
}

/**
 * At most this many field errors are listed in one answer. A body of 400,000 bad ids had one error each, and its
 * 0.8 MB asked for a 30 MB answer; the first hundred tell a sender what to fix as well.
 */
export const MAX_LISTED_FIELD_ERRORS = 100;

export function sendProblem(
  reply: FastifyReply,
  code: ProblemCode,
  detail?: string,
  errors?: FieldError[],
  headers?: Record<string, string>,
): FastifyReply {
  const cut = errors !== undefined && errors.length > MAX_LISTED_FIELD_ERRORS;
  const doc = cut
    ? problemDocument(
        code,
        `${detail ?? code} (the first ${MAX_LISTED_FIELD_ERRORS} of ${errors.length} are listed)`,
        errors.slice(0, MAX_LISTED_FIELD_ERRORS),
      )
    : problemDocument(code, detail, errors);
  if (headers) reply.headers(headers);
  return reply.code(doc.status).type(PROBLEM_MEDIA_TYPE).send(doc);
}
