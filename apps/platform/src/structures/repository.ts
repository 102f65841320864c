import type { Db, DbClient } from '../db/pool.js';

export interface StructureRow {
  id: string;
  organisation_id: string;
  code: string;
  district: string;
  format: string;
  address: string | null;
  lat: number | null;
  lon: number | null;
  retired_at: Date | null;
  venue_type_id: number | null;
  openooh_screen_id: string | null;
  geopath_spot_id: string | null;
}

export const STRUCTURE_COLUMNS =
  'id, organisation_id, code, district, format, address, lat, lon, retired_at, venue_type_id, openooh_screen_id, ' +
  'geopath_spot_id';

export async function structuresByIds(
  db: Db | DbClient,
  ids: readonly string[],
): Promise<Map<string, StructureRow>> {
  if (ids.length === 0) return new Map();
  const { rows } = await db.query<StructureRow>(
    `SELECT ${STRUCTURE_COLUMNS} FROM structures WHERE id = ANY($1::uuid[])`,
    [ids],
  );
  return new Map(rows.map((r) => [r.id, r]));
}

/** Members of saved sets, in set order; retired structures are left out (spec: structure_set_ids). */
export async function expandStructureSets(
  db: Db | DbClient,
  organisationId: string,
  setIds: readonly string[],
): Promise<{ structureIds: string[]; missingSets: string[] }> {
  if (setIds.length === 0) return { structureIds: [], missingSets: [] };
  const { rows: sets } = await db.query<{ id: string }>(
    'SELECT id FROM structure_sets WHERE id = ANY($1::uuid[]) AND organisation_id = $2',
    [setIds, organisationId],
  );
  const found = new Set(sets.map((s) => s.id));
  const { rows } = await db.query<{ set_id: string; structure_id: string }>(
    `SELECT m.set_id, m.structure_id
       FROM structure_set_members m JOIN structures s ON s.id = m.structure_id
      WHERE m.set_id = ANY($1::uuid[]) AND s.retired_at IS NULL
      ORDER BY m.set_id, m.position`,
    [[...found]],
  );
  const bySet = new Map<string, string[]>();
  for (const r of rows) bySet.set(r.set_id, [...(bySet.get(r.set_id) ?? []), r.structure_id]);
  const structureIds = setIds.flatMap((id) => bySet.get(id) ?? []);
  return { structureIds, missingSets: setIds.filter((id) => !found.has(id)) };
}

export function structureView(row: StructureRow) {
  return {
    id: row.id,
    organisation_id: row.organisation_id,
    code: row.code,
    district: row.district,
    format: row.format,
    address: row.address,
    lat: row.lat,
    lon: row.lon,
    retired_at: row.retired_at ? row.retired_at.toISOString() : null,
    // issue 20 item 3: the OpenOOH venue type (1.2 enumeration id) and the screen's ids in other systems, or null.
    venue_type_id: row.venue_type_id,
    openooh_screen_id: row.openooh_screen_id,
    geopath_spot_id: row.geopath_spot_id,
  };
}
