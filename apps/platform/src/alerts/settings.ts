import { ConfigError } from '../config.js';

/**
 * Settings of fleet alerts, read from the platform configuration's settings (the config file's keys upper-cased,
 * then the environment; see PlatformConfig.settings and apps/platform/docs/alerts.md). Every bad value is named at
 * start (settings-check.ts).
 */
export interface AlertSettings {
  /** A device whose newest batch is older than this is silent (issue: "A device silent for a configurable time"). */
  silentAfterMs: number;
  /** A queue lag above this opens an alert (issue: "a queue lag over an hour"). */
  queueLagMs: number;
  /**
   * A mapped CMS player is without plays when its installation has stored a batch this long after the player's
   * newest counted play (issue: "a mapped CMS player that sends batches with no plays").
   */
  cmsQuietMs: number;
  /** The screens' operating hours, Almaty time, every day (issue: "a screen reported off during its operating hours"). */
  operatingHours: OperatingHours;
  /** How often the scheduler evaluates. */
  intervalMs: number;
}

/** Opening and closing as minutes after local midnight; closing may be after midnight (closes <= opens). */
export interface OperatingHours {
  /** As given, normalised to HH:MM-HH:MM. */
  text: string;
  opensMinute: number;
  closesMinute: number;
  /** Round the clock ("00:00-24:00"). */
  always: boolean;
}

export const ALERT_SETTINGS_ENV = {
  silentAfterMs: 'ALERT_DEVICE_SILENT_MINUTES',
  queueLagMs: 'ALERT_QUEUE_LAG_MINUTES',
  cmsQuietMs: 'ALERT_CMS_PLAYER_QUIET_MINUTES',
  operatingHours: 'ALERT_SCREEN_OPERATING_HOURS',
  intervalMs: 'ALERT_INTERVAL_SECONDS',
} as const;

const MINUTE_MS = 60_000;
const WEEK_MINUTES = 7 * 24 * 60;

export const DEFAULT_OPERATING_HOURS = '07:00-23:00';

/**
 * The evaluation must run more often than this, or it takes the gap for the platform having been down
 * (evaluate.ts OUTAGE_GAP_MS), hence the interval's limit of 5 minutes.
 */
const MAX_INTERVAL_SECONDS = 300;

export const DEFAULT_ALERT_SETTINGS: AlertSettings = {
  silentAfterMs: 30 * MINUTE_MS,
  queueLagMs: 60 * MINUTE_MS,
  cmsQuietMs: 60 * MINUTE_MS,
  operatingHours: parseOperatingHours(DEFAULT_OPERATING_HOURS)!,
  intervalMs: 30_000,
};

/** "HH:MM-HH:MM" (24:00 allowed as a closing time); null when it is not that. */
export function parseOperatingHours(text: string): OperatingHours | null {
  const match = /^([01][0-9]|2[0-3]):([0-5][0-9])-([01][0-9]|2[0-4]):([0-5][0-9])$/.exec(text.trim());
  if (!match) return null;
  const opensMinute = Number(match[1]) * 60 + Number(match[2]);
  const closesMinute = Number(match[3]) * 60 + Number(match[4]);
  if (closesMinute > 24 * 60) return null;
  const always = opensMinute === 0 && closesMinute === 24 * 60;
  // 07:00-07:00 is no window at all; round the clock is written 00:00-24:00.
  if (!always && closesMinute % (24 * 60) === opensMinute) return null;
  return { text: text.trim(), opensMinute, closesMinute: closesMinute % (24 * 60), always };
}

/** The settings, or ConfigError naming every bad value. */
export function alertSettings(env: NodeJS.ProcessEnv = process.env): AlertSettings {
  const problems: string[] = [];
  const whole = (
    key: 'silentAfterMs' | 'queueLagMs' | 'cmsQuietMs' | 'intervalMs',
    unitMs: number,
    max: number,
  ) => {
    const name = ALERT_SETTINGS_ENV[key];
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') return DEFAULT_ALERT_SETTINGS[key];
    const value = Number(raw.trim());
    if (!/^[0-9]+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < 1 || value > max) {
      problems.push(`${name}: "${raw}" is not a whole number from 1 to ${max}`);
      return DEFAULT_ALERT_SETTINGS[key];
    }
    return value * unitMs;
  };
  const hoursName = ALERT_SETTINGS_ENV.operatingHours;
  const hoursRaw = env[hoursName];
  let operatingHours = DEFAULT_ALERT_SETTINGS.operatingHours;
  if (hoursRaw !== undefined && hoursRaw.trim() !== '') {
    const parsed = parseOperatingHours(hoursRaw);
    if (parsed) operatingHours = parsed;
    else {
      problems.push(
        `${hoursName}: "${hoursRaw}" is not HH:MM-HH:MM in Almaty time (for example 07:00-23:00, 18:00-02:00, or 00:00-24:00 for round the clock)`,
      );
    }
  }
  const settings: AlertSettings = {
    silentAfterMs: whole('silentAfterMs', MINUTE_MS, WEEK_MINUTES),
    queueLagMs: whole('queueLagMs', MINUTE_MS, WEEK_MINUTES),
    cmsQuietMs: whole('cmsQuietMs', MINUTE_MS, WEEK_MINUTES),
    operatingHours,
    intervalMs: whole('intervalMs', 1000, MAX_INTERVAL_SECONDS),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return settings;
}
