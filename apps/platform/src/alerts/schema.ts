import { DateTime, Uuid } from '@ooh/protocol';
import { type Static, Type } from '@sinclair/typebox';

/**
 * The kinds of fleet alert (issue "A newcomer's two commands ... and an operator's first day", item 5; docs/alerts.md):
 * - device_silent: "A device silent for a configurable time";
 * - screen_off: "a screen reported off during its operating hours";
 * - queue_lag: "a queue lag over an hour";
 * - cms_player_no_plays: "a mapped CMS player that sends batches with no plays".
 */
export const ALERT_KINDS = ['device_silent', 'screen_off', 'queue_lag', 'cms_player_no_plays'] as const;
export type AlertKind = (typeof ALERT_KINDS)[number];

export const ALERT_RESOLUTIONS = ['cleared', 'not_monitored'] as const;
export type AlertResolution = (typeof ALERT_RESOLUTIONS)[number];

const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);

/** One alert as the console and the fleet list show it (times in UTC, like the rest of the fleet list). */
export const AlertView = Type.Object({
  id: Uuid,
  kind: Type.Union(ALERT_KINDS.map((k) => Type.Literal(k))),
  state: Type.Union([Type.Literal('open'), Type.Literal('resolved')]),
  organisation_id: Uuid,
  /** The device (agent channel); null for a CMS player. */
  device_id: Nullable(Uuid),
  /** The CMS installation and the player's external id; null for a device. */
  cms_installation_id: Nullable(Uuid),
  player: Nullable(Type.String()),
  structure_id: Uuid,
  structure_code: Type.String(),
  /** When the condition began. */
  since: DateTime,
  /** The newest sign of life: the device's newest batch; a CMS player's newest counted play (its start). */
  last_seen_at: Nullable(DateTime),
  opened_at: DateTime,
  resolved_at: Nullable(DateTime),
  resolution: Type.Union([...ALERT_RESOLUTIONS.map((r) => Type.Literal(r)), Type.Null()]),
  /** The figures of the condition: thresholds in force, the lag measured, the operating hours (docs/alerts.md). */
  detail: Type.Record(Type.String(), Type.Union([Type.String(), Type.Number(), Type.Null()])),
});
export type AlertView = Static<typeof AlertView>;

export const AlertList = Type.Object({ items: Type.Array(AlertView) });
export type AlertList = Static<typeof AlertList>;
