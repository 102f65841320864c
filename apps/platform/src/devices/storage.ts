import type { DeviceStorage } from '@ooh/protocol';
import type { Db } from '../db/pool.js';

export type { DeviceStorage };

/**
 * The newest mode_change record of each device (the caller's organisation's; $1 null: every device) that carries
 * `detail.storage`, by the order it was sent in (receive day, batch, position), through the partial index of
 * migration 074.
 */
export const FLEET_STORAGE_SQL = `
   SELECT d.id AS device_id, m.state, m.free_bytes, m.at
     FROM devices d JOIN structures s ON s.id = d.structure_id
     JOIN LATERAL (SELECT r.detail -> 'storage' ->> 'state' AS state,
                          r.detail -> 'storage' ->> 'free_bytes' AS free_bytes, r.at
                     FROM pop_records r
                    WHERE r.player_key = 'device:' || d.id AND r.kind = 'mode_change'
                      AND (r.detail -> 'storage') IS NOT NULL
                    ORDER BY r.receive_day DESC, r.batch_id DESC, r.record_index DESC LIMIT 1) m ON true
    WHERE $1::uuid IS NULL OR s.organisation_id = $1`;

const STATES = new Set(['ok', 'low', 'full']);

/** Each device's last reported disk state (devices that never reported one, or not in a known shape, are absent). */
export async function deviceStorageOf(
  db: Db,
  organisationId: string | null,
  /** Only these devices (a page of the fleet list); absent: every device. */
  deviceIds?: readonly string[],
): Promise<Map<string, DeviceStorage>> {
  if (deviceIds?.length === 0) return new Map();
  const { rows } = await db.query<{
    device_id: string;
    state: string | null;
    free_bytes: string | null;
    at: Date | null;
  }>(
    deviceIds
      ? `SELECT * FROM (${FLEET_STORAGE_SQL}) page WHERE page.device_id = ANY ($2::uuid[])`
      : FLEET_STORAGE_SQL,
    deviceIds ? [organisationId, deviceIds] : [organisationId],
  );
  const out = new Map<string, DeviceStorage>();
  for (const row of rows) {
    if (row.state === null || !STATES.has(row.state)) continue;
    const free =
      row.free_bytes !== null && /^\d{1,16}$/.test(row.free_bytes) ? Number(row.free_bytes) : Number.NaN;
    out.set(row.device_id, {
      state: row.state as DeviceStorage['state'],
      free_bytes: Number.isSafeInteger(free) ? free : null,
      at: row.at ? row.at.toISOString() : null,
    });
  }
  return out;
}
