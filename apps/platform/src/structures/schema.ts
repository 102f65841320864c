import { Type } from '@sinclair/typebox';
import type { FieldError } from '@ooh/protocol';

/*
 * The fields of a structure, one definition for the single create (POST /api/v1/console/structures) and for every
 * row of an import (POST /api/v1/console/structures/import): a row is judged by exactly the rules of the single
 * create.
 */

const Word = Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-z0-9][a-z0-9_-]*$' });

export const structureFields = {
  code: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' }),
  district: Word,
  format: Word,
  address: Type.Optional(Type.String({ maxLength: 500 })),
  lat: Type.Optional(Type.Number({ minimum: -90, maximum: 90 })),
  lon: Type.Optional(Type.Number({ minimum: -180, maximum: 180 })),
};

export interface StructureFields {
  code: string;
  district: string;
  format: string;
  address?: string;
  lat?: number;
  lon?: number;
}

export const StructureBody = Type.Object(
  { organisation_id: Type.String({ format: 'uuid' }), ...structureFields },
  { additionalProperties: false },
);
export type StructureBody = StructureFields & { organisation_id: string };

/** One row of an import: the single create's fields without the organisation, which the import names once. */
export const StructureRow = Type.Object(structureFields, { additionalProperties: false });

/** Most rows in one import: a city's register of one operator is a few hundred; larger files are split. */
export const STRUCTURE_IMPORT_MAX_ROWS = 2000;
/** The largest import body: 2000 rows of the longest fields (a 500-character address in Cyrillic) fit. */
export const STRUCTURE_IMPORT_MAX_BYTES = 4 * 1024 * 1024;

export const StructureImportBody = Type.Object(
  {
    organisation_id: Type.String({ format: 'uuid' }),
    // Rows are judged one by one in the handler (collectFieldErrors), so every row's errors come in one answer
    // rather than only the schema errors first.
    structures: Type.Array(Type.Unknown(), { minItems: 1, maxItems: STRUCTURE_IMPORT_MAX_ROWS }),
    dry_run: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export interface StructureImportBody {
  organisation_id: string;
  structures: unknown[];
  dry_run?: boolean;
}

/** The rule beyond the schema: a position is both coordinates or neither. `prefix` is the row's JSON pointer. */
export function coordinateErrors(row: { lat?: number; lon?: number }, prefix = ''): FieldError[] {
  if ((row.lat === undefined) === (row.lon === undefined)) return [];
  return [
    {
      path: `${prefix}${row.lat === undefined ? '/lat' : '/lon'}`,
      code: 'required',
      message: 'give lat and lon together',
    },
  ];
}
