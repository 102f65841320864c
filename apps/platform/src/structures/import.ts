import { collectFieldErrors, type FieldError } from '@ooh/protocol';
import type { PlatformContext } from '../context.js';
import { type Db, type DbClient, withTransaction } from '../db/pool.js';
import { validationFailed } from '../http/problem.js';
import { STRUCTURE_COLUMNS, type StructureRow } from './repository.js';
import { SCREEN_ID_FIELDS, screenIdViolation } from './identifiers.js';
import {
  coordinateErrors,
  type StructureFields,
  StructureRow as StructureRowSchema,
  venueTypeErrors,
} from './schema.js';

/** Structures belong to operators: the organisation must exist and be one. `path` names the field in the body. */
export async function operatorErrors(
  db: Db | DbClient,
  organisationId: string,
  path = '/organisation_id',
): Promise<FieldError[]> {
  const { rows } = await db.query<{ kind: string }>('SELECT kind FROM organisations WHERE id = $1', [
    organisationId,
  ]);
  if (!rows[0]) return [{ path, code: 'not_found', message: 'no such organisation' }];
  if (rows[0].kind !== 'operator')
    return [{ path, code: 'not_allowed', message: 'structures belong to operators' }];
  return [];
}

export interface ImportItem {
  /** Position of the row in `structures`, from 0. */
  index: number;
  code: string;
  /** created: new in the register (stored, or with dry_run to be stored); unchanged: already there, the same. */
  status: 'created' | 'unchanged';
  /** The structure's id; null for a row a dry run would create. */
  id: string | null;
}

export interface ImportAnswer {
  dry_run: boolean;
  created: number;
  unchanged: number;
  items: ImportItem[];
}

/**
 * A row as stored: what an existing structure must equal for the row to be "unchanged". The venue type and screen
 * identifiers are compared only where the row gives them: a file without those columns says nothing about them (they
 * may have been set since in the console), and an import never changes a stored structure.
 */
function sameStructure(existing: StructureRow, organisationId: string, row: StructureFields): boolean {
  const given = <K extends 'venue_type_id' | 'openooh_screen_id' | 'geopath_spot_id'>(k: K) =>
    row[k] === undefined || existing[k] === row[k];
  return (
    given('venue_type_id') &&
    given('openooh_screen_id') &&
    given('geopath_spot_id') &&
    existing.organisation_id === organisationId &&
    existing.district === row.district &&
    existing.format === row.format &&
    existing.address === (row.address ?? null) &&
    existing.lat === (row.lat ?? null) &&
    existing.lon === (row.lon ?? null)
  );
}

/**
 * An import of many structures for one operator (POST /api/v1/console/structures/import).
 *
 * All or nothing: every row is judged first, by the single create's schema and rules, and one field error per fault
 * is answered under its row's pointer (`/structures/{index}/{field}`), so a file is corrected and sent again whole;
 * nothing is stored while any row is wrong. Safe to run again: a row whose code is already registered with the same
 * fields is `unchanged`, not an error; a code registered otherwise (another operator, other fields, retired) is an
 * error of that row. The rows are stored in one transaction, by one statement; a code taken meanwhile by another
 * request is found by its ON CONFLICT and answered as a field error, with nothing stored.
 */
