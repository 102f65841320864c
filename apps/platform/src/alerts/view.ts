import { almatyDate, formatAlmaty } from '@ooh/protocol';
import type { AlertRow } from './repository.js';
import type { AlertView } from './schema.js';

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** An alert as the console API shows it (UTC times, like the fleet list it sits in). */
export function alertView(row: AlertRow): AlertView {
  return {
    id: row.id,
    kind: row.kind,
    state: row.resolved_at ? 'resolved' : 'open',
    organisation_id: row.organisation_id,
    device_id: row.device_id,
    cms_installation_id: row.installation_id,
    player: row.external_id,
    structure_id: row.structure_id,
    structure_code: row.structure_code,
    since: row.since.toISOString(),
    last_seen_at: iso(row.last_seen_at),
    opened_at: row.opened_at.toISOString(),
    resolved_at: iso(row.resolved_at),
    resolution: row.resolution,
    detail: row.detail,
  };
}

export type AlertEventType = 'alert_opened' | 'alert_resolved';

/**
 * The city event of an alert's opening or resolution, as listed by GET /api/v1/console/events and sent as the webhook
 * body (docs/alerts.md, docs/city-events.md): the shape of every city event, {id, type, day, created_at, data}, times
 * in Almaty time like the other city events.
 */
export interface AlertEvent {
  id: string;
  type: AlertEventType;
  /** The Almaty day of the opening or resolution. */
  day: string;
  created_at: string;
  data: {
    alert_id: string;
    kind: AlertRow['kind'];
    state: 'open' | 'resolved';
    organisation_id: string;
    device_id: string | null;
    cms_installation_id: string | null;
    player: string | null;
    structure_id: string;
    structure_code: string;
    since: string;
    last_seen_at: string | null;
    opened_at: string;
    resolved_at: string | null;
    resolution: AlertRow['resolution'];
    detail: AlertRow['detail'];
  };
}

export function alertEvent(type: AlertEventType, id: string, row: AlertRow, createdAt: Date): AlertEvent {
  const almaty = (d: Date | null) => (d ? formatAlmaty(d) : null);
  return {
    id,
    type,
    day: almatyDate(createdAt),
    created_at: formatAlmaty(createdAt),
    data: {
      alert_id: row.id,
      kind: row.kind,
      state: row.resolved_at ? 'resolved' : 'open',
      organisation_id: row.organisation_id,
      device_id: row.device_id,
      cms_installation_id: row.installation_id,
      player: row.external_id,
      structure_id: row.structure_id,
      structure_code: row.structure_code,
      since: formatAlmaty(row.since),
      last_seen_at: almaty(row.last_seen_at),
      opened_at: formatAlmaty(row.opened_at),
      resolved_at: almaty(row.resolved_at),
      resolution: row.resolution,
      detail: row.detail,
    },
  };
}
