import { Type } from '@sinclair/typebox';
import type { FieldError } from '@ooh/protocol';
import { type VenueTaxonomy, venueTaxonomy } from './venue-taxonomy.js';

/*
 * The fields of a structure, one definition for the single create (POST /api/v1/console/structures) and for every
 * row of an import (POST /api/v1/console/structures/import): a row is judged by exactly the rules of the single
 * create.
 */

/*
 * The venue type and screen identifiers (issue 20 item 3), optional on a create and a row of an import, and the
 * fields of PATCH /api/v1/console/structures/{id} (null there clears an identifier).
 * - venue_type_id: an OpenOOH Venue Taxonomy 1.2 enumeration id, checked against the shipped taxonomy
 *   (venueTypeErrors). The largest id of the taxonomy has five digits (grandchildren such as 10101).
 * - openooh_screen_id: OpenOOH's screen-id proposal names a screen as a reverse-DNS publisher id and the publisher's
 *   own id (`com.publisher.screen123`), "perhaps 128 character limit": printable, no spaces, up to 128.
 * - geopath_spot_id: Geopath's spot (frame) ids are integers; kept as text of up to 18 digits, never a number, so a
 *   leading zero or a large id is kept as written.
 */
const VenueTypeId = Type.Integer({ minimum: 1, maximum: 99_999 });
const OpenOohScreenId = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._:/-]*$',
});
const GeopathSpotId = Type.String({ minLength: 1, maxLength: 18, pattern: '^[0-9]+$' });

const identifierFields = {
  venue_type_id: Type.Optional(VenueTypeId),
  openooh_screen_id: Type.Optional(OpenOohScreenId),
  geopath_spot_id: Type.Optional(GeopathSpotId),
};

export interface StructureIdentifiers {
  venue_type_id?: number;
  openooh_screen_id?: string;
  geopath_spot_id?: string;
}

/** PATCH /api/v1/console/structures/{id}: the identifiers only; a field left out is unchanged, null clears it. */
export const StructureIdentifiersPatch = Type.Object(
  {
    venue_type_id: Type.Optional(Type.Union([VenueTypeId, Type.Null()])),
    openooh_screen_id: Type.Optional(Type.Union([OpenOohScreenId, Type.Null()])),
    geopath_spot_id: Type.Optional(Type.Union([GeopathSpotId, Type.Null()])),
  },
  { additionalProperties: false, minProperties: 1 },
);
export interface StructureIdentifiersPatch {
  venue_type_id?: number | null;
  openooh_screen_id?: string | null;
  geopath_spot_id?: string | null;
}

const Word = Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-z0-9][a-z0-9_-]*$' });

export const structureFields = {
  code: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' }),
  district: Word,
  format: Word,
  address: Type.Optional(Type.String({ maxLength: 500 })),
  lat: Type.Optional(Type.Number({ minimum: -90, maximum: 90 })),
  lon: Type.Optional(Type.Number({ minimum: -180, maximum: 180 })),
  ...identifierFields,
};

export interface StructureFields extends StructureIdentifiers {
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

/**
 * The venue type must be in the shipped taxonomy, and not one it deprecates (OpenOOH 1.2 marks 104, 810 and the
 * grandchildren of 301 deprecated, each with a replacement named in its definition).
 */
export function venueTypeErrors(
  venueTypeId: number | null | undefined,
  prefix = '',
  taxonomy: VenueTaxonomy = venueTaxonomy(),
): FieldError[] {
  if (venueTypeId === null || venueTypeId === undefined) return [];
  const venue = taxonomy.get(venueTypeId);
  const path = `${prefix}/venue_type_id`;
  if (!venue) {
    return [
      {
        path,
        code: 'not_found',
        message: `no venue type ${venueTypeId} in the OpenOOH Venue Taxonomy ${taxonomy.version}`,
      },
    ];
  }
  if (venue.deprecated) {
    return [
      {
        path,
        code: 'not_allowed',
        message:
          `venue type ${venueTypeId} (${venue.name}) is deprecated in OpenOOH ${taxonomy.version}: ${venue.definition ?? ''}`.trim(),
      },
    ];
  }
  return [];
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