export async function importStructures(
  ctx: Pick<PlatformContext, 'db' | 'clock'>,
  body: { organisation_id: string; structures: readonly unknown[]; dry_run?: boolean },
): Promise<ImportAnswer> {
  const organisationId = body.organisation_id.toLowerCase();
  const errors: FieldError[] = await operatorErrors(ctx.db, organisationId);
  const rows: (StructureFields | null)[] = body.structures.map((raw, index) => {
    const prefix = `/structures/${index}`;
    const found = collectFieldErrors(StructureRowSchema, raw).map((e) => ({
      ...e,
      path: `${prefix}${e.path}`,
    }));
    if (found.length === 0) {
      found.push(...coordinateErrors(raw as StructureFields, prefix));
      found.push(...venueTypeErrors((raw as StructureFields).venue_type_id, prefix));
    }
    errors.push(...found);
    return found.length === 0 ? (raw as StructureFields) : null;
  });

  // A code twice in the file: the later row is the error (the first one is what the file means).
  const firstRowOfCode = new Map<string, number>();
  rows.forEach((row, index) => {
    if (!row) return;
    const first = firstRowOfCode.get(row.code);
    if (first === undefined) firstRowOfCode.set(row.code, index);
    else {
      errors.push({
        path: `/structures/${index}/code`,
        code: 'duplicate',
        message: `structure code ${row.code} is also in row ${first}`,
      });
    }
  });

  // A screen identifier twice in the file, or held by an active structure other than the row's own: one screen is
  // one structure.
  for (const field of SCREEN_ID_FIELDS) {
    const firstRowOfId = new Map<string, number>();
    rows.forEach((row, index) => {
      const value = row?.[field];
      if (value === undefined) return;
      const first = firstRowOfId.get(value);
      if (first === undefined) firstRowOfId.set(value, index);
      else {
        errors.push({
          path: `/structures/${index}/${field}`,
          code: 'duplicate',
          message: `${field} ${value} is also in row ${first}`,
        });
      }
    });
    const { rows: holders } = await ctx.db.query<{ code: string; value: string }>(
      `SELECT code, ${field} AS value FROM structures WHERE ${field} = ANY($1::text[]) AND retired_at IS NULL`,
      [[...firstRowOfId.keys()]],
    );
    for (const holder of holders) {
      const index = firstRowOfId.get(holder.value)!;
      if (rows[index]!.code === holder.code) continue;
      errors.push({
        path: `/structures/${index}/${field}`,
        code: 'duplicate',
        message: `${field} ${holder.value} is held by structure ${holder.code}`,
      });
    }
  }

  const codes = [...firstRowOfCode.keys()];
  const { rows: existingRows } = await ctx.db.query<StructureRow>(
    `SELECT ${STRUCTURE_COLUMNS} FROM structures WHERE code = ANY($1::text[])`,
    [codes],
  );
  const existing = new Map(existingRows.map((r) => [r.code, r]));
  const items: ImportItem[] = [];
  rows.forEach((row, index) => {
    if (!row || firstRowOfCode.get(row.code) !== index) return;
    const there = existing.get(row.code);
    if (!there) {
      items.push({ index, code: row.code, status: 'created', id: null });
    } else if (there.retired_at) {
      errors.push({
        path: `/structures/${index}/code`,
        code: 'retired',
        message: `structure code ${row.code} belongs to a retired structure`,
      });
    } else if (!sameStructure(there, organisationId, row)) {
      errors.push({
        path: `/structures/${index}/code`,
        code: 'duplicate',
        message:
          there.organisation_id === organisationId
            ? `structure code ${row.code} is registered with other fields`
            : `structure code ${row.code} is taken by another operator`,
      });
    } else {
      items.push({ index, code: row.code, status: 'unchanged', id: there.id });
    }
  });

  if (errors.length > 0) {
    throw validationFailed(
      errors.sort((a, b) => rowOf(a.path) - rowOf(b.path)),
      `${errors.length} field error(s); nothing was stored`,
    );
  }
  const created = items.filter((i) => i.status === 'created');
  if (body.dry_run === true || created.length === 0) {
    return {
      dry_run: body.dry_run === true,
      created: created.length,
      unchanged: items.length - created.length,
      items,
    };
  }

  const toStore = created.map((i) => rows[i.index]!);
  const stored = await withTransaction(ctx.db, async (client) => {
    const { rows: inserted } = await client
      .query<{ id: string; code: string }>(
        `INSERT INTO structures (organisation_id, code, district, format, address, lat, lon, created_at,
                               venue_type_id, openooh_screen_id, geopath_spot_id)
       SELECT $1, r.code, r.district, r.format, r.address, r.lat, r.lon, $8, r.venue, r.screen, r.spot
         FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::float8[], $9::int[],
                     $10::text[], $11::text[])
              AS r(code, district, format, address, lat, lon, venue, screen, spot)
       ON CONFLICT (code) DO NOTHING
       RETURNING id, code`,
        [
          organisationId,
          toStore.map((r) => r.code),
          toStore.map((r) => r.district),
          toStore.map((r) => r.format),
          toStore.map((r) => r.address ?? null),
          toStore.map((r) => r.lat ?? null),
          toStore.map((r) => r.lon ?? null),
          ctx.clock.now(),
          toStore.map((r) => r.venue_type_id ?? null),
          toStore.map((r) => r.openooh_screen_id ?? null),
          toStore.map((r) => r.geopath_spot_id ?? null),
        ],
      )
      .catch((error: unknown) => {
        // A screen identifier taken meanwhile by another request: the file's fault to correct, nothing stored.
        const fieldError = screenIdViolation(error);
        if (fieldError)
          throw validationFailed([fieldError], 'a screen identifier was taken meanwhile; nothing was stored');
        throw error;
      });
    const ids = new Map(inserted.map((r) => [r.code, r.id]));
    const missing = created.filter((i) => !ids.has(i.code));
    if (missing.length === 0) return { ids, meanwhile: new Set<string>() };
    // Registered by another request since the rows were judged (its transaction has committed: ON CONFLICT waited
    // for it). The same structure is "unchanged", as in a run after it; anything else and nothing is kept.
    const { rows: others } = await client.query<StructureRow>(
      `SELECT ${STRUCTURE_COLUMNS} FROM structures WHERE code = ANY($1::text[])`,
      [missing.map((i) => i.code)],
    );
    const byCode = new Map(others.map((r) => [r.code, r]));
    const taken = missing.filter((i) => {
      const there = byCode.get(i.code);
      return !there || there.retired_at || !sameStructure(there, organisationId, rows[i.index]!);
    });
    if (taken.length > 0) {
      throw validationFailed(
        taken.map((i) => ({
          path: `/structures/${i.index}/code`,
          code: 'duplicate',
          message: `structure code ${i.code} was registered meanwhile by another request`,
        })),
        `${taken.length} field error(s); nothing was stored`,
      );
    }
    for (const i of missing) ids.set(i.code, byCode.get(i.code)!.id);
    return { ids, meanwhile: new Set(missing.map((i) => i.code)) };
  });
  const final = items.map((i): ImportItem => {
    if (i.status !== 'created') return i;
    return stored.meanwhile.has(i.code)
      ? { ...i, status: 'unchanged', id: stored.ids.get(i.code)! }
      : { ...i, id: stored.ids.get(i.code)! };
  });
  const createdNow = final.filter((i) => i.status === 'created').length;
  return { dry_run: false, created: createdNow, unchanged: final.length - createdNow, items: final };
}

/** The row a field error belongs to (errors of the body itself first). */
function rowOf(path: string): number {
  const m = /^\/structures\/(\d+)/.exec(path);
  return m ? Number(m[1]) : -1;
}
