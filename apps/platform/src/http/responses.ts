import { ProblemDocumentSchema } from '@ooh/protocol';
import { type TSchema, Type } from '@sinclair/typebox';
import type { RouteOptions } from 'fastify';

/**
 * The problem document as it is written (spec: "default: an error as a problem document"). `code` is a plain
 * string here: the schema serializes, and a union of every code would be checked branch by branch on each answer
 * (ProblemDocumentSchema, which lists them, is the one to validate a document against).
 */
export const ProblemResponse = Type.Object({ ...ProblemDocumentSchema.properties, code: Type.String() });

/** `X or null`. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** `{ items: [...] }`, the shape of every list answer. */
export const ItemsOf = <T extends TSchema>(item: T) => Type.Object({ items: Type.Array(item) });

/** An answer without a body (204, a redirect). */
export const NoBody = Type.Null({ description: 'no body' });

/** A body sent as text bytes of its own type (a PEM file, a CSV file, an HTML page): not serialized. */
export const TextBody = (mediaType: string) => Type.String({ contentMediaType: mediaType });

/**
 * Every route answers its refusals and failures as problem documents: 4xx and 5xx get the problem schema unless
 * the route gave its own, so no field beyond the problem document's can leave in an error answer. Called from an
 * onRoute hook of every host (src/http/server.ts).
 */
export function attachProblemResponses(route: RouteOptions): void {
  const schema = (route.schema ?? {}) as { response?: Record<string, TSchema> };
  route.schema = {
    ...schema,
    response: { '4xx': ProblemResponse, '5xx': ProblemResponse, ...schema.response },
  };
}

/** The statuses a route declared a response schema for, problem statuses (4xx, 5xx) left out. */
export function successStatuses(schema: unknown): string[] {
  const response = (schema as { response?: Record<string, unknown> } | undefined)?.response ?? {};
  return Object.keys(response).filter((status) => !/^[45]/.test(status));
}
