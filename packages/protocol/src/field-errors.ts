import type { TSchema } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import { type ValueError, ValueErrorType } from '@sinclair/typebox/errors';
import type { FieldError } from './problems.js';

/*
 * Field errors of a 422 validation_failed answer, from either validator the project uses: Fastify's ajv (route
 * schemas) or TypeBox's compiled checks. One error per path, the first one found, so a nullable field that fails
 * its format is reported once as 'format' rather than also as 'type' and 'invalid'.
 */

/** The fields of an ajv ErrorObject this mapping reads (Fastify puts them on `error.validation`). */
export interface AjvErrorLike {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
}

function escapePointerToken(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

const AJV_CODES: Record<string, string> = {
  required: 'required',
  additionalProperties: 'unknown_key',
  maxLength: 'too_long',
  minLength: 'too_short',
  maxItems: 'too_many',
  minItems: 'too_few',
  pattern: 'pattern',
  format: 'format',
  const: 'not_allowed',
  enum: 'not_allowed',
  type: 'type',
  minimum: 'out_of_range',
  maximum: 'out_of_range',
  exclusiveMinimum: 'out_of_range',
  exclusiveMaximum: 'out_of_range',
  multipleOf: 'out_of_range',
};

function firstPerPath(errors: Iterable<FieldError>): FieldError[] {
  const byPath = new Map<string, FieldError>();
  for (const error of errors) if (!byPath.has(error.path)) byPath.set(error.path, error);
  return [...byPath.values()];
}

export function fieldErrorsFromAjv(errors: readonly AjvErrorLike[]): FieldError[] {
  return firstPerPath(
    errors.map((error) => {
      let path = error.instancePath;
      if (error.keyword === 'required' && typeof error.params.missingProperty === 'string') {
        path += '/' + escapePointerToken(error.params.missingProperty);
      } else if (
        error.keyword === 'additionalProperties' &&
        typeof error.params.additionalProperty === 'string'
      ) {
        path += '/' + escapePointerToken(error.params.additionalProperty);
      }
      return { path, code: AJV_CODES[error.keyword] ?? 'invalid', message: error.message ?? error.keyword };
    }),
  );
}

function typeBoxCode(error: ValueError): string {
  switch (error.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return 'required';
    case ValueErrorType.ObjectAdditionalProperties:
      return 'unknown_key';
    case ValueErrorType.StringMaxLength:
      return 'too_long';
    case ValueErrorType.StringMinLength:
      return 'too_short';
    case ValueErrorType.ArrayMaxItems:
      return 'too_many';
    case ValueErrorType.ArrayMinItems:
      return 'too_few';
    case ValueErrorType.StringPattern:
      return 'pattern';
    case ValueErrorType.StringFormat:
    case ValueErrorType.StringFormatUnknown:
      return 'format';
    case ValueErrorType.Literal:
      return 'not_allowed';
    case ValueErrorType.IntegerMaximum:
    case ValueErrorType.IntegerMinimum:
    case ValueErrorType.IntegerExclusiveMaximum:
    case ValueErrorType.IntegerExclusiveMinimum:
    case ValueErrorType.NumberMaximum:
    case ValueErrorType.NumberMinimum:
    case ValueErrorType.NumberExclusiveMaximum:
    case ValueErrorType.NumberExclusiveMinimum:
      return 'out_of_range';
    case ValueErrorType.Union: {
      // A union of literals is a closed word list.
      const branches = (error.schema as { anyOf?: { const?: unknown }[] }).anyOf ?? [];
      return branches.length > 0 && branches.every((branch) => branch.const !== undefined)
        ? 'not_allowed'
        : 'invalid';
    }
    case ValueErrorType.String:
    case ValueErrorType.Integer:
    case ValueErrorType.Number:
    case ValueErrorType.Boolean:
    case ValueErrorType.Object:
    case ValueErrorType.Array:
    case ValueErrorType.Null:
      return 'type';
    default:
      return 'invalid';
  }
}

const compiled = new WeakMap<TSchema, TypeCheck<TSchema>>();

/** Compiled check of a schema, compiled once per schema object. */
export function compiledCheck<T extends TSchema>(schema: T): TypeCheck<T> {
  let check = compiled.get(schema);
  if (check === undefined) {
    check = TypeCompiler.Compile(schema);
    compiled.set(schema, check);
  }
  return check as TypeCheck<T>;
}

/** Every field error of `value` against `schema` (empty when it is valid). */
export function collectFieldErrors(schema: TSchema, value: unknown): FieldError[] {
  const check = compiledCheck(schema);
  if (check.Check(value)) return [];
  const errors: FieldError[] = [];
  for (const error of check.Errors(value)) {
    errors.push({ path: error.path, code: typeBoxCode(error), message: error.message });
  }
  return firstPerPath(errors);
}
