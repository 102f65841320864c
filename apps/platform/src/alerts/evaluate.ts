import { randomUUID } from 'node:crypto';
import { insertEvents, type NewEvent } from '../city-events/repository.js';
import type { PlatformContext } from '../context.js';
import { withTransaction } from '../db/pool.js';
import { operatingWindowAt } from './operating-hours.js';
import {
  type AlertRow,
  advanceWatch,
  type Condition,
  currentConditions,
  insertAlerts,
  type NewAlert,
  openAlerts,
  queueLagRunStarts,
  refreshAlerts,
  type ResolvedAlert,
  resolveAlerts,
  subjectStates,
} from './repository.js';
import type { AlertKind } from './schema.js';
import { type AlertSettings, alertSettings } from './settings.js';
import { type AlertEventType, alertEvent } from './view.js';

/*
 * Issue "A newcomer's two commands ... and an operator's first day", item 5: "Alerts an operator would expect ... shown
 * on the fleet page and delivered through the existing signed webhooks. Never alert on a device that has not yet sent
 * anything." (docs/alerts.md)
 *
 * An alert opens when its condition starts and resolves when it ends; between the two, evaluations only keep its
 * figures current. Each opening and each resolution is one city event (alert_opened, alert_resolved) stored in the same
 * transaction as the change of the alert row, so the existing webhooks deliver it once per subscription (at least
 * once, deduplicated by X-Event-Id) however often the conditions are evaluated. One instance evaluates at a time (a
 * transaction-level advisory lock; the others skip their turn), and the unique index on open alerts is the last line of
 * defence.
 */

/**
 * An evaluation more than this after the previous one means the platform (every instance of it) was not watching: the
 * silence and the queue lag of that time are not the devices' doing, so they are counted from the new start.
 */
export const OUTAGE_GAP_MS = 10 * 60_000;

const LOCK_KEY = 'ooh:alerts';
const MINUTE_MS = 60_000;

export interface Evaluation {
  /** The alerts opened and resolved by this evaluation. */
  opened: AlertRow[];
  resolved: AlertRow[];
  /** Open alerts after it. */
  open: number;
  /** The start of the platform's watch (silence and lag are counted from it at the earliest). */
  watchingSince: Date;
}

const keyOf = (kind: AlertKind, subjectKey: string) => `${kind} ${subjectKey}`;

/** Same keys and values, whatever their order (jsonb orders keys its own way). */
function sameDetail(a: AlertRow['detail'], b: AlertRow['detail']): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => k in b && a[k] === b[k]);
}

/** The figures shown with an alert: the threshold in force and what was measured. */
function detailOf(condition: Condition, settings: AlertSettings): AlertRow['detail'] {
  switch (condition.kind) {
    case 'device_silent':
      return { silent_after_minutes: settings.silentAfterMs / MINUTE_MS };
    case 'queue_lag':
      return {
        queue_lag_seconds: condition.lagSeconds,
        threshold_minutes: settings.queueLagMs / MINUTE_MS,
      };
    case 'screen_off':
      return {
        operating_hours: settings.operatingHours.text,
        screen_off_at: condition.screenOffAt?.toISOString() ?? null,
      };
    case 'cms_player_no_plays':
      return { quiet_after_minutes: settings.cmsQuietMs / MINUTE_MS };
  }
}

/** The city event of an alert's opening or resolution (one per alert and transition: never stored twice). */
function eventOf(type: AlertEventType, row: AlertRow, now: Date): NewEvent {
  const id = randomUUID();
  const event = alertEvent(type, id, row, now);
  return {
    id,
    type,
    subjectKey: row.id,
    day: event.day,
    payload: event.data,
    body: JSON.stringify(event),
    createdAt: now,
    organisationId: row.organisation_id,
  };
}

/**
 * One evaluation at `now`: opens the alerts whose condition started, resolves those whose condition ended, and keeps
 * the figures of the others current. Returns null when another instance is evaluating (its result will do).
 */
