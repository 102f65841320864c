import type { FieldError } from '@ooh/protocol';
import type { PlatformContext } from '../context.js';
import { type Db, type DbClient, isUniqueViolation, withTransaction } from '../db/pool.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { notFound } from '../shared/ids.js';
import { STRUCTURE_COLUMNS, type StructureRow, structureView } from './repository.js';
import { type StructureIdentifiersPatch, venueTypeErrors } from './schema.js';

/** The screen identifiers, each unique among structures not retired (migration 075). */
export const SCREEN_ID_FIELDS = ['openooh_screen_id', 'geopath_spot_id'] as const;
type ScreenIdField = (typeof SCREEN_ID_FIELDS)[number];
const UNIQUE_INDEX: Record<ScreenIdField, string> = {
  openooh_screen_id: 'structures_openooh_screen_id',
  geopath_spot_id: 'structures_geopath_spot_id',
};

/**
 * Screen identifiers already held by another active structure: one screen is one structure. `prefix` is the row's
 * JSON pointer; `except` the structure being edited.
 */
export async function screenIdErrors(
  db: Db | DbClient,
  ids: { openooh_screen_id?: string | null; geopath_spot_id?: string | null },
  prefix = '',
  except: string | null = null,
): Promise<FieldError[]> {
  const errors: FieldError[] = [];
  for (const field of SCREEN_ID_FIELDS) {
    const value = ids[field];
    if (value === undefined || value === null) continue;
    const { rows } = await db.query<{ code: string }>(
      `SELECT code FROM structures
        WHERE ${field} = $1 AND retired_at IS NULL AND ($2::uuid IS NULL OR id <> $2)`,
      [value, except],
    );
    if (rows[0]) {
      errors.push({
        path: `${prefix}/${field}`,
        code: 'duplicate',
        message: `${field} ${value} is held by structure ${rows[0].code}`,
      });
    }
  }
  return errors;
}

/** A unique index of a screen identifier violated by a concurrent writer, as the field error it is. */
export function screenIdViolation(error: unknown, prefix = ''): FieldError | null {
  for (const field of SCREEN_ID_FIELDS) {
    if (isUniqueViolation(error, UNIQUE_INDEX[field])) {
      return { path: `${prefix}/${field}`, code: 'duplicate', message: `${field} was taken meanwhile` };
    }
  }
  return null;
}

/**
 * PATCH /api/v1/console/structures/{id}: the venue type and the screen identifiers of one structure.
 *
 * Screen identifiers are set, changed and cleared (null) freely: they are other systems' names of the screen, and
 * those get corrected. The venue type is immutable once set (issue 20: "numeric, immutable"), with one way out for a
 * mistake: while no submission or approval names the structure, nothing has relied on it and it may still be
 * corrected or cleared. After that a change is a field error `immutable`; a structure that really is of another
 * venue type is retired and registered again under a new code (its screen identifiers are free again once it is
 * retired). A retired structure is not edited (409 state_conflict). Sending the value already stored is no change.
 */
export async function patchIdentifiers(
  ctx: Pick<PlatformContext, 'db'>,
  id: string,
  patch: StructureIdentifiersPatch,
) {
  return withTransaction(ctx.db, async (client) => {
    const { rows } = await client.query<StructureRow>(
      `SELECT ${STRUCTURE_COLUMNS} FROM structures WHERE id = $1 FOR UPDATE`,
      [id],
    );
    const current = rows[0];
    if (!current) throw notFound('structure', id);
    if (current.retired_at) {
      throw new ProblemError(
        'state_conflict',
        `structure ${current.code} is retired; its identifiers are kept as they were`,
      );
    }
    const errors: FieldError[] = [...venueTypeErrors(patch.venue_type_id)];
    const venueChanges = patch.venue_type_id !== undefined && patch.venue_type_id !== current.venue_type_id;
    if (venueChanges && current.venue_type_id !== null && errors.length === 0) {
      const { rows: used } = await client.query<{ used: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM submission_structures WHERE structure_id = $1)
             OR EXISTS (SELECT 1 FROM approval_structures WHERE structure_id = $1) AS used`,
        [id],
      );
      if (used[0]!.used) {
        errors.push({
          path: '/venue_type_id',
          code: 'immutable',
          message: `venue type ${current.venue_type_id} of structure ${current.code} is fixed: a submission or approval names the structure`,
        });
      }
    }
    errors.push(...(await screenIdErrors(client, patch, '', id)));
    if (errors.length > 0) throw validationFailed(errors);
    const next = {
      venue_type_id: patch.venue_type_id === undefined ? current.venue_type_id : patch.venue_type_id,
      openooh_screen_id:
        patch.openooh_screen_id === undefined ? current.openooh_screen_id : patch.openooh_screen_id,
      geopath_spot_id: patch.geopath_spot_id === undefined ? current.geopath_spot_id : patch.geopath_spot_id,
    };
    try {
      const { rows: updated } = await client.query<StructureRow>(
        `UPDATE structures SET venue_type_id = $2, openooh_screen_id = $3, geopath_spot_id = $4
          WHERE id = $1 RETURNING ${STRUCTURE_COLUMNS}`,
        [id, next.venue_type_id, next.openooh_screen_id, next.geopath_spot_id],
      );
      return structureView(updated[0]!);
    } catch (error) {
      const fieldError = screenIdViolation(error);
      if (fieldError) throw validationFailed([fieldError]);
      // The database's own rule (migration 075) caught a submission that named the structure meanwhile.
      if ((error as { code?: string }).code === '23514' && /immutable/.test(String(error))) {
        throw validationFailed([
          {
            path: '/venue_type_id',
            code: 'immutable',
            message: 'a submission named the structure meanwhile',
          },
        ]);
      }
      throw error;
    }
  });
}
