import {
  FormatRegistry,
  type Static,
  type TLiteral,
  type TSchema,
  type TUnion,
  Type,
} from '@sinclair/typebox';
import { SHA256_HEX_PATTERN } from '../limits.js';
import { isCalendarDate, isDateTime, isUri, isUuid } from '../time-formats.js';

// TypeBox's compiled checks know no format until one is registered; Fastify's ajv gets the same names from
// ajv-formats. Registration is idempotent so that several copies of this module can coexist.
const FORMATS: Record<string, (value: string) => boolean> = {
  date: isCalendarDate,
  'date-time': isDateTime,
  uuid: isUuid,
  uri: isUri,
};
for (const [name, check] of Object.entries(FORMATS)) {
  if (!FormatRegistry.Has(name)) FormatRegistry.Set(name, check);
}

/** `X or null` of the spec's tables. */
export function Nullable<T extends TSchema>(schema: T) {
  return Type.Union([schema, Type.Null()]);
}

export const Uuid = Type.String({ format: 'uuid' });
/** spec: "Date fields are YYYY-MM-DD". */
export const CalendarDate = Type.String({ format: 'date' });
/** spec: "date-time fields are RFC 3339". */
export const DateTime = Type.String({ format: 'date-time' });
export const Sha256Hex = Type.String({ pattern: SHA256_HEX_PATTERN });

/** spec: "All texts are objects {en, ru, kk} of strings (English, Russian, Kazakh)". */
export const LocalizedText = Type.Object({ en: Type.String(), ru: Type.String(), kk: Type.String() });
export type LocalizedText = Static<typeof LocalizedText>;

type LiteralsOf<T extends readonly string[]> = { -readonly [K in keyof T]: TLiteral<T[K]> };

/** A union of string literals from a closed word list (TypeBox's compiler has no plain `enum`). */
export function StringEnum<const T extends readonly [string, string, ...string[]]>(
  values: T,
): TUnion<LiteralsOf<T>> {
  return Type.Union(values.map((value) => Type.Literal(value))) as unknown as TUnion<LiteralsOf<T>>;
}
