import { describe, expect, test } from 'vitest';
import {
  isProblemCode,
  PROBLEM_CODES,
  PROBLEM_MEDIA_TYPE,
  PROBLEMS,
  type ProblemCode,
  ProblemDocumentSchema,
  ProblemError,
  problemDocument,
} from '@ooh/protocol';
import { TypeCompiler } from '@sinclair/typebox/compiler';

// Every row of the spec's "Errors" table: status, codes.
const SPEC_ERROR_TABLE: ReadonlyArray<[number, ProblemCode[]]> = [
  [400, ['invalid_json', 'schema_unknown']],
  [401, ['unauthenticated', 'session_expired', 'invalid_api_key']],
  [401, ['bad_signature']],
  [401, ['device_unauthorized']],
  [401, ['stale_request']],
  [401, ['source_unauthorized']],
  [403, ['forbidden', 'key_scope_denied', 'key_route_denied']],
  [404, ['not_published']],
  [404, ['not_found']],
  [409, ['batch_conflict']],
  [409, ['legacy_after_pop']],
  [409, ['renewal_refused']],
  [413, ['body_too_large', 'batch_too_large']],
  [415, ['unsupported_media_type']],
  [422, ['validation_failed']],
  [429, ['rate_limited']],
];

// Codes the contract adds for the platform.
const EXTRA_CODES: ReadonlyArray<[ProblemCode, number]> = [
  ['method_not_allowed', 405],
  ['source_unknown', 401],
  ['state_conflict', 409],
  ['internal_error', 500],
  ['service_unavailable', 503],
];

describe('problem registry', () => {
  test.each(
    SPEC_ERROR_TABLE.flatMap(([status, codes]) => codes.map((code) => [code, status] as const)),
  )('spec row %s has status %i', (code, status) => {
    expect(PROBLEM_CODES).toContain(code);
    expect(PROBLEMS[code].status).toBe(status);
    expect(PROBLEMS[code].title.length).toBeGreaterThan(0);
  });

  test.each(EXTRA_CODES)('extra code %s has status %i', (code, status) => {
    expect(PROBLEMS[code].status).toBe(status);
  });

  test('the registry holds exactly the spec codes and the extra codes', () => {
    const expected = [
      ...SPEC_ERROR_TABLE.flatMap(([, codes]) => codes),
      ...EXTRA_CODES.map(([code]) => code),
    ];
    expect([...PROBLEM_CODES].sort()).toEqual([...expected].sort());
    expect(Object.keys(PROBLEMS).sort()).toEqual([...expected].sort());
  });

  test('media type', () => {
    expect(PROBLEM_MEDIA_TYPE).toBe('application/problem+json');
  });

  test('isProblemCode accepts registry codes only', () => {
    expect(isProblemCode('batch_conflict')).toBe(true);
    expect(isProblemCode('toString')).toBe(false);
    expect(isProblemCode('nope')).toBe(false);
    expect(isProblemCode(422)).toBe(false);
  });
});

describe('problemDocument', () => {
  const check = TypeCompiler.Compile(ProblemDocumentSchema);

  test('carries type, title, status and code; leaves out what is not given', () => {
    const document = problemDocument('batch_conflict');
    expect(document).toEqual({
      type: 'urn:ooh:problem:batch_conflict',
      title: PROBLEMS.batch_conflict.title,
      status: 409,
      code: 'batch_conflict',
    });
    expect(Object.hasOwn(document, 'detail')).toBe(false);
    expect(Object.hasOwn(document, 'errors')).toBe(false);
    expect(check.Check(document)).toBe(true);
  });

  test('with detail and field errors', () => {
    const errors = [{ path: '/external_refs/foo', code: 'unknown_key', message: 'unknown key' }];
    const document = problemDocument('validation_failed', 'field errors', errors);
    expect(document.status).toBe(422);
    expect(document.detail).toBe('field errors');
    expect(document.errors).toEqual(errors);
    expect(check.Check(document)).toBe(true);
  });

  test('every code gives a document the schema accepts', () => {
    for (const code of PROBLEM_CODES) expect(check.Check(problemDocument(code, 'x'))).toBe(true);
  });

  test('the schema refuses a code outside the registry', () => {
    expect(check.Check({ ...problemDocument('not_found'), code: 'gone' })).toBe(false);
  });
});

describe('ProblemError', () => {
  test('is an Error with code, status and cause', () => {
    const cause = new Error('db down');
    const error = new ProblemError('rate_limited', 'slow down', { retryAfterSeconds: 7, cause });
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe('rate_limited');
    expect(error.status).toBe(429);
    expect(error.retryAfterSeconds).toBe(7);
    expect(error.cause).toBe(cause);
    expect(error.toDocument()).toEqual(problemDocument('rate_limited', 'slow down'));
  });
});
