import type { Db } from '../db/pool.js';
import { listAlerts } from './repository.js';
import type { AlertView } from './schema.js';
import { alertView } from './view.js';

/** Open alerts shown with the fleet list (src/devices/fleet.ts), as many as the console shows at once. */
export const FLEET_ALERTS_MAX = 500;

/** The open alerts `organisationId` may see (null: the authority, every one), newest first. */
export async function openAlertsOf(db: Db, organisationId: string | null): Promise<AlertView[]> {
  const rows = await listAlerts(db, {
    organisationId,
    state: 'open',
    kind: null,
    limit: FLEET_ALERTS_MAX,
    offset: 0,
  });
  return rows.map(alertView);
}
