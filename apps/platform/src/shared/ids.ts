import { ProblemError } from '../http/problem.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (value: unknown): value is string => typeof value === 'string' && UUID.test(value);

/** A path id that is not a uuid names nothing: 404 not_found, like an id that does not exist. */
export function pathUuid(value: string | undefined, what: string): string {
  if (!isUuid(value)) throw new ProblemError('not_found', `${what} ${value ?? ''} does not exist`);
  return value.toLowerCase();
}

export function notFound(what: string, id: string): ProblemError {
  return new ProblemError('not_found', `${what} ${id} does not exist or is not visible to you`);
}