export async function evaluateAlerts(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'config' | 'log'>,
  now: Date = ctx.clock.now(),
  settings: AlertSettings = alertSettings(ctx.config.settings),
): Promise<Evaluation | null> {
  const result = await withTransaction(ctx.db, async (client) => {
    const { rows } = await client.query<{ locked: boolean }>(
      'SELECT pg_try_advisory_xact_lock(hashtext($1)) AS locked',
      [LOCK_KEY],
    );
    if (!rows[0]?.locked) return null;
    const watchingSince = await advanceWatch(client, now, OUTAGE_GAP_MS);
    const window = operatingWindowAt(now, settings.operatingHours);
    const conditions = await currentConditions(client, {
      now,
      silentAfterMs: settings.silentAfterMs,
      watchingSince,
      queueLagMs: settings.queueLagMs,
      operatingNow: window.open,
      operatingSince: window.opensAt,
      cmsQuietMs: settings.cmsQuietMs,
    });
    const current = new Map(conditions.map((c) => [keyOf(c.kind, c.subjectKey), c]));
    const open = await openAlerts(client);
    const openKeys = new Set(open.map((a) => keyOf(a.kind, a.subject_key)));

    // Every write below is a few statements however many alerts change (insertEvents, insertAlerts, ...): after a
    // network outage a whole fleet's alerts open in one evaluation.
    const starting = conditions.filter((c) => !openKeys.has(keyOf(c.kind, c.subjectKey)));
    // A queue lag began with the first of the lagging batches, not with the newest one.
    const lagStarts = await queueLagRunStarts(
      client,
      starting.filter((c) => c.kind === 'queue_lag').map((c) => c.deviceId!),
      settings.queueLagMs,
    );
    const opened: AlertRow[] = [];
    const openedAlerts: NewAlert[] = [];
    const events: NewEvent[] = [];
    for (const condition of starting) {
      const since =
        condition.kind === 'queue_lag'
          ? (lagStarts.get(condition.deviceId!) ?? condition.since)
          : condition.since;
      const row: AlertRow = {
        id: randomUUID(),
        kind: condition.kind,
        subject_key: condition.subjectKey,
        organisation_id: condition.organisationId,
        device_id: condition.deviceId,
        installation_id: condition.installationId,
        external_id: condition.externalId,
        structure_id: condition.structureId,
        structure_code: condition.structureCode,
        since,
        last_seen_at: condition.lastSeenAt,
        detail: detailOf(condition, settings),
        opened_at: now,
        resolved_at: null,
        resolution: null,
      };
      const event = eventOf('alert_opened', row, now);
      events.push(event);
      openedAlerts.push({ ...row, opened_event_id: event.id });
      opened.push(row);
    }

    const ended = open.filter((a) => !current.has(keyOf(a.kind, a.subject_key)));
    const states = await subjectStates(
      client,
      {
        deviceIds: [...new Set(ended.filter((a) => a.device_id).map((a) => a.device_id!))],
        players: ended
          .filter((a) => a.installation_id)
          .map((a) => ({ installationId: a.installation_id!, externalId: a.external_id! })),
      },
      now,
    );
    const resolved: AlertRow[] = [];
    const resolutions: ResolvedAlert[] = [];
    for (const alert of ended) {
      const state = states.get(alert.subject_key);
      const row: AlertRow = {
        ...alert,
        last_seen_at: state?.lastSeenAt ?? alert.last_seen_at,
        resolved_at: now < alert.opened_at ? alert.opened_at : now,
        // The condition ended because nobody watches the subject any more (device revoked, structure retired,
        // player unmapped), or because it really ended.
        resolution: state?.monitored ? 'cleared' : 'not_monitored',
      };
      const event = eventOf('alert_resolved', row, now);
      events.push(event);
      resolutions.push({
        id: row.id,
        at: row.resolved_at!,
        resolution: row.resolution!,
        lastSeenAt: row.last_seen_at,
        eventId: event.id,
      });
      resolved.push(row);
    }
    // The events first: an alert row names its event.
    await insertEvents(client, events);
    await insertAlerts(client, openedAlerts);
    await resolveAlerts(client, resolutions);

    const refreshed: Parameters<typeof refreshAlerts>[1][number][] = [];
    for (const alert of open) {
      const condition = current.get(keyOf(alert.kind, alert.subject_key));
      if (!condition) continue;
      const detail = detailOf(condition, settings);
      // Written only when something changed: a fleet's open alerts mostly stay as they are between two evaluations.
      if (
        condition.lastSeenAt?.getTime() !== alert.last_seen_at?.getTime() ||
        !sameDetail(detail, alert.detail)
      ) {
        refreshed.push({ id: alert.id, lastSeenAt: condition.lastSeenAt, detail });
      }
    }
    await refreshAlerts(client, refreshed);
    return { opened, resolved, open: open.length - resolved.length + opened.length, watchingSince };
  });
  if (result && (result.opened.length > 0 || result.resolved.length > 0)) {
    ctx.log.info(
      { opened: result.opened.length, resolved: result.resolved.length, open: result.open },
      'fleet alerts changed',
    );
  }
  return result;
}
